package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// Behaviour 5: a pause set by one Pacer holds back callers of another.
// What each reads of the pause is bounded by the time since it was set,
// not by how fast the machine is: the pause begins on Redis's clock after
// set, so it ends at least 400 ms after set, and what remains of it at any
// moment is at least 400 ms less the time since set.
func TestPauseIsShared(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const pause = 400 * time.Millisecond
		ps := newPacers(t, b, 2, pacer.Config{Limits: pacer.Limits{RPM: 1000}})
		set := time.Now()
		if err := ps[0].Pause(ctx, pause); err != nil {
			t.Fatal(err)
		}
		if err := ps[0].Pause(ctx, 50*time.Millisecond); err != nil { // never shortens
			t.Fatal(err)
		}
		if s := snap(t, ps[1]); s.Paused > pause || s.Paused < pause-time.Since(set)-time.Millisecond {
			t.Errorf("Snapshot().Paused = %v %v after a 400ms pause was set; want what remains of it", s.Paused, time.Since(set))
		}
		// On a loaded machine the pause may be over by now: then, and
		// only then, TryAcquire may admit.
		l, wait, err := tryAcquire(ps[1], ctx, pacer.Request{})
		over := time.Since(set) >= pause+time.Millisecond
		if err != nil || l != nil && !over || l == nil && (wait > pause || wait < pause-time.Since(set)-time.Millisecond) {
			t.Errorf("TryAcquire %v after a 400ms pause was set = %v, %v, %v; want nil, what remains of the pause, nil", time.Since(set), l, wait, err)
		}
		if _, err := ps[1].Acquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(set); d < pause-time.Millisecond {
			t.Errorf("Acquire during the pause returned %v after it was set; want after the 400ms pause", d)
		}
		if _, err := ps[1].Acquire(ctx, pacer.Request{MaxWait: time.Millisecond}); err != nil {
			t.Errorf("Acquire after the pause = %v; want admitted at once", err)
		}
	})
}

// Behaviour 6: batch is held back by the floor while interactive gets through.
func TestBatchFloor(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPD: 1000, Concurrency: 5}})
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 600, Priority: pacer.Batch}); err != nil {
			t.Fatal(err)
		}
		// 400 left; batch may not go below the floor of 200.
		if l, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 300, Priority: pacer.Batch}); l != nil || err != nil || wait <= 0 {
			t.Errorf("batch TryAcquire(300) = %v, %v, %v; want held back", l, wait, err)
		}
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 300, Priority: pacer.Batch, MaxWait: 100 * time.Millisecond}); !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Errorf("batch Acquire(300) = %v; want ErrWaitTimeout", err)
		}
		if l, _, err := tryAcquire(p, ctx, pacer.Request{Tokens: 300}); l == nil || err != nil {
			t.Errorf("interactive TryAcquire(300) = %v, %v; want a lease", l, err)
		}
		// 900 tokens plus the 200 floor never fit a 1000 bucket for batch.
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 900, Priority: pacer.Batch}); !errors.Is(err, pacer.ErrTooLarge) {
			t.Errorf("batch Acquire(900) of 1000 = %v; want ErrTooLarge (the floor makes it never fit)", err)
		}
		// Concurrency: 5 slots, batch may hold 4.
		p = newPacer(t, b, pacer.Config{Limits: pacer.Limits{Concurrency: 5}})
		for i := 0; i < 4; i++ {
			if l, _, err := tryAcquire(p, ctx, pacer.Request{Priority: pacer.Batch}); l == nil || err != nil {
				t.Fatalf("batch slot %d = %v, %v", i+1, l, err)
			}
		}
		if l, _, _ := tryAcquire(p, ctx, pacer.Request{Priority: pacer.Batch}); l != nil {
			t.Errorf("batch took the last slot")
		}
		if l, _, err := tryAcquire(p, ctx, pacer.Request{}); l == nil || err != nil {
			t.Errorf("interactive could not take the last slot: %v, %v", l, err)
		}
	})
}

