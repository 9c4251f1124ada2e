package lua_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

type pauseCase struct {
	Config string `json:"config"`
	// Call is "pause" (Pacer.Pause), "throttled" (Lease.Fail on a
	// provider's 429 for Limit, refusing a call of Tokens) or "sync"
	// (Pacer.Sync: the provider's headers report Remaining room, by
	// "requests" and "tokens"); "stop" (Pacer.Stop), "stop_quota"
	// (Lease.Fail on an exhausted quota, in a budget whose
	// Config.QuotaProbe is ProbeUs, 0 for the default) or "resume"
	// (Pacer.Resume), which run stop.lua instead. A Fail first ends its
	// lease (settle.lua); Args are the pause's or the stop's.
	Call      string           `json:"call"`
	Remaining map[string]int64 `json:"remaining,omitempty"`
	DUs       int64            `json:"d_us"` // the pause asked for, in µs
	ProbeUs   int64            `json:"probe_us,omitempty"`
	Limit     string           `json:"limit,omitempty"`
	Tokens    int64            `json:"tokens,omitempty"`
	// Input and Output split the refused call's tokens (Tokens is 0 or
	// their sum).
	Input  int64    `json:"input,omitempty"`
	Output int64    `json:"output,omitempty"`
	Model  string   `json:"model,omitempty"` // the refused call's model, for its weight
	Error  string   `json:"error,omitempty"`
	Args   []string `json:"args,omitempty"` // pause's ARGV
}

var classifyLimits = map[string]classify.Limit{
	"unknown": classify.LimitUnknown, "requests": classify.LimitRequests, "tokens": classify.LimitTokens,
	"input_tokens": classify.LimitInputTokens, "output_tokens": classify.LimitOutputTokens,
}

