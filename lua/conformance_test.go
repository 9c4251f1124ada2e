package lua_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

var update = flag.Bool("update", false, "rewrite testdata/conformance from what the Go client sends")

// defaultLeaseTTL is Config.LeaseTTL's default, which the vectors' budgets
// keep.
const defaultLeaseTTL = 10 * time.Minute

// The conformance vectors that docs/lua-contract.md publishes for workers in
// other languages: configurations and requests in, the exact script
// arguments out; replies in, their meaning out. They are recorded from the
// public Go API, a Pacer and its leases, on a fake Redis that logs every
// script call and answers from a queue, so they are what production sends,
// with no second copy of its arithmetic. Each case runs in a synctest
// bubble, where no time passes while the code runs: an Acquire then sends
// its whole wait bound, and a retried admission's charge time is exact.
//
// The test fails when a committed file differs from what the code now
// produces; run it with -update to rewrite them, and read the diff: a
// change there is a change to the contract that every port must follow.
// clients/python checks itself against these files.
func TestConformanceVectors(t *testing.T) {
	files := []struct {
		name string
		gen  func(t *testing.T) any
	}{
		{"scripts.json", scriptVectors},
		{"config.json", configVectors},
		{"acquire.json", acquireVectors},
		{"acquire_reply.json", acquireReplyVectors},
		{"settle.json", settleVectors},
		{"lease_reply.json", leaseReplyVectors},
		{"pause.json", pauseVectors},
		{"snapshot.json", snapshotVectors},
		{"define.json", defineVectors},
		{"group.json", groupVectors},
	}
	for _, f := range files {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(f.gen(t)); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		got := buf.Bytes()
		path := filepath.Join("testdata", "conformance", f.name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v; run go test ./lua -run TestConformanceVectors -update", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the Go client sends now (%d bytes, committed %d): the contract changed; run go test ./lua -run TestConformanceVectors -update, review the diff, and update docs/lua-contract.md and clients/python to match", path, len(got), len(want))
		}
	}
}

// scripts.json: each script's full text as sent, by SHA-1 (EVALSHA's name
// for it) and length, so that a port can check that it joins the files as
// Source does.
func scriptVectors(*testing.T) any {
	type script struct {
		Name  string `json:"name"`
		SHA1  string `json:"sha1"`
		Bytes int    `json:"bytes"`
	}
	var out []script
	for _, name := range []string{"acquire", "acquires", "settle", "settles", "keepalive", "pause", "stop", "snapshot", "define", "route"} {
		src := lua.Source(name)
		sum := sha1.Sum([]byte(src))
		out = append(out, script{name, hex.EncodeToString(sum[:]), len(src)})
	}
	return map[string]any{
		"comment": "lua.Source(name) = the prelude + \"\\n\" + <name>.lua's bytes; the prelude = prelude.lua's bytes (with its final newline) + \"local function slib()\\n\" + sliding.lua + \"end\\n\" + \"local function glib(cover, push, slib, PENDING, LIVE, BATCH, SK)\\n\" + slots.lua + \"end\\n\". route, acquires and settles are built otherwise: see their sections of docs/lua-contract.md. EVALSHA names a script by the SHA-1 of that text.",
		"scripts": out,
	}
}

// fakeWire stands in for Redis under a Pacer: it logs every script call
// and answers it from a queue. It never dials.
type fakeWire struct {
	mu      sync.Mutex
	calls   []wireCall
	replies []any // a reply, or an error the call fails with
	ids     map[string]string
	closed  bool // every call fails with redis.ErrClosed, unrecorded
}

// wireCall is one script call as Redis receives it: every argument is a
// string. Lease ids (random) are logged as "<id>", "<id2>", ... in the
// order they first appear, so that a reused id shows.
type wireCall struct {
	Script string   `json:"script"`
	Keys   []string `json:"keys,omitempty"`
	Args   []string `json:"args"`
}

var errNoReply = errors.New("fake: no reply queued")

// errLost is the failure the fake answers a call with when a test queues
// it: a reply lost on the way back.
var errLost = errors.New("fake: connection reset")

var scriptNames = map[string]string{
	lua.Acquire.Hash(): "acquire", lua.Settle.Hash(): "settle", lua.KeepAlive.Hash(): "keepalive",
	lua.Pause.Hash(): "pause", lua.Snapshot.Hash(): "snapshot", lua.Stop.Hash(): "stop",
	lua.Define.Hash(): "define", lua.Route.Hash(): "route",
}

func (f *fakeWire) DialHook(redis.DialHook) redis.DialHook {
	return func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("fake: no dialing") }
}