// Behaviour 10: a large request (half the capacity) competing with a steady
// stream of small ones is not starved by small requests that arrive after
// it: first come, first served. The test compares turns on Redis's clock
// (Lease.Start), not when goroutines happened to wake, so load cannot
// blur it: a small call that asked after the large call's reservation
// came back reached Redis after it, and must have a later turn.
func TestFairnessLargeRequestNotStarved(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		// 600,000 TPM = 10,000 tokens/s; burst 4,000 so the test is short.
		var replied atomic.Int64 // when the large call's reservation came back
		var largeWait atomic.Int64
		saturated := make(chan struct{})
		var once sync.Once
		cfg := pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 600_000, Window: time.Minute, Burst: 4000}}, MaxWait: time.Minute,
			Observe: func(e pacer.Event) {
				switch {
				case e.Tokens == 2000 && (e.Kind == pacer.Waiting || e.Kind == pacer.Admitted):
					if replied.CompareAndSwap(0, time.Now().UnixNano()) && e.Kind == pacer.Waiting {
						largeWait.Store(int64(e.Wait))
					}
				case e.Tokens == 100 && e.Kind == pacer.Waiting:
					// A small call is waiting for its turn.
					once.Do(func() { close(saturated) })
				}
			}}
		ps := newPacers(t, b, 4, cfg)
		// Empty the bucket first, so that every small call waits for a
		// turn however slowly the machine runs them: a stream that must
		// drain 10,000 tokens a second by itself does not on a loaded one.
		if l, _, err := tryAcquire(ps[0], context.Background(), pacer.Request{Tokens: 4000}); l == nil || err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type span struct {
			asked time.Time // on this machine's clock, before the call
			turn  time.Time // on Redis's clock
		}
		var mu sync.Mutex
		var spans []span
		var wg sync.WaitGroup
		const workers = 16
		for i := 0; i < workers; i++ {
			wg.Add(1)
			go func(p *pacer.Pacer) {
				defer wg.Done()
				for ctx.Err() == nil {
					asked := time.Now()
					l, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
					if err != nil {
						return
					}
					mu.Lock()
					spans = append(spans, span{asked, l.Info().Start})
					mu.Unlock()
					_ = l.Settle(context.Background(), 100)
				}
			}(ps[i%len(ps)])
		}
		select {
		case <-saturated:
		case <-time.After(30 * time.Second):
			t.Fatal("no small call waited for its turn within 30s of emptying the bucket")
		}
		l, err := ps[0].Acquire(context.Background(), pacer.Request{Tokens: 2000})
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("large Acquire = %v", err)
		}
		// Let some small calls that asked after the large one through, so
		// that the check below has calls to judge.
		reserved := time.Unix(0, replied.Load())
		askedAfter := func() int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, s := range spans {
				if s.asked.After(reserved) {
					n++
				}
			}
			return n
		}
		for deadline := time.Now().Add(30 * time.Second); askedAfter() < workers && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		_ = l.Settle(context.Background(), 2000)
		// Fair wait: its own 2,000 tokens plus one queued call per small
		// worker ahead of it, at 10,000 tokens/s. The turn the script gave
		// it is a figure on Redis's clock, whatever the load, and must be
		// within twice that: the queue ahead of it was bounded when it
		// asked, whatever came later.
		fair := time.Duration(float64(2000+workers*100) / 10_000 * float64(time.Second))
		if w := time.Duration(largeWait.Load()); w > 2*fair {
			t.Errorf("large request was given a turn %v away; want within twice its fair wait %v", w, fair)
		}
		overtakers, after := 0, 0
		for _, s := range spans {
			if s.asked.After(reserved) {
				after++
				if s.turn.Before(l.Info().Start) {
					overtakers++
				}
			}
		}
		if overtakers > 0 || after < workers {
			t.Errorf("%d of %d small calls that asked after the large one had an earlier turn; want none of at least %d", overtakers, after, workers)
		}
		t.Logf("%d small calls, %d asked after the large one; its turn was %v away", len(spans), after, time.Duration(largeWait.Load()))
	})
}

