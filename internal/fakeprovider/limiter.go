package fakeprovider

import "time"

// limiter enforces one limit (tokens or requests) over a window.
// Its methods are not safe for concurrent use; the Provider's lock guards it.
type limiter interface {
	// capacity is the most units that can ever be admitted at once.
	capacity() int64
	// wait returns 0 if n units fit now, otherwise the exact time until
	// they fit if nothing else is admitted meanwhile. The caller
	// guarantees n <= capacity(), so the wait is finite.
	wait(now time.Time, n int64) time.Duration
	// take admits n units; the caller has just seen wait(now, n) == 0.
	// It returns a ticket that names the admission for refund.
	take(now time.Time, n int64) (ticket int64)
	// refund gives back n units of the admission named by ticket, at
	// most what that admission still holds. Units that would have left
	// the limit by now (a bucket already full again, an admission already
	// out of the window) are not given back a second time.
	refund(now time.Time, ticket, n int64)
	// remaining is how many units would fit now.
	remaining(now time.Time) int64
	// untilFull is how long until the limit is back to its initial state
	// if nothing else is admitted: the meaning of OpenAI's reset headers.
	untilFull(now time.Time) time.Duration
}

// newLimiter returns a full limiter of the given mode.
func newLimiter(mode Mode, limit int64, window time.Duration, now time.Time) limiter {
	if mode == SlidingWindow {
		return &slidingWindow{limit: limit, window: window}
	}
	w := int64(window)
	return &tokenBucket{limit: limit, window: w, level: limit * w, last: now}
}

// tokenBucket refills at limit/window units per nanosecond up to limit.
//
// The level is kept in unit-nanoseconds (units × window) so that refill is
// elapsed × limit and the wait is a ceiling division: both exact in
// integers. With floats, waiting exactly the advertised retry delay could
// leave the bucket a rounding error short, and the simulator would refuse
// the retry it had promised to accept.
type tokenBucket struct {
	limit  int64     // units per window, also the capacity
	window int64     // nanoseconds
	level  int64     // units × window available at last
	last   time.Time // time of the last refill
}

func (b *tokenBucket) capacity() int64 { return b.limit }

func (b *tokenBucket) refill(now time.Time) {
	e := int64(now.Sub(b.last))
	if e <= 0 {
		// A clock that steps back refills nothing; keep the later mark.
		return
	}
	// After one window the bucket is full whatever the level was, and
	// capping here keeps e × limit below limit × window (checked in New).
	e = min(e, b.window)
	b.level = min(b.limit*b.window, b.level+e*b.limit)
	b.last = now
}

func (b *tokenBucket) wait(now time.Time, n int64) time.Duration {
	b.refill(now)
	deficit := n*b.window - b.level
	if deficit <= 0 {
		return 0
	}
	return time.Duration(ceilDiv(deficit, b.limit))
}

func (b *tokenBucket) take(now time.Time, n int64) int64 {
	b.refill(now)
	b.level -= n * b.window
	return 0 // a bucket does not tell its admissions apart
}

// refund adds n units back, up to the capacity: what the refill has
// already restored is not restored twice.
func (b *tokenBucket) refund(now time.Time, _, n int64) {
	b.refill(now)
	b.level = min(b.limit*b.window, b.level+n*b.window)
}

func (b *tokenBucket) remaining(now time.Time) int64 {
	b.refill(now)
	return b.level / b.window
}

func (b *tokenBucket) untilFull(now time.Time) time.Duration {
	b.refill(now)
	return time.Duration(ceilDiv(b.limit*b.window-b.level, b.limit))
}

// admission is one admitted call in a sliding window.
type admission struct {
	at time.Time
	n  int64
}

// slidingWindow counts the units admitted in the trailing window
// (now-window, now]: an admission at t stops counting at exactly t+window.
type slidingWindow struct {
	limit  int64
	window time.Duration
	queue  []admission // oldest first, from head on
	head   int
	sum    int64 // units in queue[head:]
	// base is the ticket of queue[0]: tickets number admissions from 0,
	// and trim's compaction moves base past the admissions it drops.
	base int64
}

func (s *slidingWindow) capacity() int64 { return s.limit }

// trim drops admissions that have left the window.
func (s *slidingWindow) trim(now time.Time) {
	for s.head < len(s.queue) && now.Sub(s.queue[s.head].at) >= s.window {
		s.sum -= s.queue[s.head].n
		s.head++
	}
	// Reuse the front of the slice once most of it is dead, so a long run
	// does not grow memory without bound.
	if s.head > 0 && s.head >= len(s.queue)/2 {
		s.queue = append(s.queue[:0], s.queue[s.head:]...)
		s.base += int64(s.head)
		s.head = 0
	}
}

func (s *slidingWindow) wait(now time.Time, n int64) time.Duration {
	s.trim(now)
	if s.sum+n <= s.limit {
		return 0
	}
	// Admissions leave in order, so the first moment n fits is when
	// enough of the oldest ones have left.
	left := s.sum
	for _, a := range s.queue[s.head:] {
		left -= a.n
		if left+n <= s.limit {
			return a.at.Add(s.window).Sub(now)
		}
	}
	// Unreachable while n <= limit: once every admission has left, n fits.
	return s.window
}

func (s *slidingWindow) take(now time.Time, n int64) int64 {
	s.trim(now)
	s.queue = append(s.queue, admission{at: now, n: n})
	s.sum += n
	return s.base + int64(len(s.queue)-1)
}

// refund lowers the admission's units; it keeps its place and leaves the
// window when it would have. An admission that has already left is not
// counted any more, so there is nothing to give back.
func (s *slidingWindow) refund(now time.Time, ticket, n int64) {
	s.trim(now)
	i := ticket - s.base
	if i < int64(s.head) || i >= int64(len(s.queue)) {
		return
	}
	a := &s.queue[i]
	n = min(n, a.n)
	a.n -= n
	s.sum -= n
}

func (s *slidingWindow) remaining(now time.Time) int64 {
	s.trim(now)
	return s.limit - s.sum
}

func (s *slidingWindow) untilFull(now time.Time) time.Duration {
	s.trim(now)
	if s.head == len(s.queue) {
		return 0
	}
	return s.queue[len(s.queue)-1].at.Add(s.window).Sub(now)
}

// ceilDiv returns ⌈a/b⌉ for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	// Not (a+b-1)/b: a may be close to MaxInt64.
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
