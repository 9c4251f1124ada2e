package pacer_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// A sliding rate admits its limit, then says exactly when the oldest of
// what it counted rolls out. The window is 10 s: on a real Redis a stall
// of a second between the first call and the sixth must not let the
// first roll out.
func TestSlidingAdmitsItsLimitThenWaits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		r := pacer.Rate{Unit: pacer.Requests, Limit: 5, Window: 10 * time.Second, Sliding: true}
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{r}})
		c := newClock(b)
		began := time.Now()
		for i := range 5 {
			if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
				t.Fatalf("call %d = %v", i, err)
			}
		}
		_, err := p.TryAcquire(ctx, pacer.Request{})
		ny := notYet(t, "the sixth call", err)
		// The first call leaves the window 10 s after it was counted (a
		// 64th more at most), whenever the sixth asks.
		least := 10*time.Second - elapsed(began) - 20*time.Millisecond
		if ny.Limit != "requests/10s" || retryAfter(ny) < least || retryAfter(ny) > 10*time.Second+10*time.Second/64+time.Millisecond {
			t.Fatalf("%+v; want requests/10s and %v to 10.16s", *ny, least)
		}
		if b.Mini == nil {
			return
		}
		c.advance(retryAfter(ny))
		if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Errorf("a call at the time it was given = %v", err)
		}
	})
}

// admission is one admitted call in the independent log: its turn in ms on
// the Redis clock, as the budget counted it, and its tokens.
type admission struct {
	turn   int64
	tokens int64
}

// maxWindow returns the most tokens the log holds in any window of w ms
// (a window (t - w, t] ending at an admission holds the most).
func maxWindow(log []admission, w int64) int64 {
	sort.Slice(log, func(i, j int) bool { return log[i].turn < log[j].turn })
	var most, sum int64
	lo := 0
	for hi := range log {
		sum += log[hi].tokens
		for log[lo].turn <= log[hi].turn-w {
			sum -= log[lo].tokens
			lo++
		}
		most = max(most, sum)
	}
	return most
}

// Many Pacers and goroutines waiting their turns never put more than the
// limit in any window, checked against a log of every admission, while a
// bucket limit beside it is charged all or nothing.
func TestSlidingNeverExceedsAnyWindow(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		// Each lane waits out ~2 s of demand and the turns reserved past
		// it; the lanes do so side by side, each on its own budget name.
		t.Parallel()
		ctx := context.Background()
		const limit, window = 1500, time.Second
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100_000},
			Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: limit, Window: window, Sliding: true}}}
		ps := newPacers(t, b, 4, cfg)
		var mu sync.Mutex
		var log []admission
		var wg sync.WaitGroup
		stop := time.Now().Add(2 * time.Second)
		for i, p := range ps {
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(i), uint64(g)))
					for time.Now().Before(stop) {
						n := 50 + rng.Int64N(400)
						l, err := p.Acquire(ctx, pacer.Request{Tokens: n, MaxWait: 30 * time.Second})
						if err != nil {
							t.Errorf("Acquire = %v", err)
							return
						}
						mu.Lock()
						log = append(log, admission{l.Info().Start.UnixMilli(), n})
						mu.Unlock()
						if err := l.Settle(ctx, n); err != nil {
							t.Errorf("Settle = %v", err)
						}
					}
				}()
			}
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		var total int64
		for _, a := range log {
			total += a.tokens
		}
		if most := maxWindow(log, window.Milliseconds()); most > limit {
			t.Errorf("a window of %v held %d tokens; the limit is %d", window, most, limit)
		}
		// The budget ran at its limit, not far below: over 2 s of demand
		// far above it, at least a window and a half's worth.
		if total < 3*limit/2 {
			t.Errorf("%d tokens admitted in 2 s; want at least %d", total, 3*limit/2)
		}
	})
}

