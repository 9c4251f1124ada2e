package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// newPacers returns n Pacers on one budget, each with its own client: n
// processes as far as Redis can tell.
func newPacers(t *testing.T, b redistest.Backend, n int, cfg pacer.Config) []*pacer.Pacer {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = redistest.Name(t)
	}
	ps := make([]*pacer.Pacer, n)
	for i := range ps {
		p, err := pacer.New(b.Client(t), cfg)
		if err != nil {
			t.Fatalf("New(%+v) = %v", cfg, err)
		}
		ps[i] = p
	}
	return ps
}

func newPacer(t *testing.T, b redistest.Backend, cfg pacer.Config) *pacer.Pacer {
	return newPacers(t, b, 1, cfg)[0]
}

func snap(t *testing.T, p *pacer.Pacer) pacer.Snapshot {
	t.Helper()
	s, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() = %v", err)
	}
	return s
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// Behaviour 1: 200 goroutines over several Pacers never admit more than the
// budget holds, counted exactly. RPD refills 50 a day: nothing refills during
// the test, so exactly 50 must be admitted.
func TestAtomicityExactCount(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ps := newPacers(t, b, 8, pacer.Config{Limits: pacer.Limits{RPD: 50, TPD: 1_000_000}, MaxWait: 50 * time.Millisecond})
		var admitted, timeouts atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func(p *pacer.Pacer) {
				defer wg.Done()
				l, err := p.Acquire(context.Background(), pacer.Request{Tokens: 100})
				switch {
				case err == nil:
					admitted.Add(1)
					if err := l.Settle(context.Background(), 100); err != nil {
						t.Errorf("Settle() = %v", err)
					}
				case errors.Is(err, pacer.ErrWaitTimeout):
					timeouts.Add(1)
				default:
					t.Errorf("Acquire() = %v", err)
				}
			}(ps[i%len(ps)])
		}
		wg.Wait()
		if admitted.Load() != 50 || timeouts.Load() != 150 {
			t.Errorf("admitted %d, timed out %d; want 50 and 150", admitted.Load(), timeouts.Load())
		}
		s := snap(t, ps[0])
		refill := 1_000_000 / 86_400.0 * time.Since(start).Seconds() // TPD refills 11.6 tokens a second
		if !near(s.RPD.Level, 0, 0.1) || s.TPD.Level < 1_000_000-50*100 || s.TPD.Level > 1_000_000-50*100+refill+1 {
			t.Errorf("after: RPD level %v, TPD level %v; want 0 and %d", s.RPD.Level, s.TPD.Level, 1_000_000-50*100)
		}
	})
}

// Acquire (which waits and reserves turns ahead) under contention from many
// Pacers never admits more than capacity plus refill over the elapsed time.
func TestAtomicityUnderWaiting(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		// 60,000 TPM = 1,000 tokens/s, burst 500: admissions are paced.
		ps := newPacers(t, b, 6, pacer.Config{Limits: pacer.Limits{TPM: 60_000}, Burst: pacer.Burst{TPM: 500}, MaxWait: 5 * time.Second})
		const cost = 50
		start := time.Now()
		stop := start.Add(700 * time.Millisecond)
		var tokens atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 24; i++ {
			wg.Add(1)
			go func(p *pacer.Pacer) {
				defer wg.Done()
				for time.Now().Before(stop) {
					l, err := p.Acquire(context.Background(), pacer.Request{Tokens: cost})
					if err != nil {
						t.Errorf("Acquire() = %v", err)
						return
					}
					if time.Now().Before(stop) {
						tokens.Add(cost)
					}
					_ = l.Settle(context.Background(), cost)
				}
			}(ps[i%len(ps)])
		}
		wg.Wait()
		elapsed := stop.Sub(start).Seconds()
		max := 500 + 1000*elapsed + 1000*0.05 // 50 ms of slack for clocks read at different moments
		// A loose floor only shows the budget was in use: how near the limit
		// it runs is measured by storm/redisbench, not asserted on a shared
		// machine.
		min := 0.5 * (500 + 1000*elapsed)
		if got := float64(tokens.Load()); got > max || got < min {
			t.Errorf("admitted %v tokens in %.2fs; want between %.0f and %.0f", got, elapsed, min, max)
		}
	})
}