func (f *fakeWire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *fakeWire) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		// evalsha <sha> <numkeys> <keys...> <args...>
		a := cmd.Args()
		strs := make([]string, len(a))
		for i, v := range a {
			switch v := v.(type) {
			case string:
				strs[i] = v
			case int:
				strs[i] = strconv.Itoa(v)
			case int64:
				strs[i] = strconv.FormatInt(v, 10)
			default:
				strs[i] = fmt.Sprintf("<%T %v>", v, v) // never sent today; shows up in a diff
			}
		}
		nk, _ := strconv.Atoi(strs[2])
		c := wireCall{Script: scriptNames[strs[1]], Keys: strs[3 : 3+nk], Args: strs[3+nk:]}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.closed {
			cmd.SetErr(redis.ErrClosed)
			return redis.ErrClosed
		}
		// The lease id: acquire's, settle's and keepalive's ARGV[1];
		// route's first acquire ARGV[1], repeated in every deployment's.
		at := -1
		switch c.Script {
		case "acquire", "settle", "keepalive":
			at = 0
		case "route":
			d, _ := strconv.Atoi(strings.TrimPrefix(c.Args[0], "-"))
			at = 2 + 2*d
		}
		if at >= 0 {
			if f.ids == nil {
				f.ids = map[string]string{}
			}
			id := c.Args[at]
			if f.ids[id] == "" {
				f.ids[id] = "<id>"
				if n := len(f.ids); n > 1 {
					f.ids[id] = "<id" + strconv.Itoa(n) + ">"
				}
			}
			for i, a := range c.Args {
				if a == id {
					c.Args[i] = f.ids[id]
				}
			}
		}
		f.calls = append(f.calls, c)
		if len(f.replies) == 0 {
			cmd.SetErr(errNoReply)
			return errNoReply
		}
		r := f.replies[0]
		f.replies = f.replies[1:]
		if err, ok := r.(error); ok {
			cmd.SetErr(err)
			return err
		}
		cmd.(*redis.Cmd).SetVal(r)
		return nil
	}
}

// queue adds replies to answer the next calls with.
func (f *fakeWire) queue(replies ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, replies...)
}

// take returns the calls made since the last take.
func (f *fakeWire) take() []wireCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// inBubble runs fn with a Pacer for cfg on a fresh fake Redis, in a
// synctest bubble. A lease whose end failed keeps trying in the
// background (see pacer/lease.go); the bubble's clock stands still while fn
// runs, so those attempts make no call fn did not, and once fn is done the
// fake Redis answers as a closed client, which ends them, and the bubble
// sleeps until they have.
func inBubble(t *testing.T, cfg pacer.Config, fn func(p *pacer.Pacer, f *fakeWire)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{}
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		rdb.AddHook(f)
		defer rdb.Close()
		p, err := pacer.New(rdb, cfg)
		if err != nil {
			t.Fatalf("pacer.New(%+v) = %v", cfg, err)
		}
		fn(p, f)
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		time.Sleep(time.Hour)
	})
}

// noWait says err is the refusal of a call that would not wait
// (TryAcquire's): no room within a bound of 0.
func noWait(err error) bool {
	var re *pacer.RefusedError
	return errors.As(err, &re) && re.Bound == 0 && !errors.Is(err, context.DeadlineExceeded)
}

// errName names an error the way the vectors do: the sentinel it matches.
func errName(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, pacer.ErrQuotaExhausted):
		return "quota"
	case errors.Is(err, pacer.ErrStopped):
		return "stopped"
	case errors.Is(err, pacer.ErrSuperseded):
		return "superseded"
	case errors.Is(err, pacer.ErrTooLarge):
		return "too_large"
	case errors.Is(err, pacer.ErrWaitTimeout) && noWait(err):
		return "not_yet"
	case errors.Is(err, pacer.ErrWaitTimeout):
		return "wait_timeout"
	case errors.Is(err, pacer.ErrLeaseExpired):
		return "expired"
	case errors.Is(err, pacer.ErrInvalid):
		return "invalid"
	case errors.Is(err, wire.ErrReply):
		return "bad_reply"
	case errors.Is(err, errLost):
		return "redis"
	}
	return "other: " + err.Error()
}

// The clock the fake Redis reports (µs): 2026-01-01T00:00:00Z.
const nowUs int64 = 1_767_225_600_000_000

// admitted is acquire's reply admitting a call now, for a lease TTL.
func admitted(ttl time.Duration) []any {
	return []any{int64(1), int64(0), nowUs, "", nowUs/1000 + ttl.Milliseconds(), int64(0), int64(0)}
}

