package pacer_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// notYet returns err's ErrWaitTimeout *RefusedError, failing the test if it is not one.
func notYet(t *testing.T, what string, err error) *pacer.RefusedError {
	t.Helper()
	var ny *pacer.RefusedError
	if !errors.Is(err, pacer.ErrWaitTimeout) || !errors.As(err, &ny) {
		t.Fatalf("%s = %v; want a *RefusedError matching ErrWaitTimeout", what, err)
	}
	return ny
}

// Two rates on one unit are checked together: a minute's tokens refill,
// while the hour's do not.
func TestRatesOnOneUnit(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		hour := pacer.Rate{Unit: pacer.Tokens, Limit: 12_000, Window: time.Hour}
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 10_000}, Rates: []pacer.Rate{hour}})
		c := newClock(b)
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 10_000}); err != nil {
			t.Fatalf("first call = %v", err)
		}
		ny := notYet(t, "a call on an empty minute", func() error { _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 5000}); return err }())
		// The minute needs 30 s for 5,000 more; the hour 15 minutes: the
		// longest wait names the limit.
		if ny.Limit != hour.Name() || retryAfter(ny) < 14*time.Minute {
			t.Errorf("%+v; want the hour's limit, about 15 minutes", *ny)
		}
		if b.Mini == nil {
			return // the rest needs a minute of clock
		}
		c.advance(time.Minute) // the minute is full again; the hour has 2,200
		ny = notYet(t, "5,000 tokens after a minute", func() error { _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 5000}); return err }())
		if ny.Limit != hour.Name() || ny.Limit != "tokens/3600s" {
			t.Errorf("limit %q; want %q", ny.Limit, hour.Name())
		}
		// 2,800 more tokens take 14 minutes at 200 a minute.
		if want := 14 * time.Minute; retryAfter(ny) < want-time.Second || retryAfter(ny) > want+time.Second {
			t.Errorf("RetryAfter %v; want about %v", retryAfter(ny), want)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 2000}); err != nil {
			t.Errorf("2,000 tokens within both = %v", err)
		}
		s := snap(t, p)
		if h := s.Rate(hour.Name()); len(s.Rates) != 2 || h.Rate != hour || math.Abs(h.Level-200) > 1 || h.Capacity != 12_000 {
			t.Errorf("Snapshot.Rates = %+v; want the hour at 200 of 12,000", s.Rates)
		}
	})
}

// A rate per second: five calls pass, the sixth learns when the next fits.
func TestRatePerSecond(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		perSec := pacer.Rate{Unit: pacer.Requests, Limit: 5, Window: time.Second}
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{perSec}})
		newClock(b)
		// A real Redis refills one call every 200 ms while the test runs,
		// however slowly: the calls go on until one is refused.
		var err error
		admitted := 0
		for ; admitted < 50; admitted++ {
			if _, err = p.TryAcquire(ctx, pacer.Request{}); err != nil {
				break
			}
		}
		if admitted < 5 {
			t.Fatalf("%d calls admitted before a refusal; want the 5 a second holds", admitted)
		}
		ny := notYet(t, "the call past the rate", err)
		if ny.Limit != "requests/1s" || retryAfter(ny) <= 0 || retryAfter(ny) > 200*time.Millisecond {
			t.Errorf("%+v; want requests/1s and a retry within 200ms", *ny)
		}
	})
}

