package pacer_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// Issue 21's spend cap: $0.10 a day in µ$, a strict sliding day, every
// token at 1 µ$. A call to Claude estimates its prompt at 16,000 tokens
// and asks for 4,000 out: 20,000 µ$ as estimated, 24,000 with Claude's
// default input margin of 25%.
const (
	capUs         int64 = 100_000
	capCalls            = 50
	capPacers           = 5
	capModel            = "claude-sonnet-4-5"
	capReserveUs  int64 = 16_000*5/4 + 4_000   // what one call reserves
	capAdmits           = capUs / capReserveUs // the reservations that fit the cap: 4
	capTinyCallUs int64 = 3                    // one token in and out, with the margin, rounded up
)

var capRequest = pacer.Request{Input: 16_000, Output: 4_000, Model: capModel}

func capConfig(t *testing.T, concurrency int64) pacer.Config {
	return pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: concurrency},
		Rates:  []pacer.Rate{{Unit: pacer.Spend, Limit: capUs, Window: 24 * time.Hour, Sliding: true}},
		Prices: map[string]pacer.Price{"": {Input: 1e6, CachedInput: 1e5, Output: 1e6}}}
}

// capStorm sends capCalls calls at once from capPacers Pacers: each tries
// to get in, then all that got in settle used, as calls that ran together.
// It returns how many got in and what they spent.
func capStorm(t *testing.T, ps []*pacer.Pacer, used pacer.Usage) (admitted, spent int64) {
	ctx := context.Background()
	var tried, wg sync.WaitGroup
	var n atomic.Int64
	tried.Add(capCalls)
	wg.Add(capCalls)
	for i := range capCalls {
		go func() {
			defer wg.Done()
			l, err := ps[i%len(ps)].TryAcquire(ctx, capRequest)
			tried.Done()
			if err != nil {
				if !errors.Is(err, pacer.ErrWaitTimeout) {
					t.Errorf("TryAcquire = %v; want admitted or ErrWaitTimeout", err)
				}
				return
			}
			n.Add(1)
			tried.Wait() // every call is in flight before any ends
			if err := l.SettleUsage(ctx, used); err != nil {
				t.Errorf("SettleUsage = %v", err)
			}
		}()
	}
	wg.Wait()
	return n.Load(), n.Load() * cost(used)
}

// cost is what usage cost at 1 µ$ a token.
func cost(u pacer.Usage) int64 { return u.Input + u.Output }

// counted returns what the budget counts as spent in the day.
func counted(t *testing.T, p *pacer.Pacer) int64 {
	t.Helper()
	s := snap(t, p)
	if len(s.Rates) != 1 {
		t.Fatalf("Snapshot.Rates = %+v; want the spend cap alone", s.Rates)
	}
	return capUs - int64(math.Round(s.Rates[0].Level))
}

// A call whose prompt the estimate undercounts by 20%, as for Claude, stays
// within its reservation: 50 calls at once from 5 Pacers never spend more
// than the cap, and the budget counts what they spent.
func TestSpendCapHoldsWithinMargin(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ps := newPacers(t, b, capPacers, capConfig(t, 0))
		newClock(b)
		used := pacer.Usage{Input: 16_000 * 1.2, Output: 4_000} // 23,200 µ$
		admitted, spent := capStorm(t, ps, used)
		if spent > capUs {
			t.Errorf("%d calls spent %d µ$; want at most the cap, %d", admitted, spent, capUs)
		}
		if admitted != capAdmits {
			t.Errorf("%d calls admitted; want %d, the reservations that fit the cap", admitted, capAdmits)
		}
		if got := counted(t, ps[0]); got != spent {
			t.Errorf("the budget counts %d µ$ spent; want %d", got, spent)
		}
		// 6,800 µ$ are left: no such call fits until the day slides.
		_, err := ps[1].TryAcquire(context.Background(), capRequest)
		if ny := notYet(t, "a call past the cap", err); retryAfter(ny) < 23*time.Hour {
			t.Errorf("RetryAfter %v; want about a day, when the spend slides out", retryAfter(ny))
		}
	})
}

