package pacer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
)

// Behaviour 4: the N+1th caller waits until a lease settles. How soon it
// gets the freed slot is checked on the hints the script gives it (each
// ask again within half a second), figures on Redis's clock that load
// does not change; the wall clock only bounds the wait at 10 s.
func TestConcurrencyWaitsForSettle(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		waiting := make(chan struct{}, 1)
		var mu sync.Mutex
		var hints []time.Duration
		ps := newPacers(t, b, 2, pacer.Config{Limits: pacer.Limits{Concurrency: 2}})
		third := newPacer(t, b, pacer.Config{Name: ps[0].Config().Name, Limits: pacer.Limits{Concurrency: 2},
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Waiting && e.Limit == "concurrency" {
					mu.Lock()
					hints = append(hints, e.Wait)
					mu.Unlock()
					select {
					case waiting <- struct{}{}:
					default:
					}
				}
			}})
		var held []*pacer.Lease
		for i := 0; i < 2; i++ {
			l, err := ps[0].Acquire(ctx, pacer.Request{})
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		if l, wait, err := tryAcquire(ps[1], ctx, pacer.Request{}); l != nil || err != nil || wait <= 0 {
			t.Fatalf("third TryAcquire = %v, %v, %v; want nil, >0, nil", l, wait, err)
		}
		got := make(chan *pacer.Lease, 1)
		go func() {
			l, err := third.Acquire(ctx, pacer.Request{})
			if err != nil {
				t.Errorf("third Acquire = %v", err)
			}
			got <- l
		}()
		<-waiting // the third call was denied a slot at least once
		select {
		case <-got:
			t.Fatal("third Acquire was admitted while both slots were held")
		default:
		}
		if err := held[0].Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		var l *pacer.Lease
		select {
		case l = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("third Acquire still waiting 10s after a slot freed")
		}
		mu.Lock()
		for _, h := range hints {
			if h > 500*time.Millisecond {
				t.Errorf("a waiter for a slot was told to wait %v; want at most 500ms between asks", h)
			}
		}
		mu.Unlock()
		if s := snap(t, ps[0]); s.InFlight != 2 || s.Concurrency != 2 {
			t.Errorf("Snapshot: InFlight %d, Concurrency %d; want 2, 2", s.InFlight, s.Concurrency)
		}
		if l != nil {
			_ = l.Settle(ctx, 0)
		}
		if s := snap(t, ps[0]); s.InFlight != 1 {
			t.Errorf("Snapshot: InFlight %d after settling; want 1", s.InFlight)
		}
	})
}

