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
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				cctx, ccancel := context.WithTimeout(ctx, interval)
				alive := extend(cctx)
				ccancel()
				if !alive {
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}
