package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// Behaviour 1: 200 goroutines over several Pacers never admit more than the
// budget holds, counted exactly. RPD refills 50 a day: nothing refills during
// the test, so exactly 50 must be admitted.
func TestAtomicityExactCount(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		clock := stopClock(b)
		ps := newPacers(t, b, 8, pacer.Config{Limits: pacer.Limits{RPD: 50, TPD: 1_000_000}, MaxWait: 50 * time.Millisecond})
		var admitted, timeouts atomic.Int64
		var wg sync.WaitGroup
		// 100 calls from 8 processes race for 50 admissions.
		for i := 0; i < 100; i++ {
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
		if admitted.Load() != 50 || timeouts.Load() != 50 {
			t.Errorf("admitted %d, timed out %d; want 50 and 50", admitted.Load(), timeouts.Load())
		}
		s := snap(t, ps[0])
		clock.Level(t, "RPD", s.Rate("rpd").Level, 0, 50/86_400.0)
		clock.Level(t, "TPD", s.Rate("tpd").Level, 1_000_000-50*100, 1_000_000/86_400.0)
	})
}

// Acquire (which waits and reserves turns ahead) under contention from many
// Pacers never admits more than capacity plus refill over the elapsed time.
// The bound is checked at every admission: by the time the k-th call
// returns, k calls' tokens must fit in the burst plus the refill since the
// test began. Load cannot break it: a call returns only once its turn has
// come on Redis's clock, which on this machine is the test's clock, so a
// slow machine only admits later, never more.
func TestAtomicityUnderWaiting(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		// 600,000 TPM = 10,000 tokens/s, burst 1,000: 120 calls of 100
		// tokens need at least 1.1 s, so most of them reserve a later turn.
		const rate, burst, cost, workers, calls = 10_000.0, 1000, 100, 24, 5
		var waited atomic.Int64
		ps := newPacers(t, b, 6, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 600_000, Window: time.Minute, Burst: burst}}, MaxWait: time.Minute,
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Waiting {
					waited.Add(1)
				}
			}})
		start := time.Now()
		var mu sync.Mutex
		var admitted []time.Time
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			wg.Add(1)
			go func(p *pacer.Pacer) {
				defer wg.Done()
				for j := 0; j < calls; j++ {
					l, err := p.Acquire(context.Background(), pacer.Request{Tokens: cost})
					if err != nil {
						t.Errorf("Acquire() = %v", err)
						return
					}
					at := time.Now()
					mu.Lock()
					admitted = append(admitted, at)
					mu.Unlock()
					if err := l.Settle(context.Background(), cost); err != nil {
						t.Errorf("Settle() = %v", err)
					}
				}
			}(ps[i%len(ps)])
		}
		wg.Wait()
		if len(admitted) != workers*calls {
			t.Fatalf("%d calls admitted; want all %d (MaxWait is a minute)", len(admitted), workers*calls)
		}
		slices.SortFunc(admitted, time.Time.Compare)
		// 5 ms of refill for what the clocks round: turns are given in
		// whole milliseconds, and a full bucket has under 1 ms of slack.
		const slack = rate * 0.005
		for k, at := range admitted {
			elapsed := at.Sub(start).Seconds()
			if got, limit := float64((k+1)*cost), burst+rate*elapsed+slack; got > limit {
				t.Fatalf("%v tokens admitted %.3fs after the start; want at most %.0f (burst plus refill)", got, elapsed, limit)
			}
		}
		t.Logf("%d calls in %v, %d of them waited for a turn", len(admitted), admitted[len(admitted)-1].Sub(start), waited.Load())
	})
}

// Behaviour 2: all-or-nothing across limits.
func TestAllOrNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		t.Run("tpm denial leaves rpm", func(t *testing.T) {
			clock := stopClock(b)
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
			// 9: the TPM denials took no request.
			clock.Level(t, "RPM", snap(t, p).Rate("rpm").Level, 9, 10/60.0)
		})
		t.Run("rpm denial leaves tpm", func(t *testing.T) {
			clock := stopClock(b)
			p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 2, TPM: 100_000}})
			for i := 0; i < 2; i++ {
				if _, err := p.Acquire(ctx, pacer.Request{Tokens: 1000}); err != nil {
					t.Fatalf("Acquire() = %v", err)
				}
			}
			if l, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 1000}); l != nil || err != nil || wait < 20*time.Second {
				t.Fatalf("TryAcquire() = %v, %v, %v; want nil, ~30s, nil", l, wait, err)
			}
			// 98,000: the RPM denial took no tokens.
			clock.Level(t, "TPM", snap(t, p).Rate("tpm").Level, 98_000, 100_000/60.0)
		})
	})
}