func pauseVectors(t *testing.T) any {
	pause := func(config string, d time.Duration) pauseCase {
		return pauseCase{Config: config, Call: "pause", DUs: d.Microseconds()}
	}
	sync := func(config string, remaining map[string]int64) pauseCase {
		return pauseCase{Config: config, Call: "sync", Remaining: remaining}
	}
	throttled := func(config string, d time.Duration, limit string, tokens int64) pauseCase {
		return pauseCase{Config: config, Call: "throttled", DUs: d.Microseconds(), Limit: limit, Tokens: tokens}
	}
	splitThrottled := func(config string, d time.Duration, limit string, input, output int64) pauseCase {
		c := throttled(config, d, limit, 0)
		c.Input, c.Output = input, output
		return c
	}
	cases := []pauseCase{
		pause("basic", 1500*time.Millisecond),
		pause("basic", 2300*time.Microsecond),
		pause("basic", 400*time.Microsecond),
		pause("basic", 0),
		pause("basic", 8*24*time.Hour),
		throttled("basic", 2*time.Second, "requests", 1300),
		throttled("basic", 2*time.Second, "tokens", 1300),
		throttled("basic", 2*time.Second, "input_tokens", 1300),
		throttled("basic", 2*time.Second, "output_tokens", 1300),
		throttled("basic", 2*time.Second, "unknown", 1300),
		throttled("basic", 20*time.Second, "unknown", 0),
		throttled("everything", 1500*time.Millisecond, "unknown", 4000),
		throttled("headroom", time.Second, "unknown", 1300),
		throttled("headroom", time.Second, "unknown", 5000),
		throttled("daily", time.Second, "unknown", 5000),
		throttled("concurrency-only", time.Second, "unknown", 5000),
		sync("basic", map[string]int64{"requests": 40, "tokens": 1300}),
		sync("basic", map[string]int64{"tokens": 0}),
		sync("basic", map[string]int64{"requests": 10_000_000, "tokens": -5}),
		sync("headroom", map[string]int64{"requests": 40, "tokens": 150_000}),
		sync("headroom", map[string]int64{"tokens": 5000}),
		sync("daily", map[string]int64{"requests": 3, "tokens": 5000}),
		// Rates: the buckets of a minute or shorter whose unit the
		// provider's limit names; an input or output bucket is lowered by
		// the refused call's input or output when it gives them.
		throttled("rates", 2*time.Second, "requests", 1300),
		throttled("rates", 2*time.Second, "tokens", 1300),
		throttled("rates", 2*time.Second, "unknown", 1300),
		splitThrottled("rates", 2*time.Second, "tokens", 1000, 300),
		splitThrottled("rates", 2*time.Second, "input_tokens", 1000, 300),
		splitThrottled("rates", 2*time.Second, "output_tokens", 1000, 300),
		splitThrottled("rates-windows", time.Second, "unknown", 5000, 1000),
		throttled("rates-rpm", time.Second, "unknown", 1300),
		// Sliding windows are never lowered: the pause holds them back.
		throttled("rates-exact", time.Second, "unknown", 1300),
		sync("rates-exact", map[string]int64{"requests": 3, "tokens": 1300}),
		sync("rates", map[string]int64{"requests": 40, "tokens": 1300}),
		sync("rates-rpm", map[string]int64{"requests": 40, "tokens": 1300}),
		// Stops (stop.lua): {ms, probe interval ms, kind}; resume {0, 0, "stop"}.
		stopQuota("basic", time.Hour, 30*time.Second),
		stopQuota("basic", 90*time.Second, 0),
		stopQuota("basic", 2300*time.Microsecond, 1500*time.Microsecond),
		stopQuota("basic", time.Hour, 500*time.Microsecond),
		stopQuota("basic", time.Hour, 8*24*time.Hour),
		{Config: "basic", Call: "stop", DUs: (5 * time.Minute).Microseconds()},
		{Config: "basic", Call: "stop", DUs: 400},
		{Config: "basic", Call: "stop", DUs: (8 * 24 * time.Hour).Microseconds()},
		{Config: "tenants", Call: "resume"},
		// A weighted model's tokens lower token buckets weighed; spend
		// rates are never lowered.
		func() pauseCase {
			c := splitThrottled("spend", time.Second, "unknown", 1000, 500)
			c.Model = "gpt-4o"
			return c
		}(),
		func() pauseCase {
			c := throttled("weights", time.Second, "tokens", 1000)
			c.Model = "gpt-4o-mini"
			return c
		}(),
	}
	for i := range cases {
		c := &cases[i]
		vc := configByName(t, c.Config)
		cfg := vc.config()
		cfg.QuotaProbe = time.Duration(c.ProbeUs) * time.Microsecond
		if _, err := pacer.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), cfg); err != nil {
			c.Error = errName(err) // a QuotaProbe out of range: refused before any script runs
			continue
		}
		inBubble(t, cfg, func(p *pacer.Pacer, f *fakeWire) {
			ctx := context.Background()
			d := time.Duration(c.DUs) * time.Microsecond
			var err error
			var failed *pacer.Lease // the refused call's lease, for Fail
			if c.Call == "throttled" || c.Call == "stop_quota" {
				f.queue(admitted(vc.ttl()))
				if failed, err = p.TryAcquire(ctx, pacer.Request{Tokens: c.Tokens, Input: c.Input, Output: c.Output, Model: c.Model}); err != nil {
					t.Fatalf("%s: TryAcquire: %v", c.Config, err)
				}
				f.take()
				f.queue([]any{int64(1), nowUs + 1000}) // settle.lua: released or rejected
			}
			f.queue([]any{max(d.Milliseconds(), 1), nowUs})
			switch c.Call {
			case "sync":
				var rl classify.RateLimits
				if n, ok := c.Remaining["requests"]; ok {
					rl.Requests = classify.Window{Remaining: n, HasRemaining: true}
				}
				if n, ok := c.Remaining["tokens"]; ok {
					rl.Tokens = classify.Window{Remaining: n, HasRemaining: true}
				}
				err = p.Sync(ctx, rl)
			case "pause":
				err = p.Pause(ctx, d)
			case "stop":
				err = p.Stop(ctx, d)
			case "stop_quota":
				err = failed.Fail(ctx, classify.Verdict{Kind: classify.QuotaExhausted, Status: 429, RetryAfter: d}, nil)
			case "resume":
				err = p.Resume(ctx)
			default:
				err = failed.Fail(ctx, classify.Verdict{Kind: classify.RateLimited, Status: 429, Limit: classifyLimits[c.Limit], RetryAfter: d}, nil)
			}
			calls := f.take()
			if failed != nil && len(calls) > 0 {
				calls = calls[1:] // the lease's end
			}
			if err != nil {
				c.Error = errName(err)
				return
			}
			if c.Call == "sync" && len(calls) == 0 {
				return // nothing the budget limits: no call
			}
			c.Args = only(t, c.Config+" "+c.Call, calls).Args
		})
	}
	return map[string]any{
		"comment": "What pause is sent. pause: {ms}, the pause in whole ms, at least 1. throttled (a provider's 429): the same, then for " +
			"each bucket with a window of a minute or less that counts what the provider's limit names (requests: requests; tokens: tokens, input and output tokens; " +
			"input_tokens: tokens and input tokens; output_tokens: tokens and output tokens; unknown: all), in the buckets' order, " +
			"its field, span − charge(min(units, capacity)) and 2 × span, in µs, where units are the refused call's, as acquire counts them " +
			"(input and output, when given, split tokens). error invalid: refused before any script runs. " +
			"sync (a provider's rate-limit headers): {0}, then for rpm (requests) and tpm (tokens) when reported and configured, its field, " +
			"span − charge(clamp(remaining − (limit − limit after Headroom), 0, capacity)) and 2 × span; no args: no script call. " +
			"stop, stop_quota and resume run stop.lua instead: {stop ms (whole, truncated), probe interval ms (0 for an operator's stop; probe_us 0 takes 60000), kind \"stop\" or \"quota\"}; resume {0, 0, \"stop\"}.",
		"cases": cases,
	}
}

