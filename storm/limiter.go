package main

import (
	"sync"
	"time"
)

// localBucket is the per-worker limiter of the per-worker mode: an
// in-process token bucket that knows only its own worker's calls. Each
// worker's bucket is set to the provider's whole limit, which is the bug the
// storm demonstrates: every bucket is right on its own, and together they
// send workers × the limit.
//
// It reserves ahead like x/time/rate's WaitN: reserve charges the tokens at
// once and says how long the caller must wait before sending, so callers of
// one bucket are served first come, first served.
type localBucket struct {
	mu       sync.Mutex
	capacity float64 // tokens
	perSec   float64 // refill, tokens per second
	level    float64 // tokens at last; negative while reservations wait
	last     time.Time
}

// newLocalBucket returns a full bucket of capacity tokens that refills
// limit tokens per window.
func newLocalBucket(capacity, limit int64, window time.Duration, now time.Time) *localBucket {
	return &localBucket{
		capacity: float64(capacity),
		perSec:   float64(limit) / window.Seconds(),
		level:    float64(capacity),
		last:     now,
	}
}

// reserve charges n tokens at now and returns how long to wait before the
// call may go: 0 if the bucket held n tokens, else the time the refill needs
// to cover the deficit.
func (b *localBucket) reserve(now time.Time, n int64) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := now.Sub(b.last); e > 0 {
		b.level = min(b.capacity, b.level+e.Seconds()*b.perSec)
		b.last = now
	}
	b.level -= float64(n)
	if b.level >= 0 {
		return 0
	}
	// Round up: waiting a hair too long costs nothing, a hair too short
	// sends a call the bucket has not yet covered.
	return time.Duration(-b.level/b.perSec*float64(time.Second)) + 1
}
