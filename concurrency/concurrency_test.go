package concurrency

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestQueueWakesOldestFirst(t *testing.T) {
	var q Queue
	if q.Wake() {
		t.Fatal("Wake() on an empty queue = true")
	}
	a, leaveA := q.Wait()
	b, leaveB := q.Wait()
	c, leaveC := q.Wait()
	defer leaveA()
	defer leaveC()
	leaveB() // b gives up before any wake
	if !q.Wake() {
		t.Fatal("Wake() = false with waiters")
	}
	select {
	case <-a:
	default:
		t.Fatal("the oldest waiter was not woken first")
	}
	if !q.Wake() {
		t.Fatal("second Wake() = false")
	}
	select {
	case <-c:
	default:
		t.Fatal("the waiter after a leaver was not woken")
	}
	select {
	case <-b:
		t.Fatal("a waiter that left was woken")
	default:
	}
	if n := q.Len(); n != 0 {
		t.Errorf("Len() = %d; want 0", n)
	}
}

func TestQueueConcurrent(t *testing.T) {
	var q Queue
	var woken atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, leave := q.Wait()
			defer leave()
			select {
			case <-ch:
				woken.Add(1)
			case <-done:
				// Told to stop waiting; a wake that came first still counts.
				select {
				case <-ch:
					woken.Add(1)
				default:
				}
			}
		}()
	}
	for q.Len() < 100 {
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < 60; i++ {
		if !q.Wake() {
			t.Fatalf("Wake() %d = false with 100 waiters", i+1)
		}
	}
	close(done)
	wg.Wait()
	if got := woken.Load(); got != 60 {
		t.Errorf("woken = %d; want 60 (one per Wake)", got)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("Len() = %d after every waiter left; want 0", n)
	}
}

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
