package fakeprovider

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// limiterCases are the shapes both reference tests run.
var limiterCases = []struct {
	limit  int64
	window time.Duration
}{
	{10_000, 5 * time.Second}, // the storm's provider
	{3, time.Minute},          // a small request limit
	{150_000, time.Minute},
	{7, 1300 * time.Millisecond}, // a rate that does not divide evenly
}

// schedule is a random sequence of (advance, units) steps.
func schedule(seed uint64, limit int64, window time.Duration, steps int) (adv []time.Duration, units []int64) {
	rnd := rand.New(rand.NewPCG(seed, 1))
	for range steps {
		a := time.Duration(0)
		if rnd.IntN(4) > 0 {
			a = time.Duration(rnd.Int64N(int64(window / 4)))
		}
		adv = append(adv, a)
		units = append(units, 1+rnd.Int64N(limit))
	}
	return adv, units
}

// refBucket is a token bucket in exact rationals: the oracle.
type refBucket struct {
	limit, window int64
	level         *big.Rat // tokens
	last          int64
}

func (r *refBucket) refill(now int64) {
	r.level.Add(r.level, big.NewRat((now-r.last)*r.limit, r.window))
	if cap := big.NewRat(r.limit, 1); r.level.Cmp(cap) > 0 {
		r.level = cap
	}
	r.last = now
}

// untilHas returns ⌈(n − level)·window/limit⌉ ns, the first whole
// nanosecond at which the bucket holds n.
func (r *refBucket) untilHas(n int64) int64 {
	d := new(big.Rat).Sub(big.NewRat(n, 1), r.level)
	d.Mul(d, big.NewRat(r.window, r.limit))
	q, m := new(big.Int).QuoRem(d.Num(), d.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func TestTokenBucketMatchesReference(t *testing.T) {
	for i, tc := range limiterCases {
		t.Run(fmt.Sprintf("%d_per_%v", tc.limit, tc.window), func(t *testing.T) {
			start := time.Unix(1000, 0)
			b := newLimiter(TokenBucket, tc.limit, tc.window, start)
			ref := &refBucket{limit: tc.limit, window: int64(tc.window), level: big.NewRat(tc.limit, 1)}
			adv, units := schedule(uint64(i), tc.limit, tc.window, 3000)
			var at, took []int64
			now, denied := int64(0), 0
			for s := range adv {
				now += int64(adv[s])
				n, tnow := units[s], start.Add(time.Duration(now))
				ref.refill(now)
				fits := ref.level.Cmp(big.NewRat(n, 1)) >= 0
				got := b.wait(tnow, n)
				if fits != (got == 0) {
					t.Fatalf("step %d: wait(%d) = %v, reference fits = %v (level %s)", s, n, got, fits, ref.level.FloatString(3))
				}
				if !fits {
					if want := ref.untilHas(n); int64(got) != want {
						t.Fatalf("step %d: wait(%d) = %d ns, want %d ns", s, n, got, want)
					}
					denied++
					continue
				}
				b.take(tnow, n)
				ref.level.Sub(ref.level, big.NewRat(n, 1))
				at, took = append(at, now), append(took, n)
				if got, want := b.remaining(tnow), new(big.Int).Quo(ref.level.Num(), ref.level.Denom()).Int64(); got != want {
					t.Fatalf("step %d: remaining() = %d, want %d", s, got, want)
				}
				if got, want := int64(b.untilFull(tnow)), ref.untilHas(tc.limit); got != want {
					t.Fatalf("step %d: untilFull() = %d ns, want %d ns", s, got, want)
				}
			}
			// Over any interval [t_i, t_j] the admissions stay within
			// capacity + rate·(t_j − t_i), checked in token-nanoseconds.
			for i := range at {
				var sum int64
				for j := i; j < len(at); j++ {
					sum += took[j]
					if sum*int64(tc.window) > tc.limit*int64(tc.window)+tc.limit*(at[j]-at[i]) {
						t.Fatalf("admitted %d tokens in [%d, %d] ns, over capacity + rate·t", sum, at[i], at[j])
					}
				}
			}
			if len(at) < 10 || denied < 10 {
				t.Errorf("%d admissions, %d denials; the schedule does not exercise the bucket", len(at), denied)
			}
		})
	}
}

// refSliding keeps every admission and sums by brute force: the oracle.
type refSliding struct {
	limit, window int64
	at, n         []int64
}

// sumAt is the units admitted in (tau − window, tau].
func (r *refSliding) sumAt(tau int64) int64 {
	var s int64
	for i := range r.at {
		if r.at[i] <= tau && tau-r.at[i] < r.window {
			s += r.n[i]
		}
	}
	return s
}

// firstFit is the earliest time >= now at which n more units fit.
func (r *refSliding) firstFit(now, n int64) int64 {
	if r.sumAt(now)+n <= r.limit {
		return now
	}
	best := int64(-1)
	for _, a := range r.at {
		tau := a + r.window
		if tau > now && r.sumAt(tau)+n <= r.limit && (best < 0 || tau < best) {
			best = tau
		}
	}
	return best
}

func TestSlidingWindowMatchesReference(t *testing.T) {
	for i, tc := range limiterCases {
		t.Run(fmt.Sprintf("%d_per_%v", tc.limit, tc.window), func(t *testing.T) {
			start := time.Unix(1000, 0)
			l := newLimiter(SlidingWindow, tc.limit, tc.window, start)
			ref := &refSliding{limit: tc.limit, window: int64(tc.window)}
			adv, units := schedule(uint64(100+i), tc.limit, tc.window, 1500)
			now, denied := int64(0), 0
			for s := range adv {
				now += int64(adv[s])
				n, tnow := units[s], start.Add(time.Duration(now))
				want := ref.firstFit(now, n) - now
				if got := l.wait(tnow, n); int64(got) != want {
					t.Fatalf("step %d: wait(%d) = %d ns, want %d ns", s, n, got, want)
				}
				if want > 0 {
					denied++
					continue
				}
				l.take(tnow, n)
				ref.at, ref.n = append(ref.at, now), append(ref.n, n)
				if got, want := l.remaining(tnow), tc.limit-ref.sumAt(now); got != want {
					t.Fatalf("step %d: remaining() = %d, want %d", s, got, want)
				}
			}
			// Every trailing window ends at an admission or just before
			// one leaves; checking at each admission covers the maxima.
			for _, a := range ref.at {
				if s := ref.sumAt(a); s > tc.limit {
					t.Fatalf("window ending at %d ns holds %d, over limit %d", a, s, tc.limit)
				}
			}
			if len(ref.at) < 10 || denied < 10 {
				t.Errorf("%d admissions, %d denials; the schedule does not exercise the window", len(ref.at), denied)
			}
		})
	}
}

func TestTokenBucketClockSteppingBack(t *testing.T) {
	start := time.Unix(1000, 0)
	b := newLimiter(TokenBucket, 10, time.Second, start)
	b.take(start, 10)
	if got, want := b.wait(start.Add(-time.Hour), 1), 100*time.Millisecond; got != want {
		t.Errorf("wait(1) an hour in the past = %v, want %v (no refill, no panic)", got, want)
	}
}

func TestCeilDiv(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{0, 3, 0}, {1, 3, 1}, {3, 3, 1}, {4, 3, 2},
		{1<<63 - 1, 2, 1 << 62}, // no overflow near MaxInt64
	} {
		if got := ceilDiv(tc.a, tc.b); got != tc.want {
			t.Errorf("ceilDiv(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