// Usage beyond the margin passes the cap by no more than the calls in flight
// together exceed their reservations; once debt has filled the cap, no call
// gets in, however small, until the day slides.
func TestSpendCapBoundBeyondMargin(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ps := newPacers(t, b, capPacers, capConfig(t, 0))
		c := newClock(b)
		used := pacer.Usage{Input: 28_000, Output: 4_000} // +75%: 32,000 µ$
		excess := cost(used) - capReserveUs
		admitted, spent := capStorm(t, ps, used)
		if bound := capUs + admitted*excess; spent > bound {
			t.Errorf("%d calls spent %d µ$; want at most %d: the cap plus %d calls × %d µ$ of excess", admitted, spent, bound, admitted, excess)
		}
		if admitted != capAdmits {
			t.Errorf("%d calls admitted; want %d", admitted, capAdmits)
		}
		if got := counted(t, ps[0]); got != spent {
			t.Errorf("the budget counts %d µ$ spent; want %d, its debt included", got, spent)
		}
		ctx := context.Background()
		tiny := pacer.Request{Input: 1, Output: 1, Model: capModel}
		_, err := ps[2].TryAcquire(ctx, tiny)
		if ny := notYet(t, "a call of 3 µ$ once debt has passed the cap", err); retryAfter(ny) < 23*time.Hour {
			t.Errorf("RetryAfter %v; want about a day", retryAfter(ny))
		}
		if b.Mini == nil {
			return // the rest needs a day of clock
		}
		c.advance(24*time.Hour + 24*time.Hour/64) // the oldest sub-window is counted whole
		if _, err := ps[2].TryAcquire(ctx, tiny); err != nil {
			t.Errorf("a call once the day has slid = %v; want admitted", err)
		}
		if got := counted(t, ps[0]); got != capTinyCallUs {
			t.Errorf("the budget counts %d µ$ in the new day; want %d", got, capTinyCallUs)
		}
	})
}

// A spend cap that refills (not Sliding) keeps its debt too: past the cap,
// no call gets in, however small, until the refill has paid the debt back.
func TestSpendCapDebtOnARefillingCap(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		cfg := capConfig(t, 0)
		cfg.Rates[0].Sliding = false
		ps := newPacers(t, b, capPacers, cfg)
		c := newClock(b)
		admitted, spent := capStorm(t, ps, pacer.Usage{Input: 28_000, Output: 4_000})
		if admitted != capAdmits || spent != capAdmits*32_000 {
			t.Fatalf("%d calls admitted, %d µ$ spent; want %d and %d", admitted, spent, capAdmits, capAdmits*32_000)
		}
		// 28,000 µ$ of debt, refilled at 100,000 a day: 6.7 hours.
		ctx := context.Background()
		tiny := pacer.Request{Input: 1, Output: 1, Model: capModel}
		_, err := ps[2].TryAcquire(ctx, tiny)
		if ny := notYet(t, "a call of 3 µ$ in debt", err); retryAfter(ny) < 6*time.Hour || retryAfter(ny) > 7*time.Hour {
			t.Errorf("RetryAfter %v; want about 6.7 hours, while the refill pays the debt back", retryAfter(ny))
		}
		if b.Mini == nil {
			return // the rest needs hours of clock
		}
		c.advance(6 * time.Hour)
		_, err = ps[2].TryAcquire(ctx, tiny)
		notYet(t, "a call 6 hours on, 3,000 µ$ still owed", err)
		c.advance(time.Hour)
		if _, err := ps[2].TryAcquire(ctx, tiny); err != nil {
			t.Errorf("a call once the debt is paid back = %v; want admitted", err)
		}
	})
}