// Behaviour 3: settling less refunds at once; settling more is debt.
func TestRefundAndDebt(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		// 6,000 TPM = 100 tokens/s. Each step starts its own clock: a level
		// refilled above the next step's starting point is capped at it.
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 6000}})
		clock := stopClock(b)
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 4000})
		if err != nil {
			t.Fatal(err)
		}
		clock.Level(t, "after reserving 4000: TPM", snap(t, p).Rate("tpm").Level, 2000, 100)
		if err := l.Settle(ctx, 1000); err != nil {
			t.Fatalf("Settle(1000) = %v", err)
		}
		clock.Level(t, "after settling 1000 of 4000: TPM", snap(t, p).Rate("tpm").Level, 5000, 100)
		if err := l.Settle(ctx, 0); err != nil {
			t.Fatalf("second Settle() = %v; want nil (idempotent)", err)
		}
		clock.Level(t, "after a second Settle: TPM", snap(t, p).Rate("tpm").Level, 5000, 100)

		clock = stopClock(b)
		l, err = p.Acquire(ctx, pacer.Request{Tokens: 5000})
		if err != nil {
			t.Fatal(err)
		}
		// The level before this Acquire was between 5,000 and the capacity.
		if err := l.Settle(ctx, 8000); err != nil {
			t.Fatal(err)
		}
		s := snap(t, p)
		if s.Rate("tpm").Level < -3000-levelEps || s.Rate("tpm").Level > -2000+100*clock.Since().Seconds() {
			t.Fatalf("after an overrun of 3000: level %v, want -3000 (up to 1,000 more if the bucket had refilled)", s.Rate("tpm").Level)
		}
		// 100 tokens/s: a 100-token call now waits for the debt plus itself.
		_, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 100})
		want := time.Duration((100 - s.Rate("tpm").Level) / 100 * float64(time.Second))
		if err != nil || wait > want+time.Millisecond || wait < want-clock.Since()-time.Millisecond {
			t.Errorf("TryAcquire(100) in debt of %.0f: wait %v, err %v; want %v", -s.Rate("tpm").Level, wait, err, want)
		}
	})
}

// Behaviour 7: ErrTooLarge at once; ErrWaitTimeout without sleeping the bound.
func TestTooLargeAndWaitTimeout(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		// The bounds are long (10 s, and a 5 s deadline) so that a call that
		// slept its bound out is told from one that did not by a margin
		// that no load closes.
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
		var we *pacer.RefusedError
		if !errors.Is(err, pacer.ErrWaitTimeout) || !errors.As(err, &we) || we.Limit != "tpm" || retryAfter(we) < 25*time.Second {
			t.Errorf("Acquire(500) = %v; want ErrWaitTimeout on tpm of about 30s", err)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = p.Acquire(cctx, pacer.Request{Tokens: 500})
		if !errors.Is(err, pacer.ErrWaitTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire(500) with a 5s deadline = %v; want ErrWaitTimeout and DeadlineExceeded", err)
		}
		if cctx.Err() != nil {
			t.Errorf("Acquire(500) returned at its deadline, %v after the test began; the script can tell at once that the bound is too short", time.Since(start))
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
	if s := snap(t, p); !s.Time.Equal(t0.Add(30*time.Second)) || s.Rate("tpm").Level != 0 {
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
// still, so no refill between the calls can hide a shortfall. On a real
// Redis the clock runs: the call beyond the capacity must be denied only
// while too little time has passed to refill it (0.67 s for TPM 90,000,
// hours for RPD 11); on a loaded machine the 90 calls may take longer.
func TestFullBucketAdmitsExactlyItsCapacity(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		for i, tc := range []struct {
			limits pacer.Limits
			tokens int64
			calls  int
			refill time.Duration // until the bucket holds one more call
		}{
			{pacer.Limits{RPM: 7}, 0, 7, time.Minute / 7},
			{pacer.Limits{RPM: 13, TPM: 91}, 7, 13, time.Minute / 13},
			{pacer.Limits{TPM: 90_000}, 1000, 90, time.Minute / 90},
			{pacer.Limits{RPD: 11}, 0, 11, 24 * time.Hour / 11},
		} {
			clock := stopClock(b)
			p := newPacer(t, b, pacer.Config{Name: fmt.Sprintf("%s-%d", redistest.Name(t), i), Limits: tc.limits})
			for j := 0; j < tc.calls; j++ {
				if l, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: tc.tokens}); l == nil || err != nil {
					t.Fatalf("%v: call %d of %d = %v, %v, %v; want admitted", tc.limits, j+1, tc.calls, l, wait, err)
				}
			}
			l, _, err := tryAcquire(p, ctx, pacer.Request{Tokens: max(tc.tokens, 1)})
			switch took := clock.Since(); {
			case err != nil:
				t.Errorf("%v: a call beyond the capacity = %v", tc.limits, err)
			case l != nil && took < tc.refill:
				t.Errorf("%v: a call beyond the capacity was admitted %v after the first; want denied (it refills in %v)", tc.limits, took, tc.refill)
			case l != nil:
				t.Logf("%v: the calls took %v, longer than the %v the next call takes to refill; not checked", tc.limits, took, tc.refill)
			}
		}
	})
}
