package lua_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// vrequest is one call to admit, as the vectors write it.
type vrequest struct {
	// Call is "acquire" (Pacer.Acquire, which may wait its bound) or "try"
	// (TryAcquire, which sends a max wait of 0).
	Call   string `json:"call"`
	Tokens int64  `json:"tokens"`
	// Input and Output split the reservation (Request.Input, Output):
	// tokens is 0 (their sum) or their sum.
	Input    int64  `json:"input,omitempty"`
	Output   int64  `json:"output,omitempty"`
	Priority string `json:"priority"`              // "interactive" or "batch"
	MaxWait  int64  `json:"max_wait_ms,omitempty"` // Request.MaxWait; 0: the config's
	// Model picks the call's weight and price (Request.Model); Tenant
	// charges it to a tenant too (Request.Tenant).
	Model  string `json:"model,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

func (r vrequest) request() pacer.Request {
	pr := pacer.Interactive
	if r.Priority == "batch" {
		pr = pacer.Batch
	}
	return pacer.Request{Tokens: r.Tokens, Input: r.Input, Output: r.Output, Priority: pr, MaxWait: time.Duration(r.MaxWait) * time.Millisecond,
		Model: r.Model, Tenant: r.Tenant}
}

// call runs r on p.
func (r vrequest) call(p *pacer.Pacer) (*pacer.Lease, error) {
	if r.Call == "try" {
		return p.TryAcquire(context.Background(), r.request())
	}
	return p.Acquire(context.Background(), r.request())
}

type acquireCase struct {
	Config  string   `json:"config"`
	Request vrequest `json:"request"`
	// HoldsUs are the hold times (µs, Redis clock, turn to end) of the
	// leases this process ended before the call, oldest first: their mean
	// spaces concurrency waiters (ARGV[7]).
	HoldsUs []int64 `json:"holds_us,omitempty"`
	// SeenMs is the latest expiry of the budget's keys the process saw in
	// those leases' replies (their expiry): sent after the version, with
	// each bucket's span, so that a state found lost restarts empty.
	SeenMs int64  `json:"seen_ms,omitempty"`
	Error  string `json:"error,omitempty"` // the call is refused before any script runs
	// Keys are acquire's KEYS, for a tenant's call: the budget's, then its
	// tenant's hash.
	Keys []string `json:"keys,omitempty"`
	Args []string `json:"args,omitempty"` // acquire's ARGV; the lease id is "<id>"
}

func req(call string, tokens int64, priority string) vrequest {
	return vrequest{Call: call, Tokens: tokens, Priority: priority}
}

// split is a request of input and output tokens apart, with tokens 0 (their
// sum) or given.
func split(call string, tokens, input, output int64, priority string) vrequest {
	return vrequest{Call: call, Tokens: tokens, Input: input, Output: output, Priority: priority}
}

var acquireCases = []acquireCase{
	{Config: "basic", Request: req("acquire", 1300, "interactive")},
	{Config: "basic", Request: req("try", 1300, "interactive")},
	{Config: "basic", Request: req("acquire", 1300, "batch")},
	{Config: "basic", Request: vrequest{Call: "acquire", Tokens: 1300, Priority: "interactive", MaxWait: 2500}},
	{Config: "basic", Request: req("acquire", 0, "interactive")},
	{Config: "basic", Request: req("acquire", 200_000, "interactive")},
	{Config: "basic", Request: req("acquire", 200_001, "interactive")},
	{Config: "basic", Request: req("acquire", 160_000, "batch")},
	{Config: "basic", Request: req("acquire", 160_001, "batch")},
	{Config: "headroom", Request: req("acquire", 1300, "interactive")},
	{Config: "headroom", Request: req("try", 1300, "batch")},
	{Config: "headroom", Request: req("acquire", 18_001, "interactive")},
	{Config: "headroom-rounding", Request: req("acquire", 777, "interactive")},
	{Config: "headroom-rounding", Request: req("acquire", 777, "batch")},
	{Config: "floor-default", Request: req("acquire", 100, "interactive")},
	{Config: "floor-default", Request: req("acquire", 100, "batch")},
	{Config: "floor-default", Request: req("acquire", 100, "interactive"), HoldsUs: []int64{40_000, 200_000}},
	{Config: "floor-default", Request: req("acquire", 100, "interactive"), HoldsUs: []int64{500}},
	{Config: "floor-custom", Request: req("acquire", 10, "interactive")},
	{Config: "floor-custom", Request: req("try", 10, "batch"), HoldsUs: []int64{1_234_567}},
	{Config: "floor-none", Request: req("acquire", 10_000, "batch")},
	{Config: "concurrency-only", Request: req("acquire", 0, "interactive")},
	{Config: "concurrency-only", Request: req("try", 99_999, "batch")},
	{Config: "everything", Request: req("acquire", 4000, "interactive")},
	{Config: "everything", Request: req("try", 4000, "batch"), HoldsUs: []int64{250_000, 250_000, 1_000_000}},
	{Config: "fast", Request: req("acquire", 1, "interactive")},
	{Config: "fast", Request: req("acquire", 3, "interactive")},
	{Config: "fast", Request: req("acquire", 120_000_000, "batch")},
	{Config: "daily", Request: req("acquire", 5000, "interactive")},
	{Config: "daily", Request: req("acquire", 800_000, "batch")},
	// Input and output buckets take the request's input and output when it
	// gives them, all of its tokens when it does not.
	{Config: "rates", Request: req("acquire", 1300, "interactive")},
	{Config: "rates", Request: split("acquire", 0, 1000, 300, "interactive")},
	{Config: "rates", Request: split("try", 1300, 1000, 300, "batch")},
	{Config: "rates", Request: split("acquire", 0, 0, 300, "interactive")},
	{Config: "rates", Request: split("acquire", 0, 40_000, 0, "interactive")},
	{Config: "rates", Request: split("acquire", 0, 40_001, 0, "interactive")},
	{Config: "rates", Request: split("acquire", 0, 1000, 2000, "interactive")},
	{Config: "rates", Request: split("acquire", 0, 1000, 2001, "interactive")},
	{Config: "rates", Request: split("acquire", 0, 1000, 2000, "batch")},
	{Config: "rates", Request: req("acquire", 2001, "interactive")},
	{Config: "rates", Request: split("acquire", 1200, 1000, 300, "interactive")},
	{Config: "rates", Request: split("acquire", 0, -1, 300, "interactive")},
	{Config: "rates-exact", Request: req("acquire", 1000, "interactive")},
	{Config: "rates-exact", Request: req("try", 1000, "batch")},
	{Config: "rates-exact", Request: split("acquire", 0, 1000, 500, "interactive")},
	{Config: "rates-exact", Request: req("acquire", 21_601, "interactive")},
	{Config: "rates-windows", Request: split("acquire", 0, 5000, 1000, "interactive")},
	{Config: "rates-windows", Request: split("try", 0, 5000, 1000, "batch")},
	{Config: "rates-windows", Request: split("acquire", 0, 13_500, 3600, "interactive")},
	{Config: "rates-windows", Request: split("acquire", 0, 13_501, 0, "interactive")},
	{Config: "rates-rpm", Request: req("acquire", 1300, "interactive")},
	{Config: "rates-rpm", Request: req("acquire", 1300, "batch")},
	// A split on a budget without input or output rates: only the sum counts.
	{Config: "basic", Request: split("acquire", 0, 1000, 300, "interactive")},
	// Tenants: KEYS[5] is the tenant's hash, named by a digest of its id;
	// its '@' and '%' buckets follow the budget's. An interactive call
	// sends "0:<ppm>": over its share it leaves room for 8 calls like it,
	// up to half of each budget bucket, at least the batch floor, never
	// more than lets it fit. A lost state restarts tenant buckets at 0.
	{Config: "tenants", Request: tenant(req("acquire", 1300, "interactive"), "acme")},
	{Config: "tenants", Request: tenant(req("try", 1300, "batch"), "acme")},
	{Config: "tenants", Request: tenant(req("acquire", 12_000, "interactive"), "acme")},
	{Config: "tenants", Request: tenant(req("acquire", 20_000, "interactive"), "acme")},
	{Config: "tenants", Request: tenant(req("acquire", 20_001, "interactive"), "acme")},
	{Config: "tenants", Request: tenant(req("acquire", 100, "interactive"), "{saas}:t:x\n☃")},
	{Config: "tenants", Request: req("acquire", 1300, "interactive")},
	{Config: "tenants", Request: tenant(req("acquire", 100, "interactive"), "acme"), HoldsUs: []int64{300_000}},
	{Config: "basic", Request: tenant(req("acquire", 100, "interactive"), "acme")},
	{Config: "tenants-rates", Request: tenant(req("acquire", 1000, "interactive"), "t1")},
	{Config: "tenants-rates", Request: tenant(req("acquire", 1000, "batch"), "t1")},
	{Config: "tenants-share", Request: tenant(split("acquire", 0, 800, 200, "interactive"), "acme")},
	{Config: "tenants-share", Request: tenant(split("acquire", 0, 6000, 3000, "interactive"), "acme")},
	{Config: "tenants-share", Request: tenant(req("acquire", 20_000, "interactive"), "acme")},
	{Config: "tenants-share", Request: tenant(req("try", 1000, "batch"), "acme")},
	// Weights: token buckets take tokens × the model's weight, rounded up.
	{Config: "weights", Request: calling(req("acquire", 1000, "interactive"), "gpt-4o")},
	{Config: "weights", Request: calling(split("acquire", 0, 801, 203, "interactive"), "gpt-4o-mini")},
	{Config: "weights", Request: calling(req("acquire", 1000, "batch"), "llama")},
	{Config: "weights", Request: calling(req("acquire", 40_000, "interactive"), "gpt-4o")},
	{Config: "weights", Request: calling(req("acquire", 40_001, "interactive"), "gpt-4o")},
	// Spend: the worst case at the model's price, from unweighed tokens.
	{Config: "spend", Request: calling(split("acquire", 0, 1000, 500, "interactive"), "gpt-4o")},
	{Config: "spend", Request: calling(req("acquire", 1500, "interactive"), "gpt-4o")},
	{Config: "spend", Request: calling(split("try", 0, 1000, 500, "batch"), "claude-sonnet-4")},
	{Config: "spend", Request: calling(split("acquire", 0, 1000, 500, "interactive"), "exact")},
	{Config: "spend", Request: calling(split("acquire", 0, 1000, 500, "interactive"), "openai:gpt-4.1-mini")},
	{Config: "spend", Request: calling(split("acquire", 0, 1000, 500, "interactive"), "claude-3-haiku")},
	{Config: "spend", Request: req("acquire", 777, "interactive")},
	{Config: "spend", Request: calling(split("acquire", 0, 40_000, 100_000, "interactive"), "claude-sonnet-4")},
	{Config: "tenants-spend", Request: tenant(calling(split("acquire", 0, 1000, 500, "interactive"), "m"), "acme")},
	{Config: "tenants-spend", Request: tenant(req("acquire", 1500, "batch"), "beta")},
	{Config: "tenants-spend", Request: tenant(split("acquire", 0, 50_000, 50_000, "interactive"), "acme")},
	{Config: "tenant-spend-only", Request: tenant(split("acquire", 0, 1000, 500, "interactive"), "acme")},
}

// tenant is r charged to tenant t too.
func tenant(r vrequest, t string) vrequest { r.Tenant = t; return r }

// calling is r calling model m.
func calling(r vrequest, m string) vrequest { r.Model = m; return r }

func acquireVectors(t *testing.T) any {
	out := make([]acquireCase, 0, len(acquireCases))
	for _, c := range acquireCases {
		cfg := configByName(t, c.Config)
		inBubble(t, cfg.config(), func(p *pacer.Pacer, f *fakeWire) {
			for _, h := range c.HoldsUs {
				holdFor(t, p, f, cfg.ttl(), time.Duration(h)*time.Microsecond)
			}
			f.queue(admitted(cfg.ttl()))
			_, err := c.Request.call(p)
			calls := f.take()
			if err != nil {
				c.Error = errName(err)
				if len(calls) != 0 {
					t.Fatalf("%s: refused %+v after a script call: %v", c.Config, c.Request, err)
				}
				return
			}
			call := only(t, c.Config+" "+summary(c.Request), calls)
			c.Args = call.Args
			if c.Request.Tenant != "" {
				c.Keys = call.Keys
			}
			if last := c.Args[len(c.Args)-1]; strings.Contains(last, " ") {
				c.SeenMs = atoi(strings.Fields(last)[0])
			}
		})
		out = append(out, c)
	}
	return map[string]any{
		"comment": "What acquire is sent for a request. The lease id is \"<id>\". request.call \"acquire\" may wait its whole bound " +
			"(Request.MaxWait, else the config's max wait), which it sends as ARGV[3] on its first attempt; \"try\" sends 0. " +
			"holds_us: the hold times of the leases this process ended before, which set ARGV[6]; seen_ms: the latest expiry their replies showed, " +
			"sent as the last argument with each bucket's span (see the lost state in docs/lua-contract.md). " +
			"error: the request is refused before any script runs (too_large: it can never fit; invalid: input or output below 0, or tokens neither 0 nor their sum). " +
			"request.input and request.output split the reservation: an input_tokens or output_tokens bucket is charged its part, every other token bucket their sum " +
			"(request.tokens, 0 meaning the sum); without them such a bucket is charged all of tokens.",
		"cases": out,
	}
}
