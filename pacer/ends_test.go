package pacer_test

import (
	"context"
	"sync"
	"testing"

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
