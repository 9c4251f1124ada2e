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

// notYet returns err's *NotYetError, failing the test if it is not one.
func notYet(t *testing.T, what string, err error) *pacer.NotYetError {
	t.Helper()
	var ny *pacer.NotYetError
	if !errors.As(err, &ny) {
		t.Fatalf("%s = %v; want a *NotYetError", what, err)
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
		if ny.Limit != hour.Name() || ny.RetryAfter < 14*time.Minute {
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
		if want := 14 * time.Minute; ny.RetryAfter < want-time.Second || ny.RetryAfter > want+time.Second {
			t.Errorf("RetryAfter %v; want about %v", ny.RetryAfter, want)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 2000}); err != nil {
			t.Errorf("2,000 tokens within both = %v", err)
		}
		s := snap(t, p)
		if len(s.Rates) != 1 || s.Rates[0].Rate != hour || math.Abs(s.Rates[0].Level-200) > 1 || s.Rates[0].Capacity != 12_000 {
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
		for i := range 5 {
			if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
				t.Fatalf("call %d = %v", i, err)
			}
		}
		_, err := p.TryAcquire(ctx, pacer.Request{})
		ny := notYet(t, "the sixth call", err)
		if ny.Limit != "requests/1s" || ny.RetryAfter <= 0 || ny.RetryAfter > 200*time.Millisecond {
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
		if l.Tokens() != 1200 {
			t.Errorf("lease of %d tokens; want Input + Output = 1200", l.Tokens())
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
		if len(s.Rates) != 2 || math.Abs(s.Rates[0].Level-200) > 1 || math.Abs(s.Rates[1].Level-400) > 1 {
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
		if math.Abs(s.Rates[0].Level-20) > 1 || math.Abs(s.Rates[1].Level-20) > 1 {
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
	if s := snap(t, p); s.RPM.Limit != 100 || len(s.Rates) != 0 {
		t.Errorf("a requests-per-minute rate: RPM %+v, Rates %+v; want it as the RPM bucket", s.RPM, s.Rates)
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
		if lv := snap(t, p).TPM.Level; lv < 4500 || lv > 4600 {
			t.Errorf("TPM level %.0f after 500 weighted 10 and 500 weighted 1; want 4500", lv)
		}
		if big.Tokens() != 500 {
			t.Errorf("the lease reports %d tokens; want the call's own 500", big.Tokens())
		}
		if err := big.Settle(ctx, 200); err != nil {
			t.Fatal(err)
		}
		if lv := snap(t, p).TPM.Level; lv < 7500 || lv > 7700 {
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
	if lv := snap(t, p).RPM.Level; math.Abs(lv-40) > 0.01 {
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
	if lv := snap(t, p).TPM.Level; lv != 500 {
		t.Errorf("TPM level %.0f; want 500: NoRefund keeps the reservation", lv)
	}
}