// Behaviour 8: bad input gets a clear error, no panic.
func TestBadInput(t *testing.T) {
	b := redistest.Mini(t)
	rdb := b.Client(t)
	ok := pacer.Limits{TPM: 1000}
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		cfg  pacer.Config
		want string
	}{
		{"nil client", nil, pacer.Config{Name: "a", Limits: ok}, "client is nil"},
		{"empty name", rdb, pacer.Config{Limits: ok}, "Name is empty"},
		{"brace in name", rdb, pacer.Config{Name: "a}{b", Limits: ok}, "'{' or '}'"},
		{"space in name", rdb, pacer.Config{Name: "a b", Limits: ok}, "not allowed"},
		{"newline in name", rdb, pacer.Config{Name: "a\nb", Limits: ok}, "not allowed"},
		{"long name", rdb, pacer.Config{Name: strings.Repeat("x", 201), Limits: ok}, "at most 200"},
		{"brace in prefix", rdb, pacer.Config{Name: "a", KeyPrefix: "{x", Limits: ok}, "KeyPrefix"},
		{"no limits", rdb, pacer.Config{Name: "a"}, "no limit is set"},
		{"negative limit", rdb, pacer.Config{Name: "a", Limits: pacer.Limits{TPM: -5}}, "Config.TPM = -5"},
		{"absurd limit", rdb, pacer.Config{Name: "a", Limits: pacer.Limits{TPM: 1 << 62}}, "must be between"},
		{"burst above limit", rdb, pacer.Config{Name: "a", Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 1000, Window: time.Minute, Burst: 2000}}}, "Rates[0].Burst = 2000"},
		{"rate also in Limits", rdb, pacer.Config{Name: "a", Limits: ok, Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 1000, Window: time.Minute, Burst: 20}}}, "state it in one place"},
		{"headroom 1", rdb, pacer.Config{Name: "a", Limits: ok, Headroom: 1}, "Headroom"},
		{"batch floor 1", rdb, pacer.Config{Name: "a", Limits: ok, BatchFloor: 1}, "BatchFloor"},
		{"negative ttl", rdb, pacer.Config{Name: "a", Limits: ok, LeaseTTL: -time.Second}, "LeaseTTL"},
		{"negative max wait", rdb, pacer.Config{Name: "a", Limits: ok, MaxWait: -time.Second}, "MaxWait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pacer.New(tc.rdb, tc.cfg)
			if p != nil || !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() = %v, %v; want ErrInvalid mentioning %q", p, err, tc.want)
			}
		})
	}

	ctx := context.Background()
	p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1000, Concurrency: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    pacer.Request
		want error
	}{
		{"negative tokens", pacer.Request{Tokens: -1}, pacer.ErrInvalid},
		{"absurd tokens", pacer.Request{Tokens: 1 << 60}, pacer.ErrInvalid},
		{"unknown priority", pacer.Request{Priority: 7}, pacer.ErrInvalid},
		{"negative max wait", pacer.Request{MaxWait: -1}, pacer.ErrInvalid},
		{"above capacity", pacer.Request{Tokens: 1001}, pacer.ErrTooLarge},
		{"far above capacity", pacer.Request{Tokens: 1 << 50}, pacer.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if l, err := p.Acquire(ctx, tc.r); l != nil || !errors.Is(err, tc.want) {
				t.Errorf("Acquire(%+v) = %v, %v; want %v", tc.r, l, err, tc.want)
			}
			if l, _, err := tryAcquire(p, ctx, tc.r); l != nil || !errors.Is(err, tc.want) {
				t.Errorf("TryAcquire(%+v) = %v, %v; want %v", tc.r, l, err, tc.want)
			}
		})
	}
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, -1); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("Settle(-1) = %v; want pacer.ErrInvalid", err)
	}
	if err := l.Settle(ctx, 1<<60); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("Settle(1<<60) = %v; want pacer.ErrInvalid", err)
	}
	for _, d := range []time.Duration{0, -time.Second, 30 * 24 * time.Hour} {
		if err := p.Pause(ctx, d); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("Pause(%v) = %v; want ErrInvalid", d, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Acquire(cctx, pacer.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a cancelled ctx = %v; want context.Canceled", err)
	}
}

// Budgets with different names are independent, and on a cluster their keys
// spread over the slots while each budget's keys share one.
func TestNamesAreIndependentAndShareASlot(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client(t)
		base := redistest.Name(t)
		slots := map[int64]bool{}
		for i, suffix := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			p, err := pacer.New(rdb, pacer.Config{Name: base + ":" + suffix, Limits: pacer.Limits{RPD: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Acquire(ctx, pacer.Request{}); err != nil {
				t.Fatalf("budget %d: first Acquire = %v; want admitted (budgets are independent)", i, err)
			}
			if l, _, _ := tryAcquire(p, ctx, pacer.Request{}); l != nil {
				t.Fatalf("budget %d: second call admitted past RPD 1", i)
			}
			if b.Kind == "cluster" {
				keys := pacer.Keys(p)
				s0, err := rdb.ClusterKeySlot(ctx, keys[0]).Result()
				if err != nil {
					t.Fatal(err)
				}
				s1, _ := rdb.ClusterKeySlot(ctx, keys[1]).Result()
				if s0 != s1 {
					t.Fatalf("keys %v are in slots %d and %d; want one", keys, s0, s1)
				}
				slots[s0] = true
			}
		}
		if b.Kind == "cluster" && len(slots) < 4 {
			t.Errorf("8 budgets used only %d slots; want them spread", len(slots))
		}
	})
}

// Idle budgets expire from Redis by themselves. The clock stands still
// between the acquire and the settle, so the TTL is exact.
func TestIdleBudgetExpires(t *testing.T) {
	b := redistest.Mini(t)
	stopClock(b)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 60, TPM: 6000}, LeaseTTL: time.Second})
	l, _ := p.Acquire(ctx, pacer.Request{Tokens: 600})
	_ = l.Settle(ctx, 600)
	keys := pacer.Keys(p)
	ttl := b.Mini.TTL(keys[0])
	// 600 tokens at 100/s refill in 6s; 1 request at 1/s in 1s.
	if ttl < 6*time.Second || ttl > 10*time.Second {
		t.Errorf("state TTL = %v; want 6s to 10s (full again in 6s, plus some slack)", ttl)
	}
	b.Mini.FastForward(10 * time.Second)
	for _, k := range keys {
		if b.Mini.Exists(k) {
			t.Errorf("key %s still exists after the budget went idle", k)
		}
	}
}