// Behaviour 4: an abandoned lease frees its slot after its TTL; one kept
// alive does not expire. The slot comes back no sooner than the TTL after
// the abandoned lease was acquired, a bound load cannot break; and the
// kept lease's TTL leaves room for two late renewals (one every TTL/3)
// before it could lapse.
func TestLeaseExpiryAndKeepAlive(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const ttl = 300 * time.Millisecond
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{Concurrency: 1, TPM: 6000}, LeaseTTL: ttl})

		start := time.Now()
		abandoned, err := p.Acquire(ctx, pacer.Request{Tokens: 1000})
		if err != nil {
			t.Fatal(err)
		}
		// The next lease, by a process with a long TTL: a stall before its
		// settle must not expire it too.
		long := newPacer(t, b, pacer.Config{Name: p.Config().Name, Limits: pacer.Limits{Concurrency: 1, TPM: 6000}, LeaseTTL: time.Minute})
		l, err := long.Acquire(ctx, pacer.Request{Tokens: 10})
		if err != nil {
			t.Fatalf("Acquire after an abandoned lease = %v", err)
		}
		if d := time.Since(start); d < ttl-time.Millisecond {
			t.Errorf("slot came back %v after the abandoned lease was taken; want no sooner than its %v TTL", d, ttl)
		}
		if err := l.Settle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		before := snap(t, p).Rate("tpm").Level
		if err := abandoned.Settle(ctx, 0); !errors.Is(err, pacer.ErrLeaseExpired) {
			t.Errorf("Settle of an expired lease = %v; want ErrLeaseExpired", err)
		}
		if err := abandoned.Settle(ctx, 0); !errors.Is(err, pacer.ErrLeaseExpired) {
			t.Errorf("second Settle of an expired lease = %v; want ErrLeaseExpired", err)
		}
		// A refund would give back 1,000; the refill between the two
		// snapshots is 100 tokens a second.
		if after := snap(t, p).Rate("tpm").Level; after > before+500 {
			t.Errorf("TPM level went from %v to %v: the expired lease's tokens were refunded; they must stay charged", before, after)
		}

		// On miniredis the test stops the clock and moves it a third of
		// the TTL at a time, each time once a renewal has landed at the
		// clock as it stands: renewals that come late on a loaded machine
		// cannot let the lease lapse, and the check is exact. On a real
		// Redis the clock runs, and two renewals may come late before the
		// lease could lapse: with a TTL of 1.2 s, 800 ms a renewal may be
		// late on a loaded machine.
		keptTTL := 600 * time.Millisecond
		if b.Mini == nil {
			keptTTL = 1200 * time.Millisecond
		}
		kp := newPacer(t, b, pacer.Config{Limits: pacer.Limits{Concurrency: 1}, LeaseTTL: keptTTL})
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		if b.Mini != nil {
			b.Mini.SetTime(now)
		}
		kept, err := kp.Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		stop := kept.KeepAlive(ctx)
		if b.Mini != nil {
			for range 7 { // 1.4 s: more than two TTLs
				for deadline := time.Now().Add(30 * time.Second); kept.Info().Expiry.Before(now.Add(keptTTL)); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("no renewal in 30s: the lease expires at %v, the clock reads %v", kept.Info().Expiry, now)
					}
				}
				now = now.Add(keptTTL / 3)
				b.Mini.SetTime(now)
			}
		} else {
			time.Sleep(2*keptTTL + keptTTL/6) // more than two TTLs
		}
		if l, _, err := tryAcquire(kp, ctx, pacer.Request{}); l != nil || err != nil {
			t.Errorf("TryAcquire while a kept-alive lease holds the only slot = %v, %v; want nil", l, err)
		}
		stop()
		if err := kept.Settle(ctx, 0); err != nil {
			t.Errorf("Settle of a kept-alive lease = %v; want nil", err)
		}
		if got := kept.Info().State; got != pacer.Settled {
			t.Errorf("State() = %v; want settled", got)
		}
	})
}

// A renewal that fails is tried again a twelfth of the TTL later, not at
// the next third: the lease rides out a blip of about half its TTL. Redis
// (miniredis, its clock stopped so that nothing expires) refuses the first
// two renewals; each try after a failure must come sooner than a quarter
// of the 6 s TTL after it (the twelfth is 500 ms, the third 2 s).
func TestKeepAliveRetriesAFailedRenewalSoon(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	const ttl = 6 * time.Second
	b.Mini.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{Concurrency: 1}, LeaseTTL: ttl})
	l, err := p.Acquire(ctx, pacer.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var tries []time.Time
	b.Mini.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if (cmd != "EVALSHA" && cmd != "EVAL") || len(args) == 0 || (args[0] != lua.KeepAlive.Hash() && args[0] != lua.Source("keepalive")) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		tries = append(tries, time.Now())
		if len(tries) <= 2 {
			c.WriteError("ERR a blip the test made")
			return true
		}
		return false
	})
	stop := l.KeepAlive(ctx)
	n := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(tries)
	}
	for deadline := time.Now().Add(30 * time.Second); n() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals tried in 30 s; want 3", n())
		}
	}
	stop()
	b.Mini.Server().SetPreHook(nil)
	mu.Lock() // a renewal sent before stop may still come in
	first := append([]time.Time(nil), tries[:3]...)
	mu.Unlock()
	for i := 1; i < 3; i++ {
		if gap := first[i].Sub(first[i-1]); gap >= ttl/4 {
			t.Errorf("try %d came %v after a failed one; want a twelfth of the %v TTL, well under a quarter", i+1, gap, ttl)
		}
	}
	if err := l.Settle(ctx, 0); err != nil {
		t.Errorf("Settle after the renewals = %v; want nil", err)
	}
}

