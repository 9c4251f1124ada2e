package pacer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A worker loop as the README writes it, whose settles failed while Redis
// was down: every one of the budget's n slots is free again within 2 s of
// Redis answering (the leases' TTL is a minute), and n calls are admitted;
// each lease settled once, in the background, so the day bucket reads
// exactly what was used. Two Pacers (two processes) hold the leases, and
// settle them from as many goroutines at once. On miniredis (closed and
// restarted on its address, its clock still but for a millisecond between
// admissions) and on a real redis-server stopped and started again on its
// port, with its data (on the real lane).
func TestSettleFailedInOutageFreesSlots(t *testing.T) {
	const outage = time.Second // long enough for the retries' backoff to reach its cap
	t.Run("miniredis", func(t *testing.T) {
		b := redistest.Mini(t)
		now := time.Now() // the leases' expiry a minute ahead of the wall clock
		b.Mini.SetTime(now)
		// A millisecond between admissions, as on a real Redis: admissions
		// in one microsecond share a give-back entry (see giveback.go).
		step := func() { now = now.Add(time.Millisecond); b.Mini.SetTime(now) }
		slotsAfterOutage(t, b.Addrs[0], 0.01, step, b.Mini.Close, func() time.Time {
			time.Sleep(outage)
			if err := b.Mini.Restart(); err != nil {
				t.Fatalf("restarting miniredis: %v", err)
			}
			return time.Now()
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.NewServer(t)
		down := func() {
			// Saved, so that it comes back with the leases it holds.
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer c.Close()
			_ = c.ShutdownSave(context.Background()).Err() // the connection drops as it exits
			srv.Kill()
		}
		// TPD refills 0.12 tokens a second.
		slotsAfterOutage(t, srv.Addr, 2, func() {}, down, func() time.Time {
			time.Sleep(outage)
			return srv.Start()
		})
	})
}

// slotsAfterOutage runs TestSettleFailedInOutageFreesSlots on the Redis at
// addr: step runs after each admission, down takes Redis away, up brings
// it back after the outage and returns when it answered; levels are
// checked within tol.
func slotsAfterOutage(t *testing.T, addr string, tol float64, step, down func(), up func() time.Time) {
	const (
		pacers      = 2
		n           = 4 // slots, held half by each Pacer
		tpd         = 10_000
		reserved    = 1000
		used        = 100
		settleBound = 5 * time.Second
	)
	ctx := context.Background()
	name := redistest.Name(t)
	ps := make([]*pacer.Pacer, pacers)
	for i := range ps {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		p, err := pacer.New(rdb, pacer.Config{Name: name, Limits: pacer.Limits{TPD: tpd, Concurrency: n}, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	p := ps[0]
	leases := make([]*pacer.Lease, n)
	for i := range leases {
		var err error
		if leases[i], err = ps[i%pacers].TryAcquire(ctx, pacer.Request{Tokens: reserved}); err != nil {
			t.Fatalf("TryAcquire %d = %v", i, err)
		}
		step()
	}
	if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: reserved}); err == nil {
		t.Fatalf("TryAcquire with all %d slots taken = a lease; want a refusal", n)
	}

	down()
	var wg sync.WaitGroup
	for i, l := range leases {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, settleBound)
			defer cancel()
			if err := l.Settle(sctx, used); err == nil || sctx.Err() != nil {
				t.Errorf("Settle %d with Redis down = %v (deadline passed: %v); want Redis's error before its deadline", i, err, sctx.Err() != nil)
			}
		})
	}
	wg.Wait()
	back := up()

	// The slots are free once Redis lists no lease in flight.
	var s pacer.Snapshot
	var err error
	for deadline := back.Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s, err = p.Snapshot(ctx); err == nil && s.InFlight == 0 {
			break
		}
	}
	took := time.Since(back)
	if err != nil || s.InFlight != 0 {
		t.Fatalf("%v after Redis answered: %d of %d slots still taken (Snapshot: %v); want all free within 2s (the leases' TTL is a minute)", took.Round(time.Millisecond), s.InFlight, n, err)
	}
	t.Logf("all %d slots free %v after Redis answered", n, took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("the %d slots were free %v after Redis answered; want within 2s", n, took.Round(time.Millisecond))
	}
	// A lease learns it was settled from the reply of the attempt that
	// settled it, or from the next one if that reply was lost.
	for i, l := range leases {
		for deadline := time.Now().Add(5 * time.Second); l.Info().State == pacer.Active && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if got := l.Info().State; got != pacer.Settled {
			t.Errorf("lease %d: State() = %v; want settled", i, got)
		}
	}
	// Each lease settled once: what it used stays charged, the rest went
	// back once.
	if want := float64(tpd - n*used); !near(s.Rate("tpd").Level, want, tol) {
		t.Errorf("after the outage: TPD %v; want %v (each settle counted once)", s.Rate("tpd").Level, want)
	}
	// And the budget admits n calls again.
	var again []*pacer.Lease
	for i := range n {
		l, err := ps[i%pacers].TryAcquire(ctx, pacer.Request{Tokens: reserved})
		if err != nil {
			t.Fatalf("TryAcquire %d after the outage = %v; want a lease", i, err)
		}
		again = append(again, l)
	}
	for _, l := range again {
		if err := l.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A settle whose reply is lost (Redis ran it; the answer never came back)
// is retried in the background until Redis answers: the retry finds the
// lease ended by the lost attempt and changes nothing more, so the unused
// tokens go back once, and the lease reads settled. The caller's second
// Settle, while the first is retried, changes nothing either.
func TestSettleRetriedAfterLostReplyCountsOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		if b.Kind == "cluster" {
			t.Skip("the proxy fronts one node; the standalone lanes cover it")
		}
		ctx := context.Background()
		px := redistest.NewProxy(t, b.Addrs[0])
		rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 10 * time.Second})
		t.Cleanup(func() { _ = rdb.Close() })
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPD: 10_000, Concurrency: 1}, LeaseTTL: time.Minute}
		p, err := pacer.New(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		direct := newPacer(t, b, cfg)
		// One settle first, so that Redis knows the script: a lost
		// NOSCRIPT reply would keep the settle from ever running.
		warm, err := p.Acquire(ctx, pacer.Request{Tokens: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Settle(ctx, 100); err != nil {
			t.Fatal(err)
		}
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 1000})
		if err != nil {
			t.Fatal(err)
		}

		px.Hang(true)
		for i := range 2 {
			sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			err := l.Settle(sctx, 100)
			cancel()
			if err == nil {
				t.Fatalf("Settle %d through a hung Redis = nil; want an error", i)
			}
		}
		if s := snap(t, direct); s.InFlight != 0 || !near(s.Rate("tpd").Level, 9_800, 1) {
			t.Fatalf("Redis after the settle whose reply was lost: in flight %d, TPD %v; want 0 and 9800", s.InFlight, s.Rate("tpd").Level)
		}
		px.Hang(false)

		for deadline := time.Now().Add(5 * time.Second); l.Info().State == pacer.Active && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if got := l.Info().State; got != pacer.Settled {
			t.Fatalf("State() once Redis answers = %v; want settled, in the background", got)
		}
		if s := snap(t, direct); s.InFlight != 0 || !near(s.Rate("tpd").Level, 9_800, 1) {
			t.Errorf("after the retries: in flight %d, TPD %v; want 0 and 9800 (the give-back made once)", s.InFlight, s.Rate("tpd").Level)
		}
	})
}