// stopQuota is a Fail on an exhausted quota that names d, in a budget
// probing every probe (0: the default).
func stopQuota(config string, d, probe time.Duration) pauseCase {
	return pauseCase{Config: config, Call: "stop_quota", DUs: d.Microseconds(), ProbeUs: probe.Microseconds()}
}

type snapshotCase struct {
	Name   string   `json:"name"`
	Config string   `json:"config"`
	Reply  any      `json:"reply"`
	Args   []string `json:"args,omitempty"` // snapshot's ARGV: the configured buckets' fields, then qs (the stop)
	Error  string   `json:"error,omitempty"`
	Result *vsnap   `json:"result,omitempty"`
}

// vsnap is a snapshot as the Go client reports it.
type vsnap struct {
	TimeUs      int64       `json:"time_us"`
	PausedMs    int64       `json:"paused_ms"`
	InFlight    int64       `json:"in_flight"`
	Concurrency int64       `json:"concurrency"`
	Buckets     []vsnapBuck `json:"buckets"`
	StoppedMs   int64       `json:"stopped_ms,omitempty"`
	StoppedBy   string      `json:"stopped_by,omitempty"`
}

type vsnapBuck struct {
	Field     string  `json:"field"`
	Limit     int64   `json:"limit"`
	Capacity  int64   `json:"capacity"`
	Level     float64 `json:"level"`
	PerSecond float64 `json:"per_second"`
}

