package pacer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lease"
	"github.com/llmpacer/llmpacer/pacer"
)

// Behaviour 4: the N+1th caller waits until a lease settles.
func TestConcurrencyWaitsForSettle(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		ps := newPacers(t, b, 2, pacer.Config{Limits: pacer.Limits{Concurrency: 2}})
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
		got := make(chan time.Time, 1)
		third := make(chan *pacer.Lease, 1)
		go func() {
			l, err := ps[1].Acquire(ctx, pacer.Request{})
			if err != nil {
				t.Errorf("third Acquire = %v", err)
			}
			got <- time.Now()
			third <- l
		}()
		time.Sleep(300 * time.Millisecond)
		select {
		case <-got:
			t.Fatal("third Acquire was admitted while both slots were held")
		default:
		}
		settled := time.Now()
		if err := held[0].Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-got:
			if d := at.Sub(settled); d > 500*time.Millisecond {
				t.Errorf("admitted %v after the settle; want soon after", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("third Acquire still waiting 5s after a slot freed")
		}
		if s := snap(t, ps[0]); s.InFlight != 2 || s.Concurrency != 2 {
			t.Errorf("Snapshot: InFlight %d, Concurrency %d; want 2, 2", s.InFlight, s.Concurrency)
		}
		if l := <-third; l != nil {
			_ = l.Settle(ctx, 0)
		}
		if s := snap(t, ps[0]); s.InFlight != 1 {
			t.Errorf("Snapshot: InFlight %d after settling; want 1", s.InFlight)
		}
	})
}

// Behaviour 4: an abandoned lease frees its slot after its TTL; one kept
// alive does not expire.
func TestLeaseExpiryAndKeepAlive(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{Concurrency: 1, TPM: 6000}, LeaseTTL: 300 * time.Millisecond})

		abandoned, err := p.Acquire(ctx, pacer.Request{Tokens: 1000})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
		if err != nil {
			t.Fatalf("Acquire after an abandoned lease = %v", err)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
			t.Errorf("slot came back after %v; want about the 300ms TTL", d)
		}
		before := snap(t, p).TPM.Level
		if err := abandoned.Settle(ctx, 0); !errors.Is(err, pacer.ErrLeaseExpired) {
			t.Errorf("Settle of an expired lease = %v; want ErrLeaseExpired", err)
		}
		if err := abandoned.Settle(ctx, 0); !errors.Is(err, pacer.ErrLeaseExpired) {
			t.Errorf("second Settle of an expired lease = %v; want ErrLeaseExpired", err)
		}
		if after := snap(t, p).TPM.Level; after > before+20 {
			t.Errorf("TPM level went from %v to %v: the expired lease's tokens were refunded; they must stay charged", before, after)
		}
		if err := l.Settle(ctx, 10); err != nil {
			t.Fatal(err)
		}

		kept, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		stop := kept.AutoKeepAlive(ctx)
		time.Sleep(time.Second) // more than three TTLs
		if l, _, err := tryAcquire(p, ctx, pacer.Request{}); l != nil || err != nil {
			t.Errorf("TryAcquire while a kept-alive lease holds the only slot = %v, %v; want nil", l, err)
		}
		stop()
		if err := kept.Settle(ctx, 10); err != nil {
			t.Errorf("Settle of a kept-alive lease = %v; want nil", err)
		}
		if got := kept.State(); got != lease.Settled {
			t.Errorf("State() = %v; want settled", got)
		}
	})
}

// Many goroutines over many Pacers never hold more than Concurrency leases
// at once, and all of them get through.
func TestConcurrencyNeverExceeded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const limit = 5
		ps := newPacers(t, b, 6, pacer.Config{Limits: pacer.Limits{Concurrency: limit, RPM: 1_000_000}, MaxWait: 20 * time.Second})
		var inflight, peak, done atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 60; i++ {
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
		if done.Load() != 240 {
			t.Errorf("%d calls completed; want 240", done.Load())
		}
	})
}
