package lua_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// namedConfig is one configuration the vectors use, by name.
type namedConfig struct {
	Name   string  `json:"name"`
	Config vconfig `json:"config"`
}

// vectorConfigs are the configurations every vector file refers to by name:
// each rule of Config that changes what is sent, once.
var vectorConfigs = []namedConfig{
	// The contract's example.
	{"basic", vconfig{Budget: "openai:gpt-4o-mini", Limits: vlimits{RPM: 500, TPM: 200_000}}},
	// Headroom lowers limits and bursts alike: floor(x × (1 − headroom)).
	// RPM and TPM with a burst are Rates, in Limits' places (rpm, tpm).
	{"headroom", vconfig{Budget: "headroom", Limits: vlimits{RPD: 10_000}, Headroom: 0.1, Rates: []vrate{
		{Unit: "requests", Limit: 500, WindowMs: 60_000, Burst: 50},
		{Unit: "tokens", Limit: 200_000, WindowMs: 60_000, Burst: 20_000},
	}}},
	// A headroom whose product is not exact in floating point.
	{"headroom-rounding", vconfig{Budget: "headroom-rounding", Limits: vlimits{RPM: 100, TPD: 999_999}, Headroom: 0.15, Rates: []vrate{
		{Unit: "tokens", Limit: 33_333, WindowMs: 60_000, Burst: 7_777},
	}}},
	// The default batch floor (0.2) on requests, tokens per day and slots;
	// RPM 7 makes a request's interval 8,571,428.57 µs.
	{"floor-default", vconfig{Budget: "floor-default", Limits: vlimits{RPM: 7, TPD: 1_000_000, Concurrency: 5}}},
	{"floor-custom", vconfig{Budget: "floor-custom", Limits: vlimits{TPM: 10_000, Concurrency: 7}, BatchFloor: 0.35}},
	// A negative batch floor: none.
	{"floor-none", vconfig{Budget: "floor-none", Limits: vlimits{RPM: 60, TPM: 10_000, Concurrency: 3}, BatchFloor: -1}},
	{"concurrency-only", vconfig{Budget: "concurrency-only", Limits: vlimits{Concurrency: 3}}},
	// Every limit and every setting away from its default.
	{"everything", vconfig{Budget: "azure:eastus:chat-prod", Limits: vlimits{RPM: 3_500, TPM: 2_000_000, RPD: 100_000, TPD: 50_000_000, Concurrency: 20},
		NoRefund: true, LeaseTTLMs: 90_000, MaxWaitMs: 5_000, KeyPrefix: "acme"}},
	// Tokens under a microsecond each: no slack.
	{"fast", vconfig{Budget: "fast", Limits: vlimits{RPM: 30_000, TPM: 150_000_000}}},
	// A Group's deployment: its keys under a hash tag.
	{"hash-tag", vconfig{Budget: "azure:eu", HashTag: "gpt-4o", KeyPrefix: "acme", Limits: vlimits{TPM: 100_000}}},
	{"daily", vconfig{Budget: "daily", Limits: vlimits{RPD: 1_000, TPD: 2_000_000}, Headroom: 0.2, BatchFloor: 0.5}},
	// Rates beyond the four: an hourly token cap, and Anthropic's input
	// and output tokens per minute apart, the output with a burst. They
	// follow rpm, in the order given, named <unit>/<window>.
	{"rates", vconfig{Budget: "anthropic:claude", Limits: vlimits{RPM: 500}, Rates: []vrate{
		{Unit: "tokens", Limit: 200_000, WindowMs: 3_600_000},
		{Unit: "input_tokens", Limit: 40_000, WindowMs: 60_000},
		{Unit: "output_tokens", Limit: 8_000, WindowMs: 60_000, Burst: 2_000},
	}}},
	// Rates under Headroom like the four, a window that is not whole
	// seconds (named in ms), a week-long one, and NoRefund.
	// Strict sliding windows (Rate.Sliding): the issue-12 provider's 24,000
	// tokens and 30 requests per 10 s, output tokens per minute, and a
	// per-minute token bucket beside them, under Headroom. Each is named
	// by unit and window, even per minute, and marked '~<sub-window µs>:'.
	{"rates-exact", vconfig{Budget: "rates-exact", Limits: vlimits{TPM: 90_000}, Headroom: 0.1, Rates: []vrate{
		{Unit: "tokens", Limit: 24_000, WindowMs: 10_000, Sliding: true},
		{Unit: "requests", Limit: 30, WindowMs: 10_000, Sliding: true},
		{Unit: "output_tokens", Limit: 8_000, WindowMs: 60_000, Sliding: true},
	}}},
	{"rates-windows", vconfig{Budget: "rates-windows", Limits: vlimits{RPM: 60}, Headroom: 0.1, NoRefund: true, Rates: []vrate{
		{Unit: "requests", Limit: 10, WindowMs: 1_000},
		{Unit: "input_tokens", Limit: 30_000, WindowMs: 1_500},
		{Unit: "output_tokens", Limit: 12_000, WindowMs: 60_000, Burst: 4_000},
		{Unit: "tokens", Limit: 5_000_000, WindowMs: 7 * 86_400_000},
	}}},
	// Rates of requests or tokens per minute or per day are rpm, tpm, rpd
	// and tpd, in their places whatever the order given: this budget
	// sends what "basic" sends, then requests/3600s.
	{"rates-rpm", vconfig{Budget: "openai:gpt-4o-mini", Rates: []vrate{
		{Unit: "tokens", Limit: 200_000, WindowMs: 60_000},
		{Unit: "requests", Limit: 20_000, WindowMs: 3_600_000},
		{Unit: "requests", Limit: 500, WindowMs: 60_000},
	}}},
	// Tenants: each tenant's own rates ('@' fields: an hourly token cap,
	// a strict sliding window of requests) and a fifth of each budget rate
	// as its share ('%' fields, sized from the burst). A tenant's call
	// runs on the budget's keys and its own hash; an interactive one sends
	// its priority as "0:<ppm>" (see docs/lua-contract.md, "Tenants").
	{"tenants", vconfig{Budget: "saas", Limits: vlimits{TPM: 100_000, Concurrency: 10}, Rates: []vrate{{Unit: "requests", Limit: 600, WindowMs: 60_000, Burst: 100}},
		Tenants: &vtenants{Share: 0.2, Rates: []vrate{
			{Unit: "tokens", Limit: 20_000, WindowMs: 3_600_000},
			{Unit: "requests", Limit: 30, WindowMs: 10_000, Sliding: true},
		}}}},
	// Tenants with their own rates only: no share, so no "0:<ppm>".
	{"tenants-rates", vconfig{Budget: "tenants-rates", Limits: vlimits{TPM: 50_000}, Headroom: 0.1,
		Tenants: &vtenants{Rates: []vrate{{Unit: "requests", Limit: 100, WindowMs: 60_000}}}}},
	// Shares of a strict sliding window and of an input rate, no batch
	// floor: the ppm is then room for 8 calls like it alone.
	{"tenants-share", vconfig{Budget: "tenants-share", Limits: vlimits{RPM: 7}, BatchFloor: -1, Rates: []vrate{
		{Unit: "tokens", Limit: 24_000, WindowMs: 10_000, Sliding: true},
		{Unit: "input_tokens", Limit: 40_000, WindowMs: 60_000},
	}, Tenants: &vtenants{Share: 0.3}}},
	// Weights: a model's tokens count times its weight on every token
	// rate, rounded up; requests do not.
	{"weights", vconfig{Budget: "weights", Limits: vlimits{RPM: 500, TPM: 100_000}, Rates: []vrate{
		{Unit: "output_tokens", Limit: 20_000, WindowMs: 60_000}},
		Weights: map[string]float64{"gpt-4o": 2.5, "gpt-4o-mini": 0.15}}},
	// Spend: a daily strict cap and a per-minute bucket of money, with
	// prices per million tokens; a call reserves its worst case (the input
	// enlarged by its margin: set, none, or the model family's default)
	// from its unweighed tokens, and settles what its usage cost.
	{"spend", vconfig{Budget: "spend", Limits: vlimits{TPM: 2_000_000, Concurrency: 8}, Rates: []vrate{
		{Unit: "spend", Limit: 50_000_000, WindowMs: 86_400_000, Sliding: true},
		{Unit: "spend", Limit: 2_000_000, WindowMs: 60_000},
	}, Prices: map[string]vprice{
		"gpt-4o":          {Input: 2_500_000, CachedInput: 1_250_000, Output: 10_000_000},
		"claude-sonnet-4": {Input: 3_000_000, CachedInput: 300_000, Output: 15_000_000, InputMargin: 0.1},
		"exact":           {Input: 1_000_000, Output: 4_000_000, InputMargin: -1},
		"":                {Input: 5_000_000, CachedInput: 2_500_000, Output: 15_000_000},
	}, Weights: map[string]float64{"gpt-4o": 2}}},
	// Tenants with a spend cap each beside the budget's (the interop
	// test's budget).
	{"tenants-spend", vconfig{Budget: "tenants-spend", Limits: vlimits{RPM: 1_200, TPM: 400_000},
		Rates:   []vrate{{Unit: "spend", Limit: 1_000_000, WindowMs: 3_600_000, Sliding: true}},
		Prices:  map[string]vprice{"": {Input: 1_000_000, Output: 3_000_000}},
		Tenants: &vtenants{Share: 0.25, Rates: []vrate{{Unit: "spend", Limit: 200_000, WindowMs: 3_600_000}}}}},
	// A tenant's spend cap without one on the budget: the call is priced
	// all the same.
	{"tenant-spend-only", vconfig{Budget: "tenant-spend-only", Limits: vlimits{TPM: 100_000},
		Prices:  map[string]vprice{"": {Input: 1_000_000, Output: 2_000_000}},
		Tenants: &vtenants{Rates: []vrate{{Unit: "spend", Limit: 500_000, WindowMs: 86_400_000}}}}},
	// A Group's deployments: one hash tag, so that route.lua reaches both.
	{"group-eu", vconfig{Budget: "azure:eu", HashTag: "gpt-4o", Limits: vlimits{RPM: 600, TPM: 100_000}}},
	{"group-us", vconfig{Budget: "azure:us", HashTag: "gpt-4o", Limits: vlimits{TPM: 30_000, Concurrency: 4}}},
}