// Many goroutines over many Pacers never hold more than Concurrency leases
// at once, and all of them get through.
func TestConcurrencyNeverExceeded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const limit = 5
		// MaxWait bounds only a stall: waiters are spaced by the mean hold,
		// which on a loaded machine (miniredis under -race) is long, and
		// 20 s was once too short for 55 of them.
		ps := newPacers(t, b, 6, pacer.Config{Limits: pacer.Limits{Concurrency: limit, RPM: 1_000_000}, MaxWait: 10 * time.Minute})
		var inflight, peak, done atomic.Int64
		var wg sync.WaitGroup
		// 30 callers for 5 slots: six times more than fit.
		for i := 0; i < 30; i++ {
			wg.Add(1)
			go func(p *pacer.Pacer) {
				defer wg.Done()
				for j := 0; j < 4; j++ {
					l, err := p.Acquire(ctx, pacer.Request{})
					if err != nil {
						t.Errorf("Acquire() = %v", err)
						return
					}
					n := inflight.Add(1)
					for {
						old := peak.Load()
						if n <= old || peak.CompareAndSwap(old, n) {
							break
						}
					}
					time.Sleep(2 * time.Millisecond)
					inflight.Add(-1)
					if err := l.Settle(ctx, 0); err != nil {
						t.Errorf("Settle() = %v", err)
					}
					done.Add(1)
				}
			}(ps[i%len(ps)])
		}
		wg.Wait()
		if peak.Load() > limit {
			t.Errorf("peak in flight = %d; want at most %d", peak.Load(), limit)
		}
		if done.Load() != 120 {
			t.Errorf("%d calls completed; want 120", done.Load())
		}
	})
}

// An interactive call waiting for its token turn holds no slot: another
// call uses the only slot meanwhile, and the waiting call takes it at its
// turn. It costs three script calls: the acquire that reserves its turn,
// the one that claims its slot, the settle.
func TestTurnHoldsNoSlot(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.Client(t)
		var scripts, others atomic.Int64
		rdb.AddHook(commandCounter{&scripts, &others})
		// 1,000 tokens a second; one slot, shared with a process that has
		// no token limit (embeddings, say).
		p, err := pacer.New(rdb, pacer.Config{Name: name, Limits: pacer.Limits{TPM: 60_000, Concurrency: 1}})
		if err != nil {
			t.Fatal(err)
		}
		other := newPacer(t, b, pacer.Config{Name: name, Limits: pacer.Limits{Concurrency: 1}})
		a, err := p.Acquire(ctx, pacer.Request{Tokens: 60_000})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Settle(ctx, 60_000); err != nil {
			t.Fatal(err)
		}
		scripts.Store(0)
		done := make(chan *pacer.Lease, 1)
		go func() {
			// Its turn: two seconds after a's admission. Not 400 ms: on a
			// loaded CI machine the Settle, this goroutine's start and the
			// snapshot and TryAcquire below took longer than that, and the
			// call had claimed its slot before they looked.
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 2000})
			if err != nil {
				t.Errorf("Acquire of a call waiting for tokens = %v", err)
			}
			done <- l
		}()
		time.Sleep(100 * time.Millisecond)
		// Snapshots through other's client: p's counts only the call's
		// scripts.
		if s := snap(t, other); s.InFlight != 0 {
			t.Errorf("slots held while the call waits for its turn = %d; want 0", s.InFlight)
		}
		l, err := other.TryAcquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatalf("TryAcquire of another call while the first waits for its turn = %v; want the free slot", err)
		}
		if err := l.Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		var waited *pacer.Lease
		select {
		case waited = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting call was not admitted 5 s after its turn")
		}
		// On the Redis clock: its turn began 2 s after a's.
		if d := waited.Info().Start.Sub(a.Info().Start); d < 1990*time.Millisecond {
			t.Errorf("its turn began %v after the first call's; want 2 s, its tokens' refill", d)
		}
		if s := snap(t, other); s.InFlight != 1 {
			t.Errorf("slots held once admitted = %d; want 1", s.InFlight)
		}
		if err := waited.Settle(ctx, 2000); err != nil {
			t.Fatal(err)
		}
		if got := scripts.Load(); got != 3 {
			t.Errorf("%d script calls for a call that waited for its turn; want 3 (reserve, claim, settle)", got)
		}
	})
}

