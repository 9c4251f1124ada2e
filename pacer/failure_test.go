package pacer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A Redis that stops answering hangs no caller past its deadline, and an
// admission whose answer arrives after the caller left is given back: no
// lease is lost. "Not past its deadline" is checked against what the call
// would take without one (the proxy's 1.5 s delay; a hang bounded only by
// the client's 10 s read timeout), not against how fast the machine is.
func TestRedisHangsLosesNoLease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		if b.Kind == "cluster" {
			t.Skip("the proxy fronts one node; the standalone lanes cover it")
		}
		ctx := context.Background()
		px := redistest.NewProxy(t, b.Addrs[0])
		slow := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
		defer slow.Close()
		name := redistest.Name(t)
		cfg := pacer.Config{Name: name, Limits: pacer.Limits{TPD: 10_000, Concurrency: 3}}
		p, err := pacer.New(slow, cfg)
		if err != nil {
			t.Fatal(err)
		}
		direct := newPacer(t, b, cfg)

		const delay = 1500 * time.Millisecond
		px.Delay(delay)
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		l, err := p.Acquire(cctx, pacer.Request{Tokens: 1000})
		if d := time.Since(start); d >= delay {
			t.Errorf("Acquire returned after %v, when Redis answered; its deadline was 100ms", d)
		}
		if l != nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire through a slow Redis = %v, %v; want DeadlineExceeded", l, err)
		}
		// The script ran: the admission arrives late and is cancelled.
		deadline := time.Now().Add(20 * time.Second)
		for {
			s := snap(t, direct)
			if s.InFlight == 0 && near(s.Rate("tpd").Level, 10_000, 1) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the late admission was not given back: in flight %d, TPD %v", s.InFlight, s.Rate("tpd").Level)
			}
			time.Sleep(50 * time.Millisecond)
		}

		// Hung outright: Settle and Pause are bounded by their contexts too,
		// and a lease whose Settle failed can be settled again.
		px.Delay(0)
		l, err = p.Acquire(ctx, pacer.Request{Tokens: 1000})
		if err != nil {
			t.Fatal(err)
		}
		px.Hang(true)
		cctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if err := l.Settle(cctx, 100); err == nil {
			t.Fatal("Settle through a hung Redis = nil; want an error")
		}
		if err := p.Pause(cctx, time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Pause through a hung Redis = %v; want DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Settle and Pause returned after %v; their deadline was 100ms (only the 10s read timeout would end them otherwise)", d)
		}
		px.Hang(false)
		if err := l.Settle(ctx, 100); err != nil {
			t.Errorf("Settle again once Redis answers = %v; want nil (the lease was kept)", err)
		}
		if s := snap(t, direct); s.InFlight != 0 || !near(s.Rate("tpd").Level, 9_900, 2) {
			t.Errorf("after settling: in flight %d, TPD %v; want 0 and 9900 (settled exactly once)", s.InFlight, s.Rate("tpd").Level)
		}
	})
}

// A Redis that is gone gives errors, never a panic or a hang. The client
// neither retries commands nor redials, so each call meets the closed
// server at once: every error must come from Redis being gone, with the
// call's own deadline still far off.
func TestRedisGone(t *testing.T) {
	b := redistest.Mini(t)
	rdb := redis.NewClient(&redis.Options{Addr: b.Addrs[0], MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 10}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Acquire(context.Background(), pacer.Request{})
	if err != nil {
		t.Fatal(err)
	}
	b.Mini.Close()
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error { _, err := p.Acquire(ctx, pacer.Request{}); return err }},
		{"TryAcquire", func(ctx context.Context) error { _, _, err := tryAcquire(p, ctx, pacer.Request{}); return err }},
		{"Settle", func(ctx context.Context) error { return l.Settle(ctx, 0) }},
		{"Snapshot", func(ctx context.Context) error { _, err := p.Snapshot(ctx); return err }},
		{"Pause", func(ctx context.Context) error { return p.Pause(ctx, time.Second) }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := tc.call(ctx)
		if err == nil || ctx.Err() != nil {
			t.Errorf("%s with Redis gone = %v (deadline reached: %v); want Redis's error before the deadline", tc.name, err, ctx.Err())
		}
		cancel()
	}
}

// Expired leases are removed a bounded number at a time, and all of them in
// the end: memory follows the leases in flight.
func TestMassExpiryIsReapedBounded(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // round trips, not CPU: the lanes run side by side
		ctx := context.Background()
		rdb := b.Client(t)
		// About one admission in 16 reaps: those on a millisecond divisible
		// by 16 (lua/acquire.lua). miniredis's clock is stepped 16 ms a
		// call from such a millisecond, so that each call reaps and 30
		// calls clear 3,000 leases; a real Redis's clock lands anywhere, so
		// it gets 1,000 leases (10 reaps, still ten bounds to hold), 16
		// times as many calls as reaps and four times that for slack (40
		// reaps expected in its 640 calls).
		now, step := time.Now(), time.Duration(0)
		expired, calls := 1000, 16*10*4
		if b.Mini != nil {
			now, step = time.UnixMilli(1767225600000), 16*time.Millisecond
			b.Mini.SetTime(now)
			expired, calls = 3000, 40
		}
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 1_000_000, Concurrency: 100_000}})
		past := float64(now.Add(-time.Hour).UnixMilli())
		zs := make([]redis.Z, expired)
		for i := range zs {
			zs[i] = redis.Z{Score: past, Member: i}
		}
		if err := rdb.ZAdd(ctx, pacer.Keys(p)[1], zs...).Err(); err != nil {
			t.Fatal(err)
		}
		prev := int64(expired)
		// Until only the sentinel is left: later calls have nothing to reap.
		for i := 0; i < calls && prev > 1; i++ {
			if b.Mini != nil {
				now = now.Add(step)
				b.Mini.SetTime(now)
			}
			l, _, err := tryAcquire(p, ctx, pacer.Request{})
			if err != nil || l == nil {
				t.Fatalf("TryAcquire %d = %v, %v; expired leases must not hold slots", i, l, err)
			}
			if err := l.Settle(ctx, 0); err != nil {
				t.Fatal(err)
			}
			n, _ := rdb.ZCard(ctx, pacer.Keys(p)[1]).Result()
			if prev-n > 100 {
				t.Fatalf("one call removed %d expired leases; want at most 100", prev-n)
			}
			prev = n
		}
		// Two members stay: the sentinels, one that keeps the set from being
		// deleted and recreated without a TTL and one that keeps it a
		// skiplist (see cover in lua/prelude.lua).
		if prev != 2 {
			t.Errorf("%d members left after %d admissions; want 2, the sentinels (all expired leases removed)", prev, calls)
		}
	})
}
