package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// stillRedis returns a client of an in-process miniredis whose clock stands
// still, so that examples print exact figures, and a func that closes both.
func stillRedis() (*redis.Client, func()) {
	mr, _ := miniredis.Run()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { rdb.Close(); mr.Close() }
}

// Rates over any window, and input and output tokens apart: Anthropic's
// separate input and output limits beside an hourly cap of all tokens.
func ExampleRate() {
	rdb, done := stillRedis()
	defer done()
	p, _ := pacer.New(rdb, pacer.Config{Name: "anthropic:claude", Limits: pacer.Limits{RPM: 50}, Rates: []pacer.Rate{
		{Unit: pacer.InputTokens, Limit: 30_000, Window: time.Minute},
		{Unit: pacer.OutputTokens, Limit: 8_000, Window: time.Minute},
		{Unit: pacer.Tokens, Limit: 500_000, Window: time.Hour},
	}})
	ctx := context.Background()
	l, _ := p.Acquire(ctx, pacer.Request{Input: 12_000, Output: 4_000}) // prompt estimate, max_tokens
	_ = l.SettleUsage(ctx, pacer.Usage{Input: 11_800, Output: 900})     // what the answer reported

	_, err := p.TryAcquire(ctx, pacer.Request{Input: 2_000, Output: 7_500})
	var notYet *pacer.RefusedError
	if errors.As(err, &notYet) {
		fmt.Println("no room yet for", notYet.Limit)
	}
	s, _ := p.Snapshot(ctx)
	for _, r := range s.Rates {
		fmt.Printf("%s: %.0f of %d\n", r.Rate.Name(), r.Level, r.Capacity)
	}
	// Output:
	// no room yet for output_tokens/60s
	// rpm: 49 of 50
	// input_tokens/60s: 18200 of 30000
	// output_tokens/60s: 7100 of 8000
	// tokens/3600s: 487300 of 500000
}

// A strict sliding window never admits more than its limit in any window:
// the call that does not fit learns when the oldest count rolls out.
func ExampleRate_sliding() {
	rdb, done := stillRedis()
	defer done()
	p, _ := pacer.New(rdb, pacer.Config{Name: "azure:eastus:chat", Rates: []pacer.Rate{
		{Unit: pacer.Requests, Limit: 3, Window: 10 * time.Second, Sliding: true},
	}})
	ctx := context.Background()
	for range 3 {
		_, _ = p.TryAcquire(ctx, pacer.Request{})
	}
	_, err := p.TryAcquire(ctx, pacer.Request{})
	var notYet *pacer.RefusedError
	if errors.As(err, &notYet) {
		wait, _ := pacer.RetryAfter(err)
		fmt.Printf("%s: room again in %v\n", notYet.Limit, wait)
	}
	// Output:
	// requests/10s: room again in 10.157s
}

// Shadow mode: the budget reports what it would have done and never holds
// a call, so it can go in front of live traffic before it enforces.
func ExampleConfig_shadow() {
	rdb, done := stillRedis()
	defer done()
	p, _ := pacer.New(rdb, pacer.Config{Name: "openai:gpt-4o-mini", Limits: pacer.Limits{RPM: 2}, Shadow: true,
		Observe: func(e pacer.Event) {
			if e.Kind == pacer.Denied {
				fmt.Printf("would have waited %v for %s\n", e.Wait, e.Limit)
			}
		}})
	ctx := context.Background()
	for range 3 {
		l, _ := p.Acquire(ctx, pacer.Request{Tokens: 100})
		fmt.Println("call runs; counted:", !l.Info().Shadow)
		_ = l.Settle(ctx, 80)
	}
	// Output:
	// call runs; counted: true
	// call runs; counted: true
	// would have waited 30s for rpm
	// call runs; counted: false
}

// An exhausted quota, handed to Fail, stops every process at once: their
// calls fail without reaching the provider, until a probe (every
// Config.QuotaProbe) succeeds or Resume lifts the stop.
func ExampleLease_Fail_quota() {
	rdb, done := stillRedis()
	defer done()
	p, _ := pacer.New(rdb, pacer.Config{Name: "openai:gpt-4o-mini", Limits: pacer.Limits{RPM: 500}, QuotaProbe: time.Minute})
	ctx := context.Background()
	l, _ := p.Acquire(ctx, pacer.Request{Tokens: 100})
	// The provider answered 429 insufficient_quota (classify.FromError
	// reads it from the SDK's error).
	quota := classify.Verdict{Kind: classify.QuotaExhausted, Status: 429, Code: "insufficient_quota"}
	_ = l.Fail(ctx, quota, nil)

	_, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
	fmt.Println(errors.Is(err, pacer.ErrQuotaExhausted))

	_ = p.Resume(ctx) // credit added
	_, err = p.Acquire(ctx, pacer.Request{Tokens: 100})
	fmt.Println(err)
	// Output:
	// true
	// <nil>
}

// Tenants inside a budget: each customer has its own hourly tokens and a
// tenth of the budget as its fair share; one script charges both.
func ExampleTenants() {
	rdb, done := stillRedis()
	defer done()
	p, _ := pacer.New(rdb, pacer.Config{
		Name:   "openai:gpt-4o-mini",
		Limits: pacer.Limits{TPM: 100_000},
		Tenants: pacer.Tenants{
			Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 20_000, Window: time.Hour}},
			Share: 0.1,
		},
	})
	ctx := context.Background()
	// The tenant id comes from the caller's authenticated session.
	l, _ := p.Acquire(ctx, pacer.Request{Tenant: "customer-42", Tokens: 15_000})
	_ = l.Settle(ctx, 15_000)

	_, err := p.TryAcquire(ctx, pacer.Request{Tenant: "customer-42", Tokens: 8_000})
	var notYet *pacer.RefusedError
	if errors.As(err, &notYet) {
		fmt.Println("customer-42 waits for", notYet.Limit)
	}
	if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "customer-7", Tokens: 8_000}); err == nil {
		fmt.Println("customer-7 goes ahead")
	}
	s, _ := p.TenantSnapshot(ctx, "customer-42")
	fmt.Printf("customer-42: %.0f of %d tokens this hour\n", s.Rates[0].Level, s.Rates[0].Capacity)
	// Output:
	// customer-42 waits for @tokens/3600s
	// customer-7 goes ahead
	// customer-42: 5000 of 20000 tokens this hour
}

// One definition for every process: a runtime change is one call, and
// every Pacer of the budget follows it at its next call.
func ExamplePacer_Define() {
	rdb, done := stillRedis()
	defer done()
	cfg := pacer.Config{Name: "openai:gpt-4o", Limits: pacer.Limits{RPM: 500, TPM: 30_000}}
	api, _ := pacer.New(rdb, cfg)    // one process
	worker, _ := pacer.New(rdb, cfg) // another
	ctx := context.Background()

	// The provider raised the limit: tell the fleet once.
	v, _ := api.Define(ctx, pacer.Config{Limits: pacer.Limits{RPM: 500, TPM: 150_000}})
	fmt.Println("stored version", v)

	_, _ = worker.TryAcquire(ctx, pacer.Request{Tokens: 1000})
	s, _ := worker.Snapshot(ctx)
	fmt.Println("the worker runs version", worker.Config().Version, "with TPM", s.Rate("tpm").Limit)
	// Output:
	// stored version 1
	// the worker runs version 1 with TPM 150000
}