// Behaviour 2: all-or-nothing across limits.
func TestAllOrNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		t.Run("tpm denial leaves rpm", func(t *testing.T) {
			p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 10, TPM: 1000}})
			if _, err := p.Acquire(ctx, pacer.Request{Tokens: 900}); err != nil {
				t.Fatalf("Acquire(900) = %v", err)
			}
			l, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 500})
			if l != nil || err != nil || wait <= 0 {
				t.Fatalf("TryAcquire(500) = %v, %v, %v; want nil, >0, nil", l, wait, err)
			}
			if _, err := p.Acquire(ctx, pacer.Request{Tokens: 500, MaxWait: 10 * time.Millisecond}); !errors.Is(err, pacer.ErrWaitTimeout) {
				t.Fatalf("Acquire(500) = %v; want ErrWaitTimeout", err)
			}
			if s := snap(t, p); !near(s.RPM.Level, 9, 0.05) {
				t.Errorf("RPM level = %v; want 9 (the TPM denials took no request)", s.RPM.Level)
			}
		})
		t.Run("rpm denial leaves tpm", func(t *testing.T) {
			p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 2, TPM: 100_000}})
			for i := 0; i < 2; i++ {
				if _, err := p.Acquire(ctx, pacer.Request{Tokens: 1000}); err != nil {
					t.Fatalf("Acquire() = %v", err)
				}
			}
			if l, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 1000}); l != nil || err != nil || wait < 20*time.Second {
				t.Fatalf("TryAcquire() = %v, %v, %v; want nil, ~30s, nil", l, wait, err)
			}
			if s := snap(t, p); !near(s.TPM.Level, 98_000, 20) {
				t.Errorf("TPM level = %v; want 98000 (the RPM denial took no tokens)", s.TPM.Level)
			}
		})
	})
}

// Behaviour 3: settling less refunds at once; settling more is debt.
func TestRefundAndDebt(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 6000}})
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 4000})
		if err != nil {
			t.Fatal(err)
		}
		if s := snap(t, p); !near(s.TPM.Level, 2000, 5) {
			t.Fatalf("after reserving 4000: level %v, want 2000", s.TPM.Level)
		}
		if err := l.Settle(ctx, 1000); err != nil {
			t.Fatalf("Settle(1000) = %v", err)
		}
		if s := snap(t, p); !near(s.TPM.Level, 5000, 5) {
			t.Fatalf("after settling 1000 of 4000: level %v, want 5000", s.TPM.Level)
		}
		if err := l.Settle(ctx, 0); err != nil {
			t.Fatalf("second Settle() = %v; want nil (idempotent)", err)
		}
		if s := snap(t, p); !near(s.TPM.Level, 5000, 5) {
			t.Fatalf("after a second Settle: level %v, want still 5000", s.TPM.Level)
		}

		l, err = p.Acquire(ctx, pacer.Request{Tokens: 5000})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, 8000); err != nil {
			t.Fatal(err)
		}
		s := snap(t, p)
		if !near(s.TPM.Level, -3000, 5) {
			t.Fatalf("after an overrun of 3000: level %v, want -3000", s.TPM.Level)
		}
		// 100 tokens/s: a 100-token call now waits for the debt plus itself.
		_, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 100})
		if err != nil || wait < 30*time.Second || wait > 32*time.Second {
			t.Errorf("TryAcquire(100) in debt: wait %v, err %v; want about 31s", wait, err)
		}
	})
}

// Behaviour 7: ErrTooLarge at once; ErrWaitTimeout without sleeping the bound.
func TestTooLargeAndWaitTimeout(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 1000, RPM: 100}, MaxWait: 10 * time.Second})
		start := time.Now()
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 1001}); !errors.Is(err, pacer.ErrTooLarge) {
			t.Errorf("Acquire(1001) = %v; want ErrTooLarge", err)
		}
		if _, _, err := tryAcquire(p, ctx, pacer.Request{Tokens: 5000}); !errors.Is(err, pacer.ErrTooLarge) {
			t.Errorf("TryAcquire(5000) = %v; want ErrTooLarge", err)
		}
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 1000}); err != nil {
			t.Fatal(err)
		}
		// The bucket is empty and refills 1000 a minute: 500 tokens take 30s.
		_, err := p.Acquire(ctx, pacer.Request{Tokens: 500})
		var we *pacer.WaitError
		if !errors.Is(err, pacer.ErrWaitTimeout) || !errors.As(err, &we) || we.Limit != "tpm" || we.Wait < 25*time.Second {
			t.Errorf("Acquire(500) = %v; want a WaitError on tpm of about 30s", err)
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err = p.Acquire(cctx, pacer.Request{Tokens: 500})
		if !errors.Is(err, pacer.ErrWaitTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire(500) with a 2s deadline = %v; want ErrWaitTimeout and DeadlineExceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %v; the script can tell at once that the bound is too short", d)
		}
	})
}