// invalidConfigs are configurations the Go client rejects; a port should
// too.
var invalidConfigs = []namedConfig{
	{"no-limits", vconfig{Budget: "none"}},
	{"headroom-leaves-nothing", vconfig{Budget: "x", Limits: vlimits{RPM: 1}, Headroom: 0.5}},
	{"headroom-one", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, Headroom: 1}},
	{"batch-floor-one", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, BatchFloor: 1}},
	{"name-with-brace", vconfig{Budget: "a{b}", Limits: vlimits{RPM: 10}}},
	{"name-with-space", vconfig{Budget: "a b", Limits: vlimits{RPM: 10}}},
	{"hash-tag-with-brace", vconfig{Budget: "x", HashTag: "a}b", Limits: vlimits{RPM: 10}}},
	{"rate-unit-unknown", vconfig{Budget: "x", Rates: []vrate{{Unit: "words", Limit: 10, WindowMs: 60_000}}}},
	{"rate-limit-zero", vconfig{Budget: "x", Rates: []vrate{{Unit: "tokens", Limit: 0, WindowMs: 3_600_000}}}},
	{"rate-window-under-1s", vconfig{Budget: "x", Rates: []vrate{{Unit: "requests", Limit: 10, WindowMs: 999}}}},
	{"rate-window-over-366d", vconfig{Budget: "x", Rates: []vrate{{Unit: "tokens", Limit: 10, WindowMs: 366*86_400_000 + 1}}}},
	{"rate-burst-above-limit", vconfig{Budget: "x", Rates: []vrate{{Unit: "output_tokens", Limit: 8_000, WindowMs: 60_000, Burst: 8_001}}}},
	{"rate-burst-negative", vconfig{Budget: "x", Rates: []vrate{{Unit: "tokens", Limit: 8_000, WindowMs: 60_000, Burst: -1}}}},
	{"rate-twice", vconfig{Budget: "x", Rates: []vrate{
		{Unit: "tokens", Limit: 200_000, WindowMs: 3_600_000}, {Unit: "tokens", Limit: 100_000, WindowMs: 3_600_000}}}},
	{"rate-rpm-twice", vconfig{Budget: "x", Rates: []vrate{
		{Unit: "requests", Limit: 500, WindowMs: 60_000}, {Unit: "requests", Limit: 400, WindowMs: 60_000}}}},
	{"rate-also-in-limits", vconfig{Budget: "x", Limits: vlimits{TPM: 10_000}, Rates: []vrate{{Unit: "tokens", Limit: 10_000, WindowMs: 60_000}}}},
	{"rates-seventeen", vconfig{Budget: "x", Rates: seventeenRates()}},
	{"rate-headroom-leaves-nothing", vconfig{Budget: "x", Headroom: 0.5, Rates: []vrate{{Unit: "requests", Limit: 1, WindowMs: 1_000}}}},
	{"rate-exact-with-burst", vconfig{Budget: "x", Rates: []vrate{{Unit: "tokens", Limit: 1_000, WindowMs: 60_000, Burst: 10, Sliding: true}}}},
	{"spend-without-prices", vconfig{Budget: "x", Rates: []vrate{{Unit: "spend", Limit: 1_000, WindowMs: 60_000}}}},
	{"tenant-spend-without-prices", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, Tenants: &vtenants{Rates: []vrate{{Unit: "spend", Limit: 1_000, WindowMs: 60_000}}}}},
	{"price-negative", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, Prices: map[string]vprice{"m": {Input: -1}}}},
	{"price-margin-above-ten", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, Prices: map[string]vprice{"m": {Input: 1, InputMargin: 10.5}}}},
	{"weight-zero", vconfig{Budget: "x", Limits: vlimits{TPM: 10}, Weights: map[string]float64{"m": 0}}},
	{"weight-above-1000", vconfig{Budget: "x", Limits: vlimits{TPM: 10}, Weights: map[string]float64{"m": 1000.5}}},
	{"tenant-share-above-one", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, Tenants: &vtenants{Share: 1.5}}},
	{"tenant-share-negative", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, Tenants: &vtenants{Share: -0.1}}},
	{"tenant-rates-twice", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, Tenants: &vtenants{Rates: []vrate{
		{Unit: "tokens", Limit: 100, WindowMs: 60_000}, {Unit: "tokens", Limit: 200, WindowMs: 60_000}}}}},
	{"tenant-rate-window-under-1s", vconfig{Budget: "x", Limits: vlimits{RPM: 10}, Tenants: &vtenants{Rates: []vrate{{Unit: "tokens", Limit: 100, WindowMs: 500}}}}},
}