// A waiter that gives up leaves the slot queue: the slot freed next goes
// to the waiter behind it at once, by the settle that frees it. Each step
// waits for the queue to show the one before (a loaded machine may hold a
// goroutine or a leave for a second), and "at once" is read in Redis: the
// settle's own script admits the waiter, leaving the queue empty and the
// slot held.
func TestCanceledWaiterLeavesTheQueue(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		ps := newPacers(t, b, 3, pacer.Config{Limits: pacer.Limits{Concurrency: 1}, MaxWait: 10 * time.Second})
		rdb := b.Client(t)
		keys := pacer.Keys(ps[0])
		// queued is whether n callers wait for a slot (the queue keeps a
		// sentinel besides them).
		queued := func(n int64) func() bool {
			return func() bool {
				q, err := rdb.ZCard(ctx, keys[2]).Result()
				return err == nil && q == n+1
			}
		}
		held, err := ps[0].Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		gone, cancel := context.WithCancel(ctx)
		first := make(chan error, 1)
		go func() {
			_, err := ps[1].Acquire(gone, pacer.Request{})
			first <- err
		}()
		waitFor(t, "the first waiter queued", queued(1))
		second := make(chan *pacer.Lease, 1)
		go func() {
			l, err := ps[2].Acquire(ctx, pacer.Request{})
			if err != nil {
				t.Errorf("second waiter's Acquire = %v", err)
			}
			second <- l
		}()
		waitFor(t, "the second waiter queued", queued(2))
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Errorf("canceled waiter's Acquire = %v; want context.Canceled", err)
		}
		waitFor(t, "the canceled waiter left the queue", queued(1))
		if err := held.Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if !queued(0)() {
			t.Error("the settle that freed the slot left the second waiter queued; want it admitted by that settle")
		}
		if n, err := rdb.ZCount(ctx, keys[1], "0", "(1000000000000000").Result(); err != nil || n != 1 {
			t.Errorf("slots held after the settle = %d (%v); want 1, the second waiter's", n, err)
		}
		select {
		case l := <-second:
			if l != nil {
				_ = l.Settle(ctx, 0)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("second waiter's Acquire did not return 5 s after the settle admitted it")
		}
	})
}