// A refund comes off the sub-window the call was counted in: its room is
// back within the window.
func TestSlidingRefund(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t),
			Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 1000, Window: time.Minute, Sliding: true}}})
		newClock(b)
		l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 800})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 500}); !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Fatalf("500 more = %v; want ErrWaitTimeout", err)
		}
		if err := l.Settle(ctx, 300); err != nil {
			t.Fatal(err)
		}
		if s := snap(t, p); len(s.Rates) != 1 || s.Rates[0].Level != 700 {
			t.Fatalf("Snapshot.Rates = %+v; want 700 left", s.Rates)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 500}); err != nil {
			t.Errorf("500 after 500 came back = %v", err)
		}
	})
}

// Memory stays bounded whatever the call rate: the counts cover one window
// and what is reserved ahead.
func TestSlidingMemoryBounded(t *testing.T) {
	t.Parallel()
	b := redistest.Mini(t)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 1_000_000, Window: time.Second, Sliding: true}}})
	c := newClock(b)
	// 15 ms a call, below a sub-window's 15.625 ms: every sub-window of
	// six windows gets a call.
	for range 400 {
		if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		}
		c.advance(15 * time.Millisecond)
	}
	// The rate's header and its four ring fields: a few numbers and 64
	// counts of 9 characters, whatever the traffic.
	var bytes, fields int
	for _, k := range b.Mini.Keys() {
		if strings.HasSuffix(k, ":s") {
			fs, _ := b.Mini.HKeys(k)
			for _, f := range fs {
				if strings.HasPrefix(f, "~") {
					bytes += len(b.Mini.HGet(k, f))
					fields++
				}
			}
		}
	}
	if fields == 0 || fields > 5 || bytes > 64*9+4*17 {
		t.Errorf("after 400 calls over 6 s the rate keeps %d fields of %d bytes; want at most 5 and %d", fields, bytes, 64*9+4*17)
	}
}

// A value of the format before this one (decimal counts from a base, -n
// for n sub-windows without one) is read the safe way: every count not
// rolled out stays counted, whole, until the last of them rolls out; then
// the rate is as new, stored in the new format.
func TestSlidingUpgradeFromDecimalCounts(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	r := pacer.Rate{Unit: pacer.Requests, Limit: 10, Window: time.Second, Sliding: true}
	p := newPacer(t, b, pacer.Config{Rates: []pacer.Rate{r}})
	c := newClock(b)
	const g = 15625 // µs a sub-window: 1 s / 64
	field := "~15625:requests/1s"
	cur := c.now.UnixMilli() * 1000 / g
	// 3 calls 70 sub-windows ago (rolled out), 4 in the last sub-window
	// and 2 in the current one.
	b.Mini.HSet(pacer.Keys(p)[0], field, strconv.FormatInt(cur-71, 10)+" 3 -69 4 2")
	for i := range 4 {
		if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatalf("call %d of the 4 that fit beside the 6 counted = %v", i, err)
		}
	}
	_, err := p.TryAcquire(ctx, pacer.Request{})
	ny := notYet(t, "an eleventh call", err)
	// The old counts are folded in place of the current sub-window (the
	// latest of them): they leave the window 65 sub-windows on.
	if retryAfter(ny) < 985*time.Millisecond || retryAfter(ny) > 1016*time.Millisecond {
		t.Errorf("%+v; want to wait until sub-window cur rolls out, 0.985 to 1.016 s", *ny)
	}
	v := b.Mini.HGet(pacer.Keys(p)[0], field)
	if !strings.Contains(v, ":") {
		t.Errorf("after a write the field is %q; want the new format", v)
	}
	c.advance(retryAfter(ny))
	for i := range 10 {
		if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatalf("call %d of a fresh window = %v", i, err)
		}
	}
}

// A sliding rate has no burst.
func TestSlidingInvalid(t *testing.T) {
	b := redistest.Mini(t)
	_, err := pacer.New(b.Client(t), pacer.Config{Name: "x", Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 10, Window: time.Minute, Burst: 5, Sliding: true}}})
	if !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("a sliding rate with a burst: New = %v; want ErrInvalid", err)
	}
}
