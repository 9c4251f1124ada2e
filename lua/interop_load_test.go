package lua_test

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
)

// interopLoad runs both sides against one budget at once, then checks the
// promise on what the calls used.
//
// A give-back is exact only while its bucket stays below full: a give-back
// from a lease charged into a full bucket, or charged before the bucket
// came within the give-back of full, or before turns reserved behind it,
// returns refill that a provider's bucket, capped at its capacity, never
// had. (RPM 60 with a burst of 10: a lease charged into the full bucket,
// another call 0.5 s later, the first canceled, then ten calls: the
// bucket admits 11 within 0.5 s where 10.5 fit.) So the phase starts by
// taking the whole token bucket (kept, released), no call is canceled (the
// only give-back of a request), and the callers keep the token bucket near
// empty: it comes within a give-back (300 tokens) of full only if no call
// is admitted for 1.2 s.
// loadBurst is the token burst of the "load" budget: the drain takes it
// whole.
const loadBurst = 3000

func interopLoad(t *testing.T, w *worker, ps [2]*pacer.Pacer, cfg vconfig) {
	const phase = 3 * time.Second
	ends := []string{"settle", "settle", "settle", "settle", "settle", "settle", "settle", "settle", "release", "reject"}
	var mu sync.Mutex
	var calls []call
	drain, ny := tryGo(t, ps[0], loadBurst)
	if drain == nil {
		t.Fatalf("Go TryAcquire(%d) on the fresh budget: %v", loadBurst, ny)
	}
	if err := failRelease(context.Background(), drain); err != nil {
		t.Fatal(err)
	}
	calls = append(calls, call{Side: "go", StartUs: drain.Info().Start.UnixMicro(), EndUs: drain.Info().Start.Add(drain.Info().Held).UnixMicro(),
		How: "release", Reserved: loadBurst, Priority: "interactive"})
	w.send(map[string]any{"op": "load", "budget": "load", "seconds": phase.Seconds(), "threads": 3, "seed": 1, "ends": ends})
	ctx, cancel := context.WithTimeout(context.Background(), phase)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			p := ps[i/2]
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			prio, prioName := pacer.Interactive, "interactive"
			if i == 3 {
				prio, prioName = pacer.Batch, "batch"
			}
			for ctx.Err() == nil {
				tokens := 100 + rng.Int64N(201)
				l, err := p.Acquire(ctx, pacer.Request{Tokens: tokens, Priority: prio})
				// The Go lease does not say when a pending lease claimed its
				// slot; Acquire returned after that, and the test's Redis
				// shares this machine's clock.
				slot := time.Now().UnixMicro()
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, pacer.ErrWaitTimeout) {
						t.Errorf("Go Acquire(%d): %v", tokens, err)
					}
					continue
				}
				time.Sleep(time.Duration(20+rng.IntN(61)) * time.Millisecond)
				c := call{Side: "go", StartUs: l.Info().Start.UnixMicro(), SlotUs: slot, Reserved: tokens, WaitedMs: float64(l.Info().Waited) / 1e6, Priority: prioName}
				var err2 error
				switch c.How = ends[rng.IntN(len(ends))]; c.How {
				case "settle":
					c.Used = tokens*3/10 + rng.Int64N(tokens-tokens*3/10+1)
					err2 = l.Settle(context.Background(), c.Used)
				case "release":
					err2 = failRelease(context.Background(), l)
				case "reject":
					err2 = failReject(context.Background(), l)
				}
				if err2 != nil {
					t.Errorf("Go %s: %v", c.How, err2)
				}
				if l.Info().Held > 0 {
					c.EndUs = l.Info().Start.Add(l.Info().Held).UnixMicro()
				}
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	a := w.answer()
	if a.Error != "" {
		t.Fatalf("Python load: %s %s", a.Error, a.Message)
	}
	goCalls := len(calls) - 1
	for _, c := range a.Calls {
		c.Side = "python"
		calls = append(calls, c)
	}
	t.Logf("admitted: %d Go calls, %d Python calls", goCalls, len(a.Calls))
	if goCalls == 0 || len(a.Calls) == 0 {
		t.Fatalf("a side admitted nothing (Go %d, Python %d): the budget was not shared", goCalls, len(a.Calls))
	}
	if !slices.ContainsFunc(calls, func(c call) bool { return c.WaitedMs >= 1 }) {
		t.Errorf("no call waited: the limits never held anyone back, so the load checked nothing")
	}
	checkWindows(t, calls, cfg)
	checkInFlight(t, calls, cfg.Limits.Concurrency)
}

// checkWindows checks, for each bucket, that the calls whose turns lie in
// any interval [t, t+d] use at most a full bucket plus d's refill: in µs of
// the bucket's time, span + slack + d, plus a millisecond because both
// sides report a turn rounded up to the millisecond. A call uses its
// charge less what its end gave back (design.md: the promise).
func checkWindows(t *testing.T, calls []call, cfg vconfig) {
	t.Helper()
	slices.SortFunc(calls, func(x, y call) int { return cmp.Compare(x.StartUs, y.StartUs) })
	var buckets []wire.Bucket
	for _, r := range cfg.Rates {
		rate := r.rate()
		buckets = append(buckets, wire.NewBucket(rate.Name(), r.Burst, r.Limit, rate.Window, map[string]wire.Unit{"requests": wire.Requests, "tokens": wire.Tokens}[r.Unit]))
	}
	for _, wb := range buckets {
		used := make([]int64, len(calls))
		for i, c := range calls {
			used[i] = wb.Charge(wb.Units(c.Reserved))
			switch {
			case wb.Unit == wire.Tokens && c.How == "settle":
				used[i] -= wb.Refund(c.Reserved - c.Used)
			case wb.Unit == wire.Tokens && (c.How == "reject" || c.How == "cancel"):
				used[i] -= wb.Refund(c.Reserved)
			case wb.Unit == wire.Requests && c.How == "cancel":
				used[i] -= wb.Refund(1)
			}
		}
		for j := range calls {
			var sum int64
			for k := j; k < len(calls); k++ {
				sum += used[k]
				d := calls[k].StartUs - calls[j].StartUs
				if bound := wb.Span + wb.Slack + d + 1000; sum > bound {
					t.Errorf("%s: the calls whose turns lie in [%d, %d] (%d of them, Go and Python) use %.1f units; the bucket allows %.1f in %v",
						wb.Field, calls[j].StartUs, calls[k].StartUs, k-j+1, float64(sum)/wb.Interval, float64(bound)/wb.Interval, time.Duration(d)*time.Microsecond)
					return
				}
			}
		}
	}
}

// checkInFlight checks that no more than limit calls ran at once, from
// their turns (or, for a pending lease that queued for its slot at its
// turn, from when it took the slot) to their ends. Canceled calls never
// ran.
func checkInFlight(t *testing.T, calls []call, limit int64) {
	t.Helper()
	type edge struct {
		at    int64
		delta int64
	}
	var edges []edge
	for _, c := range calls {
		if c.How != "cancel" {
			from := max(c.StartUs, c.SlotUs)
			edges = append(edges, edge{from, 1}, edge{max(c.EndUs, from), -1})
		}
	}
	// At equal times, an end before a start: the end freed the slot first.
	slices.SortFunc(edges, func(x, y edge) int { return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.delta, y.delta)) })
	var n, most int64
	for _, e := range edges {
		if n += e.delta; n > limit {
			t.Errorf("%d calls in flight at %d µs; the limit is %d", n, e.at, limit)
			return
		}
		most = max(most, n)
	}
	t.Logf("at most %d calls in flight (limit %d)", most, limit)
}
