package concurrency

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after a minute: a
// bound on a stall, not on speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// Renew waits the delay each call returns, counted from when it began,
// and stops at a negative one. A first call returning an hour, then none
// after it: the delay is honoured, not a fixed tick's.
func TestRenewFollowsTheDelaysReturned(t *testing.T) {
	var calls atomic.Int64
	stop := Renew(context.Background(), 0, func(ctx context.Context) time.Duration {
		if calls.Add(1) == 1 {
			return time.Millisecond // soon: a failure tried again
		}
		return time.Hour
	})
	waitFor(t, "renew ran twice", func() bool { return calls.Load() >= 2 })
	time.Sleep(30 * time.Millisecond)
	stop()
	if got := calls.Load(); got != 2 {
		t.Errorf("renew ran %d times; want 2: the second asked for an hour", got)
	}
	calls.Store(0)
	stop = Renew(context.Background(), 0, func(ctx context.Context) time.Duration {
		calls.Add(1)
		return -1
	})
	waitFor(t, "renew ran", func() bool { return calls.Load() >= 1 })
	time.Sleep(30 * time.Millisecond)
	stop()
	if got := calls.Load(); got != 1 {
		t.Errorf("renew ran %d times after returning a negative delay; want 1", got)
	}
}

// KeepAlive keeps calling extend until stopped, and never after stop
// returns or after extend reports the lease gone. The test waits for the
// calls it expects instead of counting calls in a fixed time: on a loaded
// machine a 10 ms ticker may fire a few times a second.
func TestKeepAlive(t *testing.T) {
	var calls atomic.Int64
	stop := KeepAlive(context.Background(), 10*time.Millisecond, func(ctx context.Context) bool {
		calls.Add(1)
		return true
	})
	waitFor(t, "extend ran 3 times", func() bool { return calls.Load() >= 3 })
	stop()
	n := calls.Load()
	time.Sleep(30 * time.Millisecond) // three intervals
	if calls.Load() != n {
		t.Error("extend ran after stop returned")
	}
	stop() // a second stop is harmless

	calls.Store(0)
	stop = KeepAlive(context.Background(), 5*time.Millisecond, func(ctx context.Context) bool {
		return calls.Add(1) < 2 // the lease is gone at the second renewal
	})
	waitFor(t, "extend ran twice", func() bool { return calls.Load() >= 2 })
	time.Sleep(30 * time.Millisecond) // six intervals
	stop()
	if got := calls.Load(); got != 2 {
		t.Errorf("extend ran %d times; want it to stop after returning false (2)", got)
	}
}