// Headroom lowers bursts along with limits.
func TestHeadroomScalesBurst(t *testing.T) {
	b := redistest.Mini(t)
	p := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 10_000, Window: time.Minute, Burst: 10_000}}, Headroom: 0.1})
	s := snap(t, p)
	if s.Rate("tpm").Limit != 9000 || s.Rate("tpm").Capacity != 9000 {
		t.Errorf("TPM limit %d, capacity %d; want 9000 and 9000", s.Rate("tpm").Limit, s.Rate("tpm").Capacity)
	}
}

// A pause set by this process also holds back its calls that had already
// reserved a later turn, even one set while the call had its reply but
// had not yet begun to wait (a goroutine descheduled on a loaded machine):
// the observer holds the call there, on its Waiting event, until the
// pause is set. The call then returns no earlier than the pause's end,
// which is at least the pause's length after set.
func TestPauseHoldsReservedTurns(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const pause = 1500 * time.Millisecond
		reserved, paused := make(chan struct{}, 1), make(chan struct{})
		// 6,000 TPM = 100 tokens/s: the second call's turn is 1 s away.
		p := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 6000, Window: time.Minute, Burst: 100}},
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Waiting && e.Tokens == 100 {
					select {
					case reserved <- struct{}{}:
						<-paused
					default:
					}
				}
			}})
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
			got <- time.Now()
			if err != nil {
				t.Errorf("Acquire() = %v", err)
				return
			}
			_ = l.Settle(ctx, 100)
		}()
		select {
		case <-reserved:
		case <-time.After(30 * time.Second):
			t.Fatal("no Waiting event in 30 s: the second call never waited for its turn, 1 s away")
		}
		set := time.Now()
		err := p.Pause(ctx, pause)
		close(paused)
		if err != nil {
			t.Fatal(err)
		}
		if d := (<-got).Sub(set); d < pause {
			t.Errorf("the reserved call went %v after a %v pause was set; want after the pause", d, pause)
		}
	})
}

// A pause longer than the lease TTL must not start a reserved call on an
// expired lease: its settle would find nothing, and its give-back be lost
// (or, under a concurrency limit, its slot taken by another). The lease is
// kept alive through the pause. TTL 1.2 s, turn 1 s away, pause 3 s:
// without that, the lease expires about 0.8 s before the call starts. The
// keep-alive renews at two thirds of the way to each expiry, so the call
// has at least a third of the TTL (400 ms) to settle once the pause ends:
// room for a loaded machine under -race, where 100 ms was not.
func TestPauseKeepsAReservedLeaseAlive(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // each lane sleeps out its 3 s pause, side by side
		ctx := context.Background()
		const pause = 3 * time.Second
		reserved, paused := make(chan struct{}, 1), make(chan struct{})
		p := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 6000, Window: time.Minute, Burst: 100}},
			LeaseTTL: 1200 * time.Millisecond,
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Waiting && e.Tokens == 100 {
					select {
					case reserved <- struct{}{}:
						<-paused // as in TestPauseHoldsReservedTurns
					default:
					}
				}
			}})
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
			if err != nil {
				got <- fmt.Errorf("Acquire() = %w", err)
				return
			}
			if err := l.Settle(ctx, 50); err != nil {
				got <- fmt.Errorf("Settle() right after the pause = %w; want the lease still held", err)
				return
			}
			got <- nil
		}()
		select {
		case <-reserved:
		case <-time.After(30 * time.Second):
			t.Fatal("no Waiting event in 30 s: the second call never waited for its turn, 1 s away")
		}
		err := p.Pause(ctx, pause)
		close(paused)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Error(err)
		}
	})
}