// Behaviour 9: the buckets refill on Redis's clock, not the caller's.
func TestRedisClock(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b.Mini.SetTime(t0)
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 6000}})
	if _, err := p.Acquire(ctx, pacer.Request{Tokens: 6000}); err != nil {
		t.Fatal(err)
	}
	if l, wait, _ := tryAcquire(p, ctx, pacer.Request{Tokens: 3000}); l != nil || wait != 30*time.Second {
		t.Fatalf("TryAcquire(3000) on an empty bucket = %v, %v; want nil, 30s", l, wait)
	}
	b.Mini.SetTime(t0.Add(29 * time.Second))
	if l, wait, _ := tryAcquire(p, ctx, pacer.Request{Tokens: 3000}); l != nil || wait != time.Second {
		t.Fatalf("29s later = %v, %v; want nil, 1s", l, wait)
	}
	b.Mini.SetTime(t0.Add(30 * time.Second))
	if l, _, err := tryAcquire(p, ctx, pacer.Request{Tokens: 3000}); l == nil || err != nil {
		t.Fatalf("30s later = %v, %v; want a lease", l, err)
	}
	if s := snap(t, p); !s.Time.Equal(t0.Add(30*time.Second)) || s.TPM.Level != 0 {
		t.Errorf("Snapshot() = %+v; want Time %v and level 0", s, t0.Add(30*time.Second))
	}

	// A clock that steps back (a failover) refills nothing until it has
	// caught up, and never refills the skew twice.
	b.Mini.SetTime(t0.Add(20 * time.Second))
	if l, _, _ := tryAcquire(p, ctx, pacer.Request{Tokens: 100}); l != nil {
		t.Fatal("admitted after the clock stepped back: the bucket refilled")
	}
	b.Mini.SetTime(t0.Add(40 * time.Second))
	if _, wait, _ := tryAcquire(p, ctx, pacer.Request{Tokens: 2000}); wait != 10*time.Second {
		t.Errorf("10s after the old clock: wait for 2000 = %v; want 10s (1000 refilled, not 2000)", wait)
	}
}

// A full bucket admits exactly its capacity, also when the limit does not
// divide its window into whole microseconds (RPM 7: 8,571,428.57 µs a
// request), where each charge is rounded up. On miniredis the clock stands
// still, so no refill between the calls can hide a shortfall.
func TestFullBucketAdmitsExactlyItsCapacity(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		if b.Mini != nil {
			b.Mini.SetTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
		}
		for i, tc := range []struct {
			limits pacer.Limits
			tokens int64
			calls  int
		}{
			{pacer.Limits{RPM: 7}, 0, 7},
			{pacer.Limits{RPM: 13, TPM: 91}, 7, 13},
			{pacer.Limits{TPM: 90_000}, 1000, 90},
			{pacer.Limits{RPD: 11}, 0, 11},
		} {
			p := newPacer(t, b, pacer.Config{Name: fmt.Sprintf("%s-%d", redistest.Name(t), i), Limits: tc.limits})
			for j := 0; j < tc.calls; j++ {
				if l, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: tc.tokens}); l == nil || err != nil {
					t.Fatalf("%v: call %d of %d = %v, %v, %v; want admitted", tc.limits, j+1, tc.calls, l, wait, err)
				}
			}
			if l, _, err := tryAcquire(p, ctx, pacer.Request{Tokens: max(tc.tokens, 1)}); l != nil || err != nil {
				t.Errorf("%v: a call beyond the capacity = %v, %v; want denied", tc.limits, l, err)
			}
		}
	})
}