// A waiter queued for a slot is admitted by the settle that frees it, and
// learns so from the message: the acquire that queued it is its only
// script call. (Its fallback timer, twice its wait estimate, is kept long
// by a mean hold of a second, so a loaded machine does not fire it first;
// and the settle comes once its process's subscription is ready: the
// first waiter of a burst starts it, and one admitted before it is ready
// is found then, and asks once more.)
func TestHandOverNeedsNoClaim(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		cfg := pacer.Config{Name: name, Limits: pacer.Limits{Concurrency: 1, TPM: 600_000}, MaxWait: 30 * time.Second}
		holder := newPacer(t, b, cfg)
		rdb := b.Client(t)
		var scripts, others atomic.Int64
		rdb.AddHook(commandCounter{&scripts, &others})
		queued := make(chan struct{}, 1)
		wcfg := cfg
		wcfg.Observe = func(e pacer.Event) {
			if e.Kind == pacer.Waiting && e.Limit == "concurrency" {
				select {
				case queued <- struct{}{}:
				default:
				}
			}
		}
		waiter, err := pacer.New(rdb, wcfg)
		if err != nil {
			t.Fatal(err)
		}
		// One lease held a second: the waiter's mean hold, and so its wait
		// estimate, is a second.
		l, err := waiter.Acquire(ctx, pacer.Request{Tokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := l.Settle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		held, err := holder.Acquire(ctx, pacer.Request{Tokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		scripts.Store(0)
		got := make(chan *pacer.Lease, 1)
		go func() {
			l, err := waiter.Acquire(ctx, pacer.Request{Tokens: 100})
			if err != nil {
				t.Errorf("waiter's Acquire = %v", err)
			}
			got <- l
		}()
		<-queued
		waitFor(t, "the waiter's slot-grant subscription is not ready", func() bool { return pacer.GrantsReady(waiter) })
		if err := held.Settle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		var w *pacer.Lease
		select {
		case w = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("waiter not admitted 10 s after the slot freed")
		}
		if w == nil {
			return
		}
		if n := scripts.Load(); n != 1 {
			t.Errorf("the waiter made %d script calls to be admitted; want 1 (the acquire that queued it)", n)
		}
		if s := snap(t, holder); s.InFlight != 1 {
			t.Errorf("slots held = %d; want 1, the waiter's", s.InFlight)
		}
		if err := w.Settle(ctx, 100); err != nil {
			t.Errorf("the handed lease's Settle = %v", err)
		}
		if s := snap(t, holder); s.InFlight != 0 {
			t.Errorf("slots held after its settle = %d; want 0", s.InFlight)
		}
	})
}

// A waiter whose context ends right as a freed slot admits it loses no
// slot: either it returns the lease (the message came first) or it cancels
// the lease it was given, and the slot goes back (here to nobody: free).
// Each round races the cancel against the settle, in either order.
func TestWaiterGivesUpAsItIsHanded(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		cfg := pacer.Config{Limits: pacer.Limits{Concurrency: 1, TPM: 600_000}, MaxWait: 30 * time.Second}
		ps := newPacers(t, b, 2, cfg)
		rdb := b.Client(t)
		for round := range 12 {
			held, err := ps[0].Acquire(ctx, pacer.Request{Tokens: 10})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			type result struct {
				l   *pacer.Lease
				err error
			}
			got := make(chan result, 1)
			go func() {
				l, err := ps[1].Acquire(wctx, pacer.Request{Tokens: 100})
				got <- result{l, err}
			}()
			// Queued: the slot is held, so the waiter's first call queues it.
			deadline := time.Now().Add(10 * time.Second)
			for {
				q, err := rdb.ZCard(ctx, pacer.Keys(ps[0])[2]).Result()
				if err != nil {
					t.Fatal(err)
				}
				if q > 1 || time.Now().After(deadline) {
					break // the sentinel and the waiter
				}
				time.Sleep(2 * time.Millisecond)
			}
			pause := time.Duration(round%4) * time.Millisecond
			if round%2 == 0 {
				cancel()
				time.Sleep(pause)
				_ = held.Settle(ctx, 10)
			} else {
				_ = held.Settle(ctx, 10)
				time.Sleep(pause)
				cancel()
			}
			r := <-got
			switch {
			case r.err == nil:
				_ = r.l.Settle(ctx, 100) // the message came first: a lease like any
			case !errors.Is(r.err, context.Canceled):
				t.Fatalf("round %d: waiter's Acquire = %v; want a lease or context.Canceled", round, r.err)
			}
			// The slot is free again once the waiter's leave lands (in the
			// background): the next TryAcquire gets it.
			var l *pacer.Lease
			for time.Now().Before(deadline) {
				if l, err = ps[0].TryAcquire(ctx, pacer.Request{Tokens: 10}); err == nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if l == nil {
				t.Fatalf("round %d: the slot was lost: TryAcquire still refused 10 s later (%v); %+v", round, err, snap(t, ps[0]))
			}
			_ = l.Settle(ctx, 10)
		}
	})
}

// A waiter whose process dies is admitted by the slot freed for it all the
// same (it cannot say otherwise), and holds that slot until its lease TTL
// ends; then the next waiter gets it. No slot is lost for longer.
func TestDeadWaiterHoldsItsSlotOnlyItsTTL(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const ttl = time.Second
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: 1}, MaxWait: 30 * time.Second, LeaseTTL: ttl}
		holder := newPacer(t, b, cfg)
		held, err := holder.Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		// Kept alive until its settle: on a loaded machine the waiter's
		// queueing and death below took longer than the 1 s TTL, and the
		// settle found the lease expired.
		stopKeepAlive := held.KeepAlive(ctx)
		// The dying process: queued, then its client closes, so it can
		// neither listen nor leave.
		rdb := b.Client(t)
		dying, err := pacer.New(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		dead := make(chan error, 1)
		go func() {
			_, err := dying.Acquire(ctx, pacer.Request{})
			dead <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for {
			q, err := b.Client(t).ZCard(ctx, pacer.Keys(holder)[2]).Result()
			if err != nil {
				t.Fatal(err)
			}
			if q > 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the dying waiter never queued")
			}
			time.Sleep(2 * time.Millisecond)
		}
		_ = rdb.Close()
		if err := <-dead; err == nil {
			t.Fatal("the dying waiter's Acquire succeeded on a closed client")
		}
		next := newPacer(t, b, cfg)
		stopKeepAlive()
		settled := time.Now()
		if err := held.Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if s := snap(t, holder); s.InFlight != 1 {
			t.Fatalf("slots held after the settle = %d; want 1, given to the dead waiter", s.InFlight)
		}
		l, err := next.Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatalf("the next waiter's Acquire = %v", err)
		}
		// The dead waiter's lease expires a TTL after the settle admitted
		// it, on the Redis clock of this machine: never sooner.
		if d := time.Since(settled); d < ttl-50*time.Millisecond {
			t.Errorf("the next waiter got the slot %v after the settle; want no sooner than the dead waiter's TTL, %v", d, ttl)
		}
		_ = l.Settle(ctx, 0)
	})
}