// Input and output tokens are reserved and settled apart.
func TestInputAndOutputRates(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		in := pacer.Rate{Unit: pacer.InputTokens, Limit: 1000, Window: time.Hour}
		out := pacer.Rate{Unit: pacer.OutputTokens, Limit: 500, Window: time.Hour}
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{in, out}})
		newClock(b)
		l, err := p.TryAcquire(ctx, pacer.Request{Input: 800, Output: 400})
		if err != nil {
			t.Fatal(err)
		}
		if l.Info().Tokens != 1200 {
			t.Errorf("lease of %d tokens; want Input + Output = 1200", l.Info().Tokens)
		}
		_, err = p.TryAcquire(ctx, pacer.Request{Input: 300, Output: 50})
		if ny := notYet(t, "300 more input", err); ny.Limit != "input_tokens/3600s" {
			t.Errorf("limit %q; want input_tokens/3600s", ny.Limit)
		}
		// 100 of 400 output used: 300 back to the output rate, none to input.
		if err := l.SettleUsage(ctx, pacer.Usage{Input: 800, Output: 100}); err != nil {
			t.Fatal(err)
		}
		s := snap(t, p)
		// An hour of 1,000 refills 0.28 a second: 5 covers a slow run.
		if len(s.Rates) != 2 || math.Abs(s.Rates[0].Level-200) > 5 || math.Abs(s.Rates[1].Level-400) > 5 {
			t.Fatalf("levels %+v; want input 200, output 400", s.Rates)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Input: 150, Output: 350}); err != nil {
			t.Errorf("a call within both after the settle = %v", err)
		}
		// A lease settled with its total alone gives an input or output rate
		// back only what its reservation exceeds the total by.
		l2, err := p.TryAcquire(ctx, pacer.Request{Input: 50, Output: 50})
		if err != nil {
			t.Fatal(err)
		}
		// Both rates are empty now; 30 used in all means at most 30 of
		// each: 20 back to each.
		if err := l2.Settle(ctx, 30); err != nil {
			t.Fatal(err)
		}
		s = snap(t, p)
		if math.Abs(s.Rates[0].Level-20) > 5 || math.Abs(s.Rates[1].Level-20) > 5 {
			t.Errorf("after Settle(30) of 50 + 50: levels %.0f, %.0f; want 20 and 20", s.Rates[0].Level, s.Rates[1].Level)
		}
	})
}

// Many Pacers and goroutines never admit more than an hourly rate holds.
func TestRateNeverOversubscribed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1_000_000},
			Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 5000, Window: time.Hour}}}
		ps := newPacers(t, b, 4, cfg)
		newClock(b)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for _, p := range ps {
			for range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100}); err == nil {
							admitted.Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		// 200 tries of 100 tokens: 50 fit the hour (a real Redis refills
		// 5000/3600 a second: at most one more in a slow run).
		if n := admitted.Load(); n < 50 || n > 51 {
			t.Errorf("%d calls of 100 tokens admitted; want 50 (an hour of 5,000)", n)
		}
	})
}

// Rates that cannot be right are refused with ErrInvalid.
func TestRatesInvalid(t *testing.T) {
	b := redistest.Mini(t)
	rpm := pacer.Rate{Unit: pacer.Requests, Limit: 100, Window: time.Minute}
	bad := map[string]pacer.Config{
		"no unit":          {Rates: []pacer.Rate{{Limit: 10, Window: time.Minute}}},
		"no limit":         {Rates: []pacer.Rate{{Unit: pacer.Tokens, Window: time.Minute}}},
		"short window":     {Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 10, Window: 999 * time.Millisecond}}},
		"sub-ms window":    {Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 10, Window: time.Second + time.Microsecond}}},
		"burst over limit": {Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 10, Window: time.Minute, Burst: 11}}},
		"twice":            {Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 10, Window: time.Hour}, {Unit: pacer.Tokens, Limit: 20, Window: time.Hour}}},
		"and in Limits":    {Limits: pacer.Limits{RPM: 100}, Rates: []pacer.Rate{rpm}},
		"too many":         {Rates: make([]pacer.Rate, 17)},
	}
	for name, cfg := range bad {
		cfg.Name = "x"
		if _, err := pacer.New(b.Client(t), cfg); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("%s: New = %v; want ErrInvalid", name, err)
		}
	}
	// A rate that is one of the four is that bucket.
	p := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{rpm}})
	if s := snap(t, p); s.Rate("rpm").Limit != 100 || len(s.Rates) != 1 {
		t.Errorf("a requests-per-minute rate: Rates %+v; want it as the one RPM bucket", s.Rates)
	}
	ctx := context.Background()
	for _, r := range []pacer.Request{{Tokens: 10, Input: 3, Output: 3}, {Input: -1}, {Output: 1 << 51}} {
		if _, err := p.TryAcquire(ctx, r); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("TryAcquire(%+v) = %v; want ErrInvalid", r, err)
		}
	}
	pin := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.InputTokens, Limit: 1000, Window: time.Minute}}})
	if _, err := pin.TryAcquire(ctx, pacer.Request{Input: 1001, Output: 5}); !errors.Is(err, pacer.ErrTooLarge) {
		t.Errorf("1,001 input tokens against 1,000 = %v; want ErrTooLarge", err)
	}
	if _, err := pin.TryAcquire(ctx, pacer.Request{Input: 900, Output: 5000}); err != nil {
		t.Errorf("900 input and 5,000 output against an input rate alone = %v; want admitted", err)
	}
}

