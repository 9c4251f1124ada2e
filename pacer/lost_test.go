package pacer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// loseState deletes a budget's keys, as a Redis restarted without
// persistence, a failover that lost the last writes, or an eviction would.
func loseState(t *testing.T, rdb redis.UniversalClient, p *pacer.Pacer) {
	t.Helper()
	for _, k := range pacer.Keys(p)[:3] {
		if err := rdb.Del(context.Background(), k).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A budget whose state Redis lost while it was in use restarts empty, not
// full: the provider still counts what was used. The process that finds
// the loss reports it (a Warning with ErrStateLost); the budget then refills at its rate. A
// process that never saw the state starts it full, as a new budget.
func TestStateLostRestartsEmpty(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		c := newClock(b)
		rdb := b.Client(t)
		var ev [2]kinds
		// 20 a minute: restarted empty, a call refills in 3 s, longer than
		// a loaded machine stalls between two steps on a real Redis.
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 20, TPM: 60_000}}
		ps := make([]*pacer.Pacer, 2)
		for i := range ps {
			cfg.Observe = ev[i].observe
			ps[i] = newPacer(t, b, cfg)
		}
		for i := range 3 {
			l, err := ps[i%2].TryAcquire(ctx, pacer.Request{Tokens: 100})
			if err != nil {
				t.Fatalf("call %d on a new budget = %v; want admitted", i, err)
			}
			_ = l.Settle(ctx, 100)
		}
		loseState(t, rdb, ps[0])
		_, err := ps[1].TryAcquire(ctx, pacer.Request{Tokens: 100})
		if !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Fatalf("TryAcquire after the state was lost = %v; want ErrWaitTimeout: the buckets restart empty", err)
		}
		if n := ev[1].lost(); n != 1 {
			t.Errorf("%d state-lost Warnings from the process that found the loss; want 1", n)
		}
		if _, err := ps[0].TryAcquire(ctx, pacer.Request{Tokens: 100}); !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Errorf("the other process after the loss = %v; want ErrWaitTimeout", err)
		}
		if n := ev[0].lost(); n != 0 {
			t.Errorf("%d state-lost Warnings from the process that found the budget restarted; want 0", n)
		}
		if s := snap(t, ps[0]); s.Rate("rpm").Level > 1 {
			t.Errorf("RPM level %.2f after the loss; want about 0", s.Rate("rpm").Level)
		}
		// It refills at its rate: a request in 3 s.
		c.advance(3100 * time.Millisecond)
		l, err := ps[0].TryAcquire(ctx, pacer.Request{Tokens: 100})
		if err != nil {
			t.Fatalf("TryAcquire a refill later = %v; want admitted", err)
		}
		_ = l.Settle(ctx, 100)

		// A process that never saw the state starts it full.
		loseState(t, rdb, ps[0])
		var fresh kinds
		cfg.Observe = fresh.observe
		p3 := newPacer(t, b, cfg)
		for i := range 5 {
			l, err := p3.TryAcquire(ctx, pacer.Request{Tokens: 100})
			if err != nil {
				t.Fatalf("call %d of a new process on a budget it never saw = %v; want admitted (full)", i, err)
			}
			_ = l.Settle(ctx, 100)
		}
		if n := fresh.lost(); n != 0 {
			t.Errorf("%d state-lost Warnings from a process that never saw the state; want 0", n)
		}
	})
}

// A call that gives up while its acquire is in flight still reports the
// loss its late reply found: that call restarted the budget's buckets,
// and no other call finds the state lost again. The test holds the
// acquire in Redis (a hook on miniredis's connection) until the caller
// has given up.
func TestStateLostFoundByALateReplyWarns(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	var ev kinds
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 60}, Observe: ev.observe})
	l, err := p.Acquire(ctx, pacer.Request{})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Settle(ctx, 0)
	loseState(t, b.Client(t), p)
	var held atomic.Bool
	release := make(chan struct{})
	b.Mini.Server().SetPreHook(func(_ *server.Peer, cmd string, _ ...string) bool {
		if (cmd == "EVALSHA" || cmd == "EVAL" || cmd == "FCALL") && held.CompareAndSwap(false, true) {
			<-release
		}
		return false
	})
	defer b.Mini.Server().SetPreHook(nil)
	gave := make(chan error, 1)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := p.Acquire(cctx, pacer.Request{})
		gave <- err
	}()
	waitFor(t, "the acquire never reached Redis", held.Load)
	cancel()
	if err := <-gave; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire, its ctx canceled while Redis held it = %v; want context.Canceled", err)
	}
	close(release)
	waitFor(t, "no state-lost Warning from the call's late reply", func() bool { return ev.lost() == 1 })
}

// The storm after a loss: processes calling a provider flat out through a
// budget 10% under its limit. Redis loses the budget's state mid-run; the
// provider, which still counts the last second, must never answer 429.
// Without the restart from empty, the budget reads full and the fleet sends
// its whole burst into a provider with 3 calls of room.
func TestStateLostProviderStaysUnderItsLimit(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		fp, client := startProvider(t, fakeprovider.Config{RequestLimit: 20, Window: time.Second})
		rdb := b.Client(t)
		var ev kinds
		cfg := pacer.Config{Name: redistest.Name(t), Observe: ev.observe,
			Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 18, Window: time.Second}}}
		ps := newPacers(t, b, 3, cfg)
		// storm runs the callers for d, or until done says so: on a
		// loaded machine under -race, a fixed time may not use the burst.
		storm := func(d time.Duration, done func() bool) {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			if done != nil {
				go func() {
					for ctx.Err() == nil && !done() {
						time.Sleep(5 * time.Millisecond)
					}
					cancel()
				}()
			}
			var wg sync.WaitGroup
			for _, p := range ps {
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							l, err := p.Acquire(ctx, pacer.Request{Tokens: 1})
							if err != nil {
								continue
							}
							_, err = client.Chat(context.Background(), 1, 0, 1)
							_ = l.Settle(context.Background(), 1)
							if err != nil && !strings.Contains(err.Error(), "429") {
								t.Errorf("provider call = %v", err)
							}
						}
					}()
				}
			}
			wg.Wait()
		}
		storm(10*time.Second, func() bool { return fp.Stats().OK >= 18 })
		before := fp.Stats()
		loseState(t, rdb, ps[0])
		// Until a process has found the loss and the budget has refilled
		// five calls: 700 ms was the whole storm once, and under a loaded
		// .ci/run the turns reserved before the loss (12 callers deep)
		// used it up before any caller asked the budget again.
		storm(5*time.Second, func() bool { return ev.lost() > 0 && fp.Stats().OK-before.OK >= 5 })
		after := fp.Stats()
		if before.OK < 18 {
			t.Fatalf("%d calls in 10 s before the loss; want the budget's burst used (18)", before.OK)
		}
		if after.RateLimited != 0 {
			t.Errorf("the provider answered %d 429s (%d before the loss): the budget sent more than its limit after losing its state", after.RateLimited, before.RateLimited)
		}
		if ev.lost() == 0 {
			t.Error("no state-lost Warning after the loss")
		}
		if after.OK-before.OK < 5 {
			t.Errorf("%d calls after the loss; want the budget refilling at its rate", after.OK-before.OK)
		}
	})
}
