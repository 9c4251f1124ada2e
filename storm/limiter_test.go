package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

// refBucket is the reference the local limiter is checked against: the same
// bucket in exact integer arithmetic, its level kept in token-nanoseconds
// (tokens × window) as fakeprovider's limiter keeps it, so that refill and
// waits involve no rounding at all.
type refBucket struct {
	capacity, limit, window int64 // window in ns
	level                   int64 // tokens × window; negative while reservations wait
	last                    time.Time
}

func (b *refBucket) reserve(now time.Time, n int64) time.Duration {
	if e := int64(now.Sub(b.last)); e > 0 {
		b.level = min(b.capacity*b.window, b.level+e*b.limit)
		b.last = now
	}
	b.level -= n * b.window
	if b.level >= 0 {
		return 0
	}
	return time.Duration((-b.level + b.limit - 1) / b.limit) // ceil
}

func TestLocalBucketMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		capacity, limit, maxReq int64
		window                  time.Duration
	}{
		{"default", 10_000, 10_000, 3_000, 5 * time.Second},
		{"small burst", 1_000, 10_000, 1_000, 5 * time.Second},
		{"sped up", 10_000, 10_000, 2_000, 50 * time.Millisecond},
		{"minute", 200_000, 200_000, 50_000, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			start := time.Unix(1_700_000_000, 0)
			got := newLocalBucket(tc.capacity, tc.limit, tc.window, start)
			want := &refBucket{capacity: tc.capacity, limit: tc.limit, window: int64(tc.window), level: tc.capacity * int64(tc.window), last: start}
			now := start
			for i := range 2000 {
				now = now.Add(time.Duration(rng.Int64N(int64(tc.window) / 20)))
				n := 1 + rng.Int64N(tc.maxReq)
				g, w := got.reserve(now, n), want.reserve(now, n)
				// The float bucket may wait at most a microsecond longer,
				// and never less, than the exact one.
				if g < w || g > w+time.Microsecond {
					t.Fatalf("step %d: reserve(+%v, %d) = %v, want %v", i, now.Sub(start), n, g, w)
				}
			}
		})
	}
}

// Each bucket admits its capacity at once and then its limit per window:
// the property that makes six of them send six times the limit.
func TestLocalBucketBurstThenRate(t *testing.T) {
	start := time.Unix(0, 0)
	b := newLocalBucket(10_000, 10_000, 5*time.Second, start)
	for i := range 10 {
		if d := b.reserve(start, 1000); d != 0 {
			t.Fatalf("call %d of the first burst waits %v, want 0", i+1, d)
		}
	}
	if d := b.reserve(start, 1000); d < 500*time.Millisecond || d > 500*time.Millisecond+time.Microsecond {
		t.Errorf("11th call waits %v, want 500ms (1,000 tokens at 2,000 per second)", d)
	}
	if d := b.reserve(start.Add(time.Second), 1000); d != 0 {
		t.Errorf("call after 1s waits %v, want 0 (the reservation before it ends at 0.5s)", d)
	}
}