func snapshotVectors(t *testing.T) any {
	const n = nowUs
	s := func(us int64) string { return strconv.FormatInt(us, 10) }
	cases := []snapshotCase{
		{Name: "never used: full", Config: "basic", Reply: []any{n, int64(0), int64(0), "", "", ""}},
		{Name: "TATs at and before now: full", Config: "basic", Reply: []any{n, int64(0), int64(0), s(n), s(n - 1), ""}},
		{Name: "half full; empty", Config: "basic", Reply: []any{n, int64(0), int64(3), s(n + 30_000_000), s(n + 60_000_000), ""}},
		{Name: "turns reserved ahead: below zero", Config: "basic", Reply: []any{n, int64(250), int64(1), s(n + 90_000_000), s(n + 61_234_567), ""}},
		{Name: "just short of full", Config: "basic", Reply: []any{n, int64(0), int64(0), s(n + 1), s(n + 1), ""}},
		{Name: "every bucket", Config: "everything", Reply: []any{n, int64(1500), int64(7), s(n + 17_142_857), "", s(n + 86_400_000_000), s(n + 1_000_000), ""}},
		{Name: "buckets with a burst", Config: "headroom", Reply: []any{n, int64(0), int64(0), s(n + 12_345_678), s(n + 20_000_000), "", ""}},
		{Name: "headroom", Config: "headroom", Reply: []any{n, int64(0), int64(0), s(n + 3_000_000), s(n + 3_000_000), s(n + 3_000_000), ""}},
		{Name: "concurrency only", Config: "concurrency-only", Reply: []any{n, int64(0), int64(2), ""}},
		{Name: "stopped for the quota", Config: "basic", Reply: []any{n, int64(0), int64(0), "", "", fmt.Sprintf("%d %d 60000 quota", n/1000+3_600_000, n/1000+60_000)}},
		{Name: "stopped by an operator", Config: "basic", Reply: []any{n, int64(0), int64(0), "", "", fmt.Sprintf("%d %d 0 stop", n/1000+90_000, n/1000)}},
		{Name: "a stop that has ended", Config: "basic", Reply: []any{n, int64(0), int64(0), "", "", fmt.Sprintf("%d %d 60000 quota", n/1000-1, n/1000+60_000)}},
		{Name: "a stop that is not one", Config: "basic", Reply: []any{n, int64(0), int64(0), "", "", "soon"}},
		{Name: "a TAT that is not an integer", Config: "basic", Reply: []any{n, int64(0), int64(0), "12.5", ""}},
		{Name: "a missing TAT", Config: "basic", Reply: []any{n, int64(0), int64(0), ""}},
		{Name: "a TAT as a number", Config: "basic", Reply: []any{n, int64(0), int64(0), n, ""}},
		// Rates follow the four, in the order configured.
		{Name: "rates", Config: "rates", Reply: []any{n, int64(0), int64(0), s(n + 30_000_000), s(n + 1_800_000_000), "", s(n + 20_000_000), ""}},
		{Name: "rates given for rpm and tpm", Config: "rates-rpm", Reply: []any{n, int64(0), int64(0), s(n), s(n + 60_000_000), s(n + 3_600_000_000), ""}},
		// Sliding windows: counts per sub-window of 156,250 µs in a ring
		// of 65 up to its head, read from the rate's field alone: the
		// level counts the head's count while the head is in the window
		// ending now (turns reserved ahead too), the older ones while any
		// may be, and the folded ones while the latest of them is. A
		// value of the format before counts every count not rolled out.
		{Name: "exact sliding windows", Config: "rates-exact", Reply: []any{n, int64(0), int64(0), s(n + 1_000_000),
			slidingValue(n/1000*1000/156_250, 50), fmt.Sprintf("%d 4 0 0 2", n/1000*1000/156_250-1), "", ""}},
		{Name: "sliding counts folded and rolled out", Config: "rates-exact", Reply: []any{n, int64(0), int64(0), "",
			slidingValue(n/1000*1000/156_250-1, 50), "", "", ""}},
		{Name: "sliding counts that are not counts", Config: "rates-exact", Reply: []any{n, int64(0), int64(0), "", "12 x", "", "", ""}},
		{Name: "sliding header with a number that is not one", Config: "rates-exact", Reply: []any{n, int64(0), int64(0), "",
			"1:2:3:4:5:x", "", "", ""}},
		{Name: "the stop missing after the rates", Config: "rates", Reply: []any{n, int64(0), int64(0), "", "", "", ""}},
	}
	for i := range cases {
		c := &cases[i]
		inBubble(t, configByName(t, c.Config).config(), func(p *pacer.Pacer, f *fakeWire) {
			f.queue(c.Reply)
			snap, err := p.Snapshot(context.Background())
			c.Args = only(t, c.Name, f.take()).Args
			if err != nil {
				c.Error = errName(err)
				return
			}
			r := &vsnap{TimeUs: snap.Time.UnixMicro(), PausedMs: snap.Paused.Milliseconds(), InFlight: snap.InFlight, Concurrency: snap.Concurrency, Buckets: []vsnapBuck{},
				StoppedMs: snap.Stopped.Milliseconds(), StoppedBy: stopKind(snap.StoppedBy)}
			for _, b := range snap.Rates {
				r.Buckets = append(r.Buckets, vsnapBuck{b.Rate.Name(), b.Limit, b.Capacity, b.Level, b.PerSecond})
			}
			c.Result = r
		})
	}
	return map[string]any{
		"comment": "How the Go client reads snapshot's reply {now_us, pause_remaining_ms, leases_in_flight, TAT per field as a string, \"\" for none, then the qs field}: " +
			"level = capacity with no TAT or one at or before now, else min(capacity, (now_us + span − TAT) / interval), as float64; " +
			"qs, if set, is \"<end ms> <next probe ms> <probe interval ms> <kind>\" (see stop.lua): stopped_ms = end − floor(now_us/1000) when positive, stopped_by = kind.",
		"cases": cases,
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// slidingValue returns a sliding window's field whose ring's head is a
// sub-window after cur, with 300 units there (a turn reserved ahead), 300
// in the older sub-windows, and folded units before the ring, the latest
// of them in cur-64.
func slidingValue(cur, folded int64) string {
	return wire.SlidingState{Head: cur + 1, Last: cur + 1, Total: 300, Current: 300, Folded: folded, FoldedLast: cur - 64}.Header()
}

// stopKind names a stop as the vectors record it, in the kind lua/stop.lua
// stores: "quota", "stop", or "" for none.
func stopKind(by error) string {
	switch {
	case errors.Is(by, pacer.ErrQuotaExhausted):
		return "quota"
	case by != nil:
		return "stop"
	}
	return ""
}