// seventeenRates is one rate more than a Config may have: requests over
// windows of 2 to 18 seconds.
func seventeenRates() []vrate {
	var rs []vrate
	for i := range 17 {
		rs = append(rs, vrate{Unit: "requests", Limit: 100, WindowMs: int64(i+2) * 1000})
	}
	return rs
}

func configByName(t *testing.T, name string) vconfig {
	t.Helper()
	for _, c := range vectorConfigs {
		if c.Name == name {
			return c.Config
		}
	}
	t.Fatalf("no vector config %q", name)
	return vconfig{}
}

// configVector is what the Go client makes of one configuration: its keys,
// and each bucket as acquire sees it (from a one-token call) and as a
// snapshot reports it.
type configVector struct {
	namedConfig
	Error      string    `json:"error,omitempty"`   // "invalid": rejected
	Message    string    `json:"message,omitempty"` // the Go client's words, for reference
	Keys       []string  `json:"keys,omitempty"`
	LeaseTTLMs int64     `json:"lease_ttl_ms,omitempty"` // acquire's ARGV[4]
	MaxWaitMs  int64     `json:"max_wait_ms,omitempty"`  // acquire's ARGV[3] for a call that may wait its whole bound
	Slots      []int64   `json:"slots,omitempty"`        // ARGV[5]: interactive, batch
	Buckets    []vbucket `json:"buckets"`
	Fields     []string  `json:"fields"`                // the configured buckets, in order
	BatchError string    `json:"batch_error,omitempty"` // why a batch call of one unit can never fit
}

