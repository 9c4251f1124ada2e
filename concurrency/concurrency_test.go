package concurrency

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeepAlive(t *testing.T) {
	var calls atomic.Int64
	stop := KeepAlive(context.Background(), 10*time.Millisecond, func(ctx context.Context) bool {
		calls.Add(1)
		return true
	})
	time.Sleep(100 * time.Millisecond)
	stop()
	n := calls.Load()
	if n < 3 {
		t.Errorf("extend ran %d times in 100ms at a 10ms interval; want several", n)
	}
	time.Sleep(30 * time.Millisecond)
	if calls.Load() != n {
		t.Error("extend ran after stop returned")
	}
	stop() // a second stop is harmless

	calls.Store(0)
	stop = KeepAlive(context.Background(), 5*time.Millisecond, func(ctx context.Context) bool {
		return calls.Add(1) < 2 // the lease is gone at the second renewal
	})
	time.Sleep(60 * time.Millisecond)
	stop()
	if got := calls.Load(); got != 2 {
		t.Errorf("extend ran %d times; want it to stop after returning false (2)", got)
	}
}