// A model's weight multiplies its tokens on every token rate, at admission
// and at settle.
func TestWeights(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100, TPM: 10_000},
			Weights: map[string]float64{"gpt-4o": 10}})
		newClock(b)
		big, err := p.TryAcquire(ctx, pacer.Request{Tokens: 500, Model: "gpt-4o"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 500, Model: "gpt-4o-mini"}); err != nil {
			t.Fatal(err)
		}
		// A real Redis refills 166 tokens a second while the test runs.
		// (up to 6 s of it on a loaded machine)
		if lv := snap(t, p).Rate("tpm").Level; lv < 4500 || lv > 5500 {
			t.Errorf("TPM level %.0f after 500 weighted 10 and 500 weighted 1; want 4500", lv)
		}
		if big.Info().Tokens != 500 {
			t.Errorf("the lease reports %d tokens; want the call's own 500", big.Info().Tokens)
		}
		if err := big.Settle(ctx, 200); err != nil {
			t.Fatal(err)
		}
		if lv := snap(t, p).Rate("tpm").Level; lv < 7500 || lv > 8500 {
			t.Errorf("TPM level %.0f after settling 200 of 500 weighted 10; want 7500", lv)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1001, Model: "gpt-4o"}); !errors.Is(err, pacer.ErrTooLarge) {
			t.Errorf("1,001 tokens weighted 10 against 10,000 = %v; want ErrTooLarge", err)
		}
	})
	b := redistest.Mini(t)
	for _, w := range []float64{0, -1, math.NaN(), math.Inf(1), 1001} {
		_, err := pacer.New(b.Client(t), pacer.Config{Name: "x", Limits: pacer.Limits{TPM: 10}, Weights: map[string]float64{"m": w}})
		if !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("weight %v: New = %v; want ErrInvalid", w, err)
		}
	}
}

// Sync follows the provider for a request or token minute given as a
// Rate as it does for one given in Limits.
func TestSyncRateAsRPM(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 100, Window: time.Minute}}})
	newClock(b)
	if err := p.Sync(ctx, classify.RateLimits{Requests: classify.Window{Remaining: 40, HasRemaining: true}}); err != nil {
		t.Fatal(err)
	}
	if lv := snap(t, p).Rate("rpm").Level; math.Abs(lv-40) > 0.01 {
		t.Errorf("RPM level %.2f after the provider reported 40 left; want 40", lv)
	}
}

// On a NoRefund budget, the Ended event still says what the call used,
// though the reservation stays charged.
func TestNoRefundEndedReportsUsage(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	var used []int64
	var mu sync.Mutex
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 1000}, NoRefund: true, Observe: func(e pacer.Event) {
		if e.Kind == pacer.Ended {
			mu.Lock()
			used = append(used, e.Used)
			mu.Unlock()
		}
	}})
	newClock(b)
	l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, 120); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(used) != 1 || used[0] != 120 {
		t.Errorf("Ended.Used = %v; want [120]", used)
	}
	if lv := snap(t, p).Rate("tpm").Level; lv != 500 {
		t.Errorf("TPM level %.0f; want 500: NoRefund keeps the reservation", lv)
	}
}