type vbucket struct {
	Field     string  `json:"field"`
	Limit     int64   `json:"limit"`      // after Headroom
	Capacity  int64   `json:"capacity"`   // the burst, after Headroom
	PerSecond float64 `json:"per_second"` // refill per second: refill / window_ms × 1000
	Charge1   int64   `json:"charge_1"`   // the charge of one unit (µs)
	Allow     int64   `json:"allow"`      // an interactive call's allowance (µs)
	// AllowBatch is a batch call's allowance; absent when a batch call of
	// one unit can never fit (batch_error says why).
	AllowBatch *int64 `json:"allow_batch,omitempty"`
}

func configVectors(t *testing.T) any {
	var out []configVector
	for _, nc := range invalidConfigs {
		rdb := redis.NewClient(&redis.Options{Addr: "fake:0"})
		_, err := pacer.New(rdb, nc.Config.config()) // New does not contact Redis
		rdb.Close()
		if err == nil {
			t.Fatalf("pacer.New(%+v) accepted an invalid config", nc.Config)
		}
		out = append(out, configVector{namedConfig: nc, Error: errName(err), Message: err.Error(), Fields: []string{}, Buckets: []vbucket{}})
	}
	for _, nc := range vectorConfigs {
		v := configVector{namedConfig: nc, Fields: []string{}, Buckets: []vbucket{}}
		inBubble(t, nc.Config.config(), func(p *pacer.Pacer, f *fakeWire) {
			ctx := context.Background()
			v.Keys = keysOf(p)
			ttl := nc.Config.ttl()
			f.queue(admitted(ttl))
			if _, err := p.Acquire(ctx, pacer.Request{Tokens: 1}); err != nil {
				t.Fatalf("%s: Acquire: %v", nc.Name, err)
			}
			inter := only(t, nc.Name+" Acquire", f.take())
			v.MaxWaitMs = atoi(inter.Args[2])
			v.LeaseTTLMs = atoi(inter.Args[3])
			v.Slots = append(v.Slots, atoi(inter.Args[4]))
			n := (len(inter.Args) - 8) / 3
			f.queue(admitted(ttl))
			_, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1, Priority: pacer.Batch})
			var batch []string
			if err != nil {
				v.BatchError = errName(err)
			} else {
				batch = only(t, nc.Name+" TryAcquire batch", f.take()).Args
				v.Slots = append(v.Slots, atoi(batch[5]))
			}
			reply := []any{nowUs, int64(0), int64(0)}
			for range n + 1 {
				reply = append(reply, "")
			}
			f.queue(reply)
			snap, err := p.Snapshot(ctx)
			if err != nil {
				t.Fatalf("%s: Snapshot: %v", nc.Name, err)
			}
			f.take()
			levels := map[string]pacer.RateState{}
			for _, r := range snap.Rates {
				levels[r.Rate.Name()] = r
			}
			for k := range n {
				field := inter.Args[8+k]
				lv := levels[field]
				if _, name, ok := strings.Cut(field, ":"); ok && strings.HasPrefix(field, "~") {
					lv = levels[name] // a sliding window, marked for the scripts
				}
				b := vbucket{
					Field: field, Limit: lv.Limit, Capacity: lv.Capacity, PerSecond: lv.PerSecond,
					Charge1: atoi(inter.Args[8+n+2*k]), Allow: atoi(inter.Args[9+n+2*k]),
				}
				if batch != nil {
					a := atoi(batch[9+n+2*k])
					b.AllowBatch = &a
				}
				v.Fields = append(v.Fields, field)
				v.Buckets = append(v.Buckets, b)
			}
		})
		out = append(out, v)
	}
	return map[string]any{
		"comment": "Each configuration as the Go client reads it. config: the input (durations in ms; an absent field is its default). " +
			"keys: KEYS[1], KEYS[2], KEYS[3]. max_wait_ms: acquire's ARGV[3] for a call that may wait its whole bound; lease_ttl_ms: ARGV[4]; " +
			"slots: the concurrency limit (ARGV[5]) and the slots a batch call may use (ARGV[6], sent by every call). buckets: limit and capacity after Headroom, " +
			"the refill per second, and the charge of one unit and the allowances acquire is sent, in µs (for a strict sliding window, field '~<sub-window µs>:<name>', in units). " +
			"error \"invalid\": the Go client rejects the configuration (message is its text).",
		"configs": out,
	}
}

func atoi(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// holdFor ends a lease held for hold on the fake Redis: the Pacer's mean
// hold time, which spaces concurrency waiters, takes it in.
func holdFor(t *testing.T, p *pacer.Pacer, f *fakeWire, ttl, hold time.Duration) {
	t.Helper()
	ctx := context.Background()
	f.queue(admitted(ttl))
	l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.queue([]any{int64(1), nowUs + hold.Microseconds()})
	if err := l.Settle(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.take()
	f.mu.Lock()
	f.ids = nil // the call these holds precede gets "<id>"
	f.mu.Unlock()
}