// A freed slot admits its waiter against every limit, a strict sliding
// window's included: the window counts the waiter's call, so the calls it
// then lets through are its limit in all, with slots free.
func TestHandOverChargesSlidingWindows(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		r := pacer.Rate{Unit: pacer.Requests, Limit: 3, Window: time.Hour, Sliding: true}
		cfg := pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{r}, Limits: pacer.Limits{Concurrency: 1}, MaxWait: 30 * time.Second}
		ps := newPacers(t, b, 2, cfg)
		held, err := ps[0].Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *pacer.Lease, 1)
		go func() {
			l, err := ps[1].Acquire(ctx, pacer.Request{})
			if err != nil {
				t.Errorf("waiter's Acquire = %v", err)
			}
			got <- l
		}()
		rdb := b.Client(t)
		for deadline := time.Now().Add(10 * time.Second); ; {
			q, err := rdb.ZCard(ctx, pacer.Keys(ps[0])[2]).Result()
			if err != nil {
				t.Fatal(err)
			}
			if q > 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the waiter never queued")
			}
			time.Sleep(2 * time.Millisecond)
		}
		if err := held.Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		w := <-got
		if w == nil {
			return
		}
		if err := w.Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		// Two counted (the holder and the waiter): one more fits the hour.
		if _, err := ps[0].TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatalf("the third call of the hour = %v; want admitted", err)
		}
		_, err = ps[1].TryAcquire(ctx, pacer.Request{})
		if ny := notYet(t, "the fourth call of the hour", err); ny.Limit == "concurrency" || ny.Limit == "" {
			t.Errorf("the fourth call was refused by %q; want the sliding rate", ny.Limit)
		}
	})
}

// A slot freed by a lease that expired goes to the head waiter at the next
// keepalive of another lease, as a settle's would: the waiter is admitted
// there, without asking again. On miniredis, its clock driven: two slots,
// one lease abandoned, one kept alive; a waiter queues; the abandoned
// lease expires, and the kept one's keepalive admits the waiter.
func TestKeepAliveHandsExpiredSlot(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	const ttl = time.Second
	cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: 2, TPM: 600_000}, MaxWait: 30 * time.Second, LeaseTTL: ttl}
	holder := newPacer(t, b, cfg)
	c := newClock(b)
	if _, err := holder.Acquire(ctx, pacer.Request{Tokens: 10}); err != nil { // abandoned
		t.Fatal(err)
	}
	kept, err := holder.Acquire(ctx, pacer.Request{Tokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan struct{}, 1)
	wcfg := cfg
	wcfg.Observe = queuedSignal(queued)
	waiter := newPacer(t, b, wcfg)
	got := make(chan *pacer.Lease, 1)
	go func() {
		l, err := waiter.Acquire(ctx, pacer.Request{Tokens: 10})
		if err != nil {
			t.Errorf("the waiter's Acquire = %v", err)
		}
		got <- l
	}()
	<-queued
	c.advance(ttl / 2)
	if err := pacer.Renew(ctx, kept); err != nil {
		t.Fatal(err)
	}
	c.advance(ttl/2 + 10*time.Millisecond) // the abandoned lease expired
	if err := pacer.Renew(ctx, kept); err != nil {
		t.Fatal(err)
	}
	if s := snap(t, holder); s.InFlight != 2 {
		t.Errorf("after the keepalive: %d slots held; want 2: the expired lease's slot handed to the waiter", s.InFlight)
	}
	select {
	case l := <-got:
		if l != nil {
			_ = l.Settle(ctx, 10)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter not admitted 10 s after the keepalive")
	}
	_ = kept.Settle(ctx, 10)
}
