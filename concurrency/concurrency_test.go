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
			case <-time.After(2 * time.Second):
			}
		}()
	}
	for q.Len() < 100 {
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < 60; i++ {
		q.Wake()
	}
	wg.Wait()
	if got := woken.Load(); got != 60 {
		t.Errorf("woken = %d; want 60 (one per Wake)", got)
	}
}

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