// vconfig is a Config as the vectors write it: durations in ms, and a zero
// (absent) field meaning its default.
type vconfig struct {
	Budget     string  `json:"budget"`
	Limits     vlimits `json:"limits"`
	Headroom   float64 `json:"headroom,omitempty"`
	NoRefund   bool    `json:"no_refund,omitempty"`
	BatchFloor float64 `json:"batch_floor,omitempty"`
	LeaseTTLMs int64   `json:"lease_ttl_ms,omitempty"`
	MaxWaitMs  int64   `json:"max_wait_ms,omitempty"`
	KeyPrefix  string  `json:"key_prefix,omitempty"`
	Rates      []vrate `json:"rates,omitempty"`
	HashTag    string  `json:"hash_tag,omitempty"`
	// Tenants, Weights and Prices are Config's (prices per million tokens).
	Tenants *vtenants          `json:"tenants,omitempty"`
	Weights map[string]float64 `json:"weights,omitempty"`
	Prices  map[string]vprice  `json:"prices,omitempty"`
	Version int64              `json:"version,omitempty"`
}

// vtenants is Config.Tenants as the vectors write it.
type vtenants struct {
	Rates []vrate `json:"rates,omitempty"`
	Share float64 `json:"share,omitempty"`
}

// vprice is a Config.Prices entry as the vectors write it.
type vprice struct {
	Input       float64 `json:"input,omitempty"`
	CachedInput float64 `json:"cached_input,omitempty"`
	Output      float64 `json:"output,omitempty"`
	InputMargin float64 `json:"input_margin,omitempty"`
}

type vlimits struct {
	RPM         int64 `json:"rpm,omitempty"`
	TPM         int64 `json:"tpm,omitempty"`
	RPD         int64 `json:"rpd,omitempty"`
	TPD         int64 `json:"tpd,omitempty"`
	Concurrency int64 `json:"concurrency,omitempty"`
}

// vrate is a Config.Rates entry as the vectors write it: the unit as
// Unit.String() names it, the window in ms.
type vrate struct {
	Unit     string `json:"unit"`
	Limit    int64  `json:"limit"`
	WindowMs int64  `json:"window_ms"`
	Burst    int64  `json:"burst,omitempty"`
	Sliding  bool   `json:"sliding,omitempty"`
}

// units maps a unit's name to the Unit; any other name is Unit(0), which
// the Go client rejects.
var units = map[string]pacer.Unit{
	"requests": pacer.Requests, "tokens": pacer.Tokens, "input_tokens": pacer.InputTokens, "output_tokens": pacer.OutputTokens,
	"spend": pacer.Spend,
}

func (r vrate) rate() pacer.Rate {
	return pacer.Rate{Unit: units[r.Unit], Limit: r.Limit, Window: time.Duration(r.WindowMs) * time.Millisecond, Burst: r.Burst, Sliding: r.Sliding}
}

func (c vconfig) config() pacer.Config {
	var rates []pacer.Rate
	for _, r := range c.Rates {
		rates = append(rates, r.rate())
	}
	var tenants pacer.Tenants
	if c.Tenants != nil {
		tenants.Share = c.Tenants.Share
		for _, r := range c.Tenants.Rates {
			tenants.Rates = append(tenants.Rates, r.rate())
		}
	}
	var prices map[string]pacer.Price
	for m, pr := range c.Prices {
		if prices == nil {
			prices = map[string]pacer.Price{}
		}
		prices[m] = pacer.Price{Input: pr.Input, CachedInput: pr.CachedInput, Output: pr.Output, InputMargin: pr.InputMargin}
	}
	return pacer.Config{
		Tenants: tenants, Weights: c.Weights, Prices: prices, Version: c.Version,
		Name: c.Budget, KeyPrefix: c.KeyPrefix, HashTag: c.HashTag,
		Limits:   pacer.Limits{RPM: c.Limits.RPM, TPM: c.Limits.TPM, RPD: c.Limits.RPD, TPD: c.Limits.TPD, Concurrency: c.Limits.Concurrency},
		Headroom: c.Headroom, NoRefund: c.NoRefund, BatchFloor: c.BatchFloor,
		LeaseTTL: time.Duration(c.LeaseTTLMs) * time.Millisecond, MaxWait: time.Duration(c.MaxWaitMs) * time.Millisecond,
		Rates: rates,
	}
}

// ttl returns the lease TTL c gives, default applied.
func (c vconfig) ttl() time.Duration {
	if c.LeaseTTLMs == 0 {
		return defaultLeaseTTL
	}
	return time.Duration(c.LeaseTTLMs) * time.Millisecond
}

// only returns the one call in cs, failing the test otherwise.
func only(t *testing.T, what string, cs []wireCall) wireCall {
	t.Helper()
	if len(cs) != 1 {
		t.Fatalf("%s made %d script calls, want 1: %+v", what, len(cs), cs)
	}
	return cs[0]
}

// summary is for a failure message.
func summary(v any) string {
	b, _ := json.Marshal(v)
	return strings.TrimSpace(string(b))
}
