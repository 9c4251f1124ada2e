package pacer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lease"
	"github.com/llmpacer/llmpacer/pacer"
)

// Release keeps the whole reservation; Cancel gives back tokens and request.
func TestReleaseAndCancel(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPD: 10, TPD: 100_000, Concurrency: 5}})
		l, _ := p.Acquire(ctx, pacer.Request{Tokens: 1000})
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		s := snap(t, p)
		if !near(s.TPD.Level, 99_000, 1) || !near(s.RPD.Level, 9, 0.01) || s.InFlight != 0 {
			t.Errorf("after Release: TPD %v, RPD %v, in flight %d; want 99000, 9, 0", s.TPD.Level, s.RPD.Level, s.InFlight)
		}
		l, _ = p.Acquire(ctx, pacer.Request{Tokens: 1000})
		if err := l.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, 5000); err != nil {
			t.Errorf("Settle after Cancel = %v; want nil, a no-op", err)
		}
		s = snap(t, p)
		if !near(s.TPD.Level, 99_000, 1) || !near(s.RPD.Level, 9, 0.01) || s.InFlight != 0 {
			t.Errorf("after Cancel: TPD %v, RPD %v, in flight %d; want 99000, 9, 0", s.TPD.Level, s.RPD.Level, s.InFlight)
		}
	})
}

// Settle from many goroutines at once refunds exactly once.
func TestSettleRacesRefundOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPD: 100_000}})
		l, _ := p.Acquire(ctx, pacer.Request{Tokens: 10_000})
		var wg sync.WaitGroup
		for i := 0; i < 32; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); _ = l.Settle(ctx, 0) }()
		}
		wg.Wait()
		if s := snap(t, p); !near(s.TPD.Level, 100_000, 1) {
			t.Errorf("TPD level %v after 32 racing Settles; want 100000 (one refund)", s.TPD.Level)
		}
	})
}

// NoRefund: the provider keeps what it counted at admission, so Settle
// charges overruns only; Reject still gives a refused call's tokens back.
func TestNoRefundAndReject(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPD: 100_000, RPD: 100}, NoRefund: true})
		l, _ := p.Acquire(ctx, pacer.Request{Tokens: 5000})
		if err := l.Settle(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		if s := snap(t, p); !near(s.TPD.Level, 95_000, 2) {
			t.Errorf("NoRefund: after settling 1000 of 5000, TPD %v; want 95000 (nothing refunded)", s.TPD.Level)
		}
		l, _ = p.Acquire(ctx, pacer.Request{Tokens: 5000})
		if err := l.Settle(ctx, 7000); err != nil {
			t.Fatal(err)
		}
		if s := snap(t, p); !near(s.TPD.Level, 88_000, 2) {
			t.Errorf("NoRefund: after an overrun of 2000, TPD %v; want 88000 (overrun charged)", s.TPD.Level)
		}
		l, _ = p.Acquire(ctx, pacer.Request{Tokens: 5000})
		if err := l.Reject(ctx); err != nil {
			t.Fatal(err)
		}
		s := snap(t, p)
		if !near(s.TPD.Level, 88_000, 2) || !near(s.RPD.Level, 97, 0.01) {
			t.Errorf("after Reject: TPD %v, RPD %v; want 88000 (tokens back) and 97 (request counted)", s.TPD.Level, s.RPD.Level)
		}
		if got := l.State(); got != lease.Rejected {
			t.Errorf("State() = %v; want rejected", got)
		}
	})
}

// One overrun is charged at most one full bucket, so a wildly wrong estimate
// holds the budget back for at most a window more; and a debt is taken from
// the level as refilled to now.
func TestOverrunChargedAtMostOneBucket(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPD: 100_000}})
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, 10_000_000); err != nil {
			t.Fatal(err)
		}
		// 100,000 - 1,000 reserved - 100,000 owed (the cap), plus a few
		// tokens of refill (TPD refills 1.2 a second).
		if s := snap(t, p); !near(s.TPD.Level, -1000, 5) {
			t.Errorf("TPD level %v after an overrun of 9,999,000; want -1000 (capped at one bucket)", s.TPD.Level)
		}
	})
}

// Each Pacer measures how long its calls hold their slot, from their turn to
// their end on the Redis clock; concurrency waiters are spaced by it.
func TestMeanHoldFromEndedLeases(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 1000, Concurrency: 2}})
		if s := snap(t, p); s.MeanHold != 0 {
			t.Errorf("MeanHold before any lease ended = %v; want 0", s.MeanHold)
		}
		l, err := p.Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
		if err := l.Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if h := l.Held(); h < 50*time.Millisecond || h > 5*time.Second {
			t.Errorf("Held() = %v after holding 60ms; want about 60ms", h)
		}
		if s := snap(t, p); s.MeanHold != l.Held() {
			t.Errorf("MeanHold = %v after one lease held %v; want the same", s.MeanHold, l.Held())
		}
		c, _ := p.Acquire(ctx, pacer.Request{})
		if err := c.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if c.Held() != 0 {
			t.Errorf("a cancelled lease Held() = %v; want 0, it made no call", c.Held())
		}
	})
}
