package concurrency

import "sync"

// Queue is a FIFO of goroutines waiting for a slot. A waiter sleeps on the
// channel from Wait until Wake reaches it or its own timer fires, whichever
// is first. The zero value is ready to use; a Queue is safe for simultaneous
// use by multiple goroutines.
type Queue struct {
	mu      sync.Mutex
	waiters []*waiter
}

type waiter struct {
	ch   chan struct{}
	done bool
}

// Wait enqueues the caller. The returned channel is closed when Wake picks
// this waiter; leave must be called once the caller stops waiting, woken or
// not, so that a later Wake does not go to a goroutine that left.
func (q *Queue) Wait() (wake <-chan struct{}, leave func()) {
	w := &waiter{ch: make(chan struct{})}
	q.mu.Lock()
	q.waiters = append(q.waiters, w)
	q.mu.Unlock()
	return w.ch, func() { q.leave(w) }
}

func (q *Queue) leave(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return
		}
	}
}

// Wake wakes the oldest waiter, if any, and reports whether there was one.
// One slot freed means one waiter should try again; waking them all would
// send a burst of calls to Redis for a single slot.
func (q *Queue) Wake() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		return false
	}
	w := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	w.done = true
	close(w.ch)
	return true
}

// Len reports how many goroutines are waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}