// A pause costs the calls that had reserved a later turn about the pause,
// not their turns: each keeps its turn and goes no earlier than the
// pause's end. Six calls reserve turns 300 ms apart (20,000 tokens a
// minute, 100 each); a 50 ms pause comes. Each call goes by its turn (or
// the pause's end) plus a second's slack for a loaded machine. Before,
// each gave its turn back when it came and queued again behind the
// others, so the first went after the last's turn, 1.8 s late.
func TestPauseKeepsLaterTurns(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const n = 6
		reserved := make(chan time.Duration, n)
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 20_000, Window: time.Minute, Burst: 100}},
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Waiting {
					select {
					case reserved <- e.Wait:
					default:
					}
				}
			}})
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		type done struct {
			i    int
			late time.Duration // after its turn, or after the pause's end
		}
		got := make(chan done, n)
		var pauseEnd atomic.Int64
		for i := range n {
			turn := make(chan time.Time, 1)
			admitted := make(chan struct{})
			go func() {
				l, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
				at := time.Now()
				close(admitted)
				if err != nil {
					t.Errorf("call %d: Acquire() = %v", i, err)
					got <- done{i, 0}
					return
				}
				_ = l.Settle(ctx, 100)
				from := max((<-turn).UnixNano(), pauseEnd.Load())
				got <- done{i, at.Sub(time.Unix(0, from))}
			}()
			select {
			case wait := <-reserved:
				turn <- time.Now().Add(wait)
			case <-admitted:
				// A stalled machine let the call's turn pass before it
				// asked: it went at once, on time. A Waiting event it
				// sent first is its own; its turn is past either way.
				select {
				case <-reserved:
				default:
				}
				turn <- time.Now()
			}
		}
		if err := p.Pause(ctx, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		// No earlier than the pause's end: a stall in Pause's round trip
		// is not the calls' lateness.
		pauseEnd.Store(time.Now().Add(50 * time.Millisecond).UnixNano())
		for range n {
			d := <-got
			if d.late > time.Second {
				t.Errorf("call %d went %v after its turn (or the pause's end); want about on time, the pause its only cost", d.i, d.late)
			}
		}
	})
}

// Throttled (a provider's 429) pauses everyone and lowers the bucket the
// provider named, so the pause's refill is not banked on top of a budget
// that was already ahead of the provider.
func TestThrottledLowersTheTrippedBucket(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b.Mini.SetTime(t0)
	ps := newPacers(t, b, 2, pacer.Config{Limits: pacer.Limits{RPM: 600, TPM: 6000}}) // 10 req/s, 100 tokens/s
	if err := pacer.Throttle(ctx, ps[0], 2*time.Second, classify.LimitTokens, pacer.Request{Tokens: 500}); err != nil {
		t.Fatal(err)
	}
	s := snap(t, ps[1])
	// tpm: at most 500 - 2 s × 100/s = 300 now, 500 when the pause ends.
	if s.Rate("tpm").Level != 300 || s.Rate("rpm").Level != 600 || s.Paused != 2*time.Second {
		t.Fatalf("after Throttled: TPM %v, RPM %v, paused %v; want 300, 600 (untouched), 2s", s.Rate("tpm").Level, s.Rate("rpm").Level, s.Paused)
	}
	b.Mini.SetTime(t0.Add(2 * time.Second))
	if l, _, err := tryAcquire(ps[1], ctx, pacer.Request{Tokens: 500}); l == nil || err != nil {
		t.Fatalf("the throttled call's share once the pause ends = %v, %v; want admitted", l, err)
	}
	if l, _, _ := tryAcquire(ps[1], ctx, pacer.Request{Tokens: 10}); l != nil {
		t.Error("more than the throttled call's share was admitted after the pause: the refill was banked")
	}
	// A bucket lower than the target is left alone, and LimitUnknown lowers
	// both request and token buckets.
	if err := pacer.Throttle(ctx, ps[0], time.Second, classify.LimitUnknown, pacer.Request{Tokens: 50}); err != nil {
		t.Fatal(err)
	}
	s = snap(t, ps[1])
	if s.Rate("tpm").Level != -50 || s.Rate("rpm").Level != -9 {
		t.Errorf("after an unknown-limit Throttled: TPM %v, RPM %v; want -50 and -9", s.Rate("tpm").Level, s.Rate("rpm").Level)
	}
	if err := pacer.Throttle(ctx, ps[0], time.Second, classify.LimitTokens, pacer.Request{Tokens: -1}); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("Throttled with negative tokens = %v; want ErrInvalid", err)
	}
}