// A spend cap reserves each call's worst case and settles what it cost:
// what is in flight can never push the spend past the cap.
func TestSpendRate(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		// $1.00 a day in micro-dollars, as a strict sliding window.
		spend := pacer.Rate{Unit: pacer.Spend, Limit: 1_000_000, Window: 24 * time.Hour, Sliding: true}
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 10_000_000}, Rates: []pacer.Rate{spend},
			Prices: map[string]pacer.Price{"gpt-4o": {Input: 2_500_000, CachedInput: 1_250_000, Output: 10_000_000}}})
		newClock(b)
		// 100k input + 50k output at most: $0.25 + $0.50 = 750,000 µ$.
		l, err := p.TryAcquire(ctx, pacer.Request{Input: 100_000, Output: 50_000, Model: "gpt-4o"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Input: 100_000, Output: 10_000, Model: "gpt-4o"}); !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Fatalf("a call whose worst case passes the cap while the first is in flight = %v; want ErrWaitTimeout", err)
		}
		// It used 100k input (40k cached) and 20k output: 150,000 + 50,000
		// + 200,000 = 400,000 µ$; 350,000 come back.
		if err := l.SettleUsage(ctx, pacer.Usage{Input: 100_000, CachedInput: 40_000, Output: 20_000}); err != nil {
			t.Fatal(err)
		}
		s := snap(t, p)
		if len(s.Rates) != 2 || s.Rates[1].Level != 600_000 {
			t.Fatalf("spend left %+v; want 600,000", s.Rates)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Input: 100_000, Output: 10_000, Model: "gpt-4o"}); err != nil {
			t.Errorf("a call within the cap after the settle = %v", err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 10, Model: "unknown"}); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("a model without a price = %v; want ErrInvalid", err)
		}
	})
	b := redistest.Mini(t)
	_, err := pacer.New(b.Client(t), pacer.Config{Name: "x", Rates: []pacer.Rate{{Unit: pacer.Spend, Limit: 10, Window: time.Hour}}})
	if !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("a Spend rate without prices: New = %v; want ErrInvalid", err)
	}
}

// A turn reserved ahead and given back because its caller gave up is no
// lease the caller ever had: no Ended event reports it.
func TestGivenBackTurnEndsUnreported(t *testing.T) {
	b := redistest.Mini(t)
	var mu sync.Mutex
	kinds := map[pacer.EventKind]int{}
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 600}, Observe: func(e pacer.Event) {
		mu.Lock()
		kinds[e.Kind]++
		mu.Unlock()
	}})
	newClock(b)
	if _, err := p.TryAcquire(context.Background(), pacer.Request{Tokens: 600}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for snap(t, p).Rate("tpm").Level > -1 { // wait until the turn is reserved
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := p.Acquire(ctx, pacer.Request{Tokens: 30, MaxWait: 10 * time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v; want context.Canceled (its turn was 3 s away)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for snap(t, p).Rate("tpm").Level < -0.5 { // the turn went back
		if time.Now().After(deadline) {
			t.Fatal("the reserved turn was not given back")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if kinds[pacer.Admitted] != 1 || kinds[pacer.Ended] != 0 {
		t.Errorf("events %v; want 1 Admitted (the first call) and no Ended", kinds)
	}
}

// A call whose worst case can never fit a spend cap is refused with
// ErrTooLarge, never a panic.
func TestSpendTooLarge(t *testing.T) {
	b := redistest.Mini(t)
	p := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Spend, Limit: 10, Window: time.Hour}},
		Prices: map[string]pacer.Price{"": {Output: 1e9}}})
	for _, r := range []pacer.Request{{Tokens: 100}, {Tokens: 5, Priority: pacer.Batch}} {
		if _, err := p.TryAcquire(context.Background(), r); !errors.Is(err, pacer.ErrTooLarge) {
			t.Errorf("TryAcquire(%+v) = %v; want ErrTooLarge", r, err)
		}
	}
}
