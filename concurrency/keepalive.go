package concurrency

import (
	"context"
	"sync"
	"time"
)

// KeepAlive calls extend every interval, in a new goroutine, until stop is
// called, ctx is done, or extend returns false (the lease is gone and cannot
// be kept; its owner finds out when it settles). A failed renewal (Redis
// briefly unreachable) should return true: the next tick tries again, and
// with an interval well below the lease TTL a few failures cost nothing.
// stop waits for the goroutine to finish, so no extend runs after stop
// returns.
//
// extend gets a context bounded by the interval: a Redis that hangs must not
// pile up renewals.
func KeepAlive(ctx context.Context, interval time.Duration, extend func(context.Context) bool) (stop func()) {
	if interval <= 0 {
		interval = time.Second
	}
	return Renew(ctx, interval, func(ctx context.Context) time.Duration {
		cctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		if !extend(cctx) {
			return -1
		}
		return interval
	})
}

// Renew calls renew in a new goroutine first from now, then again each
// delay it returns after that call began, until stop is called, ctx is
// done, or renew returns a negative delay. KeepAlive is Renew at a fixed
// interval; a renewal that retries a failure sooner (pacer's
// Lease.KeepAlive) returns a shorter delay. stop waits for the goroutine
// to finish, so no renew runs after stop returns.
func Renew(ctx context.Context, first time.Duration, renew func(context.Context) time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(max(first, 0))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			began := time.Now()
			next := renew(ctx)
			if next < 0 {
				return
			}
			t.Reset(max(time.Until(began.Add(next)), 0))
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}