// The same on real Redis and the cluster, where the clock runs.
func TestThrottledOnEveryBackend(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		clock := stopClock(b)
		ps := newPacers(t, b, 2, pacer.Config{Limits: pacer.Limits{RPM: 600, TPM: 6000}})
		if err := pacer.Throttle(ctx, ps[0], 2*time.Second, classify.LimitTokens, pacer.Request{Tokens: 500}); err != nil {
			t.Fatal(err)
		}
		s := snap(t, ps[1])
		clock.Level(t, "after Throttled: TPM", s.Rate("tpm").Level, 300, 100)
		if s.Rate("rpm").Level != 600 || s.Paused > 2*time.Second || s.Paused < 2*time.Second-clock.Since()-time.Millisecond {
			t.Errorf("after Throttled: RPM %v, paused %v; want 600 (untouched) and what remains of 2s", s.Rate("rpm").Level, s.Paused)
		}
		if l, wait, _ := tryAcquire(ps[1], ctx, pacer.Request{Tokens: 10}); l != nil || wait < 2*time.Second-clock.Since()-time.Millisecond {
			t.Errorf("TryAcquire during the pause = %v, %v; want held back for what remains of 2s", l, wait)
		}
	})
}

// Every key of a budget carries a TTL after every script, whatever the order
// of calls (a pause before any lease, a lease set emptied by settles, a debt
// during a pause), and the state hash outlives a pause in force: an idle
// budget must vanish by itself, and a key without a TTL never would. Without
// the lease set's sentinel member this fails: the set emptied by a settle is
// deleted, and the next acquire recreates it without a TTL.
func TestKeysAlwaysCarryATTL(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client(t)
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 600, TPM: 60_000, Concurrency: 4}, LeaseTTL: 2 * time.Second})
		// check reads every key's TTL. The state hash must outlive the
		// pause set at set for d: what remains of it is at least d less the
		// time since set (d = 0: no pause).
		check := func(step string, set time.Time, d time.Duration) {
			t.Helper()
			for i, k := range pacer.Keys(p) {
				ttl, err := rdb.PTTL(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				pause := d - time.Since(set) - time.Millisecond
				switch {
				case ttl == -1:
					t.Errorf("after %s: key %s has no TTL", step, k)
				case ttl >= 0 && i == 0 && d > 0 && ttl < pause:
					t.Errorf("after %s: state TTL %v is shorter than what remains of the pause in force, %v", step, ttl, pause)
				}
			}
		}
		set := time.Now()
		if err := p.Pause(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		check("a pause on a new budget", set, 5*time.Second)
		// Past the pause in Redis's eyes would take 5 s; start over on a
		// fresh budget instead, so the run stays short.
		p = newPacer(t, b, pacer.Config{Name: redistest.Name(t) + "-2", Limits: pacer.Limits{RPM: 600, TPM: 60_000, Concurrency: 4}, LeaseTTL: 2 * time.Second})
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		check("an acquire", set, 0)
		if err := l.Settle(ctx, 50); err != nil {
			t.Fatal(err)
		}
		check("a settle that empties the lease set", set, 0)
		l, err = p.Acquire(ctx, pacer.Request{Tokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		check("an acquire after the set was emptied", set, 0)
		set = time.Now()
		if err := p.Pause(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := pacer.Renew(ctx, l); err != nil {
			t.Fatal(err)
		}
		check("a keepalive during a long pause", set, 30*time.Second)
		if err := l.Settle(ctx, 5000); err != nil {
			t.Fatal(err)
		}
		check("a debt during a long pause", set, 30*time.Second)
		set = time.Now()
		if err := pacer.Throttle(ctx, p, 31*time.Second, classify.LimitTokens, pacer.Request{Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		check("a throttle", set, 31*time.Second)
	})
}
