package pacer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A real redis-server killed under load and started again: three Pacers
// (three processes as far as Redis can tell), six callers each, on a budget
// of RPM 1200 whose rpm fails open at a third each. While Redis is down,
// each admits at most its share (400 a minute, from empty), and
// within about a second of Redis answering again each admits from the
// shared budget. The bound is go-redis's: once a client has failed
// PoolSize dials (its callers, the Pacer's probe every 200 ms, and the
// background ends of leases whose settle failed all dial), its pool dials
// again only once a second, so a Pacer sees Redis up to 1 s plus a probe
// after it answers. It is allowed 0.8 s of slack for a loaded machine
// (2 s in all); the figures go in docs/results.md.
func TestRedisKilledUnderLoad(t *testing.T) {
	srv := redistest.NewServer(t)
	const (
		pacers, callers = 3, 6
		rpm             = 1200
		share           = rpm / pacers // each Pacer's refill per minute while down
		down            = 2 * time.Second
	)
	type fleet struct {
		p           *pacer.Pacer
		local       atomic.Int64 // leases admitted locally
		tripped, up atomic.Int64 // UnixNano of its Redis events: lost, found again
		shared      atomic.Int64 // UnixNano of its first shared admission of a call begun after the kill
	}
	var killed atomic.Int64
	fs := make([]*fleet, pacers)
	name := redistest.Name(t)
	for i := range fs {
		f := &fleet{}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		p, err := pacer.New(rdb, pacer.Config{Name: name, Limits: pacer.Limits{RPM: rpm},
			Outage: pacer.Outage{FailOpen: []string{"rpm"}, Replicas: pacers},
			Observe: func(e pacer.Event) {
				switch {
				case e.Kind == pacer.Redis && e.Err != nil:
					f.tripped.CompareAndSwap(0, time.Now().UnixNano())
				case e.Kind == pacer.Redis:
					f.up.CompareAndSwap(0, time.Now().UnixNano())
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		f.p, fs[i] = p, f
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var settleErrs atomic.Int64
	for _, f := range fs {
		for range callers {
			wg.Go(func() {
				for ctx.Err() == nil {
					began := time.Now().UnixNano()
					l, err := f.p.Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: 20 * time.Millisecond})
					if err != nil {
						if !errors.Is(err, pacer.ErrWaitTimeout) && !errors.Is(err, pacer.ErrUnavailable) && ctx.Err() == nil {
							t.Errorf("Acquire = %v; want a lease, ErrWaitTimeout or (the first call) ErrUnavailable", err)
						}
						time.Sleep(5 * time.Millisecond)
						continue
					}
					if l.Info().Local {
						f.local.Add(1)
					} else if k := killed.Load(); k != 0 && began > k {
						f.shared.CompareAndSwap(0, time.Now().UnixNano())
					}
					time.Sleep(time.Millisecond)
					if err := l.Settle(context.Background(), 1); err != nil {
						settleErrs.Add(1) // a shared lease whose Redis was killed
					}
				}
			})
		}
	}

	time.Sleep(500 * time.Millisecond)
	killed.Store(time.Now().UnixNano())
	srv.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for _, f := range fs {
		for f.tripped.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(down)
	answered := srv.Start()
	deadline = time.Now().Add(10 * time.Second)
	for _, f := range fs {
		for f.shared.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	stop()
	wg.Wait()

	var total, bound float64
	for i, f := range fs {
		if f.tripped.Load() == 0 || f.up.Load() == 0 || f.shared.Load() == 0 {
			t.Fatalf("Pacer %d: Redis lost at %d, found at %d, shared again at %d; want all three", i, f.tripped.Load(), f.up.Load(), f.shared.Load())
		}
		// Its share's refill while it was local, from empty.
		local := time.Duration(f.up.Load() - killed.Load())
		b := share*local.Minutes() + 1
		// The Pacer's probe may see Redis before the test's own PING does.
		back := max(time.Duration(f.shared.Load()-answered.UnixNano()), 0)
		t.Logf("Pacer %d: tripped %v after the kill, local for %v: admitted %d locally (bound %.0f); shared again %v after Redis answered",
			i, time.Duration(f.tripped.Load()-killed.Load()).Round(time.Millisecond), local.Round(time.Millisecond), f.local.Load(), b, back.Round(time.Millisecond))
		if float64(f.local.Load()) > b {
			t.Errorf("Pacer %d admitted %d calls while Redis was down; want at most its share, %.0f", i, f.local.Load(), b)
		}
		if back > 2*time.Second {
			t.Errorf("Pacer %d admitted from the shared budget %v after Redis answered; want within go-redis's 1 s redial and a 200 ms probe (2 s with slack)", i, back)
		}
		total += float64(f.local.Load())
		bound += b
	}
	t.Logf("fleet: %.0f admitted while Redis was down, bound %.0f (RPM %d); %d settles of shared leases failed with Redis gone",
		total, bound, rpm, settleErrs.Load())
}