// Limits.Concurrency bounds the calls in flight, and so the overshoot: with
// 2 slots, 20 callers whose calls all exceed the margin pass the cap by at
// most 2 calls' excess.
func TestSpendCapBoundByConcurrency(t *testing.T) {
	t.Parallel()
	const slots, callers = 2, 20
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ps := newPacers(t, b, capPacers, capConfig(t, slots))
		newClock(b)
		used := pacer.Usage{Input: 28_000, Output: 4_000}
		excess := cost(used) - capReserveUs
		ctx := context.Background()
		var wg sync.WaitGroup
		var admitted, inFlight, most atomic.Int64
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := ps[i%len(ps)].Acquire(ctx, pacer.Request{Input: capRequest.Input, Output: capRequest.Output, Model: capModel, MaxWait: 10 * time.Second})
				if err != nil {
					if !errors.Is(err, pacer.ErrWaitTimeout) {
						t.Errorf("Acquire = %v; want admitted, or refused for want of spend", err)
					}
					return
				}
				admitted.Add(1)
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(5 * time.Millisecond) // the call
				inFlight.Add(-1)
				if err := l.SettleUsage(ctx, used); err != nil {
					t.Errorf("SettleUsage = %v", err)
				}
			}()
		}
		wg.Wait()
		spent := admitted.Load() * cost(used)
		if bound := capUs + slots*excess; spent > bound {
			t.Errorf("%d calls spent %d µ$; want at most %d: the cap plus %d slots × %d µ$", admitted.Load(), spent, bound, slots, excess)
		}
		if most.Load() > slots {
			t.Errorf("%d calls in flight at once; want at most %d", most.Load(), slots)
		}
		if got := counted(t, ps[0]); got != spent {
			t.Errorf("the budget counts %d µ$ spent; want %d", got, spent)
		}
	})
}

// A price's InputMargin: the family's by default, as set when positive,
// none when negative; it enlarges the spend reserved, never a token rate's
// charge.
func TestSpendInputMargin(t *testing.T) {
	for _, tc := range []struct {
		model  string
		margin float64 // Price.InputMargin
		want   int64   // µ$ reserved for 1,000 tokens in and 100 out at 1 µ$
	}{
		{"claude-sonnet-4-5", 0, 1350},
		{"us.anthropic.claude-3-5-sonnet-20240620-v1:0", 0, 1350},
		{"gpt-4o", 0, 1150},
		{"openai:o3-mini", 0, 1150},
		{"gemini-2.5-pro", 0, 1350},
		{"azure/gpt-4.1-mini", 0, 1150},
		{"claude-sonnet-4-5", 0.5, 1600},
		{"claude-sonnet-4-5", -1, 1100},
	} {
		b := redistest.Mini(t)
		cfg := pacer.Config{Name: "m", Limits: pacer.Limits{TPM: 10_000},
			Rates:  []pacer.Rate{{Unit: pacer.Spend, Limit: 10_000, Window: time.Hour, Sliding: true}},
			Prices: map[string]pacer.Price{"": {Input: 1e6, Output: 1e6, InputMargin: tc.margin}}}
		p := newPacer(t, b, cfg)
		newClock(b)
		if _, err := p.TryAcquire(context.Background(), pacer.Request{Input: 1000, Output: 100, Model: tc.model}); err != nil {
			t.Fatal(err)
		}
		s := snap(t, p)
		if got := 10_000 - int64(s.Rates[1].Level); got != tc.want {
			t.Errorf("%s, InputMargin %v: reserved %d µ$; want %d", tc.model, tc.margin, got, tc.want)
		}
		if got := 10_000 - int64(s.Rate("tpm").Level); got != 1100 {
			t.Errorf("%s, InputMargin %v: TPM charged %d; want 1,100, the request's tokens", tc.model, tc.margin, got)
		}
	}
	b := redistest.Mini(t)
	for _, m := range []float64{10.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := pacer.New(b.Client(t), pacer.Config{Name: "x", Rates: []pacer.Rate{{Unit: pacer.Spend, Limit: 10, Window: time.Hour}},
			Prices: map[string]pacer.Price{"": {Input: 1, InputMargin: m}}})
		if !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("InputMargin %v: New = %v; want ErrInvalid", m, err)
		}
	}
}

// A tenant's Spend rate caps its calls even on a budget without one of its
// own: calls are priced (they were sent a charge of 0, and the cap never
// filled).
func TestTenantSpendCapWithoutBudgetSpend(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Mini(t).Client(t)
	p, err := pacer.New(rdb, pacer.Config{
		Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1_000_000},
		Prices:  map[string]pacer.Price{"": {Input: 1_000_000, Output: 1_000_000, InputMargin: -1}},
		Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Spend, Limit: 1_000, Window: time.Hour, Sliding: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 600, Tenant: "a"}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 600, Tenant: "a"}); !errors.Is(err, pacer.ErrWaitTimeout) {
		t.Fatalf("second call of 600 on a cap of 1,000 with 600 spent: %v, want ErrWaitTimeout", err)
	}
	if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 600, Tenant: "b"}); err != nil {
		t.Fatalf("another tenant's call: %v", err)
	}
}
