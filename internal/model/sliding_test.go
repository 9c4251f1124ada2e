package model

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// slidingTokens is 1000 tokens in any second, strictly, beside 100
// requests in any 10 s.
var slidingTokens = Config{Rates: []Rate{
	{Unit: wire.Tokens, Cap: 1000, Window: 1000, Sliding: true},
	{Unit: wire.Requests, Cap: 100, Window: 10_000, Sliding: true},
}}

// admission is one call in the log the promise is checked against: its
// turn (ms) and the units it took of each rate, less what it gave back.
type admission struct {
	id     string
	turn   int64
	req    Request
	units  []int64
	settle bool
}

// The sliding window's promise, on the model alone: whatever arrives,
// waits, reserves later turns, gives back or owes, what the calls whose
// turns lie in any window of a rate's length take never exceeds its
// limit. Checked against a log of admissions kept here, not against the
// model's counts.
func TestSlidingPromise(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var b Budget
		var log []*admission
		us := int64(t0) * 1000
		for i := range 2000 {
			us += rng.Int64N(40_000) // up to 40 ms between calls
			req := Request{Tokens: rng.Int64N(400)}
			batch := rng.IntN(4) == 0
			cs := slidingTokens.Charges(req, batch, 200)
			id := "c" + strconv.Itoa(i)
			rep := b.Acquire(us, Call{ID: id, Batch: batch, MaxWait: rng.Int64N(3000), TTL: 60_000, Spacing: 1, Charges: cs})
			if rep.Code == 1 {
				a := &admission{id: id, turn: us/1000 + rep.Wait, req: req}
				for _, c := range cs {
					a.units = append(a.units, c.Charge)
				}
				log = append(log, a)
			}
			// Now and then a lease ends: given back (fewer tokens, or
			// a cancel) or owing (more).
			if len(log) > 0 && rng.IntN(3) == 0 {
				a := log[rng.IntN(len(log))]
				if a.settle {
					continue
				}
				a.settle = true
				how, used := Settled, Usage{Tokens: rng.Int64N(2 * (a.req.Tokens + 1))}
				if rng.IntN(4) == 0 {
					how = Canceled
				}
				ds := slidingTokens.Deltas(how, a.req, a.turn, used)
				if b.Settle(us, a.id, 0, 0, 0, ds) == 1 {
					for _, d := range ds {
						if d.Us < 0 {
							k := slices.Index(slidingTokens.Fields(), d.Field)
							a.units[k] += d.Us
						}
					}
				}
			}
		}
		for k, r := range slidingTokens.Rates {
			slices.SortFunc(log, func(x, y *admission) int { return int(x.turn - y.turn) })
			for i := range log {
				var sum int64
				for j := i; j < len(log) && log[j].turn < log[i].turn+r.Window; j++ {
					if sum += log[j].units[k]; sum > r.Cap {
						t.Fatalf("seed %d: %s: the calls whose turns lie in [%d, %d] ms take %d; the limit is %d in any %d ms",
							seed, r.Name(), log[i].turn, log[j].turn, sum, r.Cap, r.Window)
					}
				}
			}
		}
	}
}

// Give-backs that empty a sliding window leave nothing stored: the next
// call fits now and is counted (issue 12's fuzzing found the scripts
// keeping a bare base past now, which put the next call at a later turn
// and then dropped its count).
func TestSlidingEmptied(t *testing.T) {
	var b Budget
	us := int64(t0) * 1000
	call := func(id string, tokens, maxWait int64) Reply {
		return b.Acquire(us, Call{ID: id, MaxWait: maxWait, TTL: 60_000, Spacing: 1, Charges: slidingTokens.Charges(Request{Tokens: tokens}, false, 0)})
	}
	if r := call("a", 800, 0); r.Code != 1 || r.Wait != 0 {
		t.Fatalf("a = %+v; want admitted now", r)
	}
	r := call("b", 500, 60_000)
	if r.Code != 1 || r.Wait == 0 {
		t.Fatalf("b = %+v; want a later turn", r)
	}
	for _, l := range []struct {
		id   string
		turn int64
		n    int64
	}{{"a", t0, 800}, {"b", t0 + r.Wait, 500}} {
		if got := b.Settle(us, l.id, us, 0, 0, slidingTokens.Deltas(Canceled, Request{Tokens: l.n}, l.turn, Usage{})); got != 1 {
			t.Fatalf("cancel %s = %d", l.id, got)
		}
	}
	tok := slidingTokens.Rates[0].Field()
	if v := b.Value(tok); v != "" {
		t.Errorf("tokens after both canceled = %q; want \"\"", v)
	}
	if r := call("c", 600, 60_000); r.Code != 1 || r.Wait != 0 {
		t.Fatalf("c = %+v; want admitted now", r)
	}
	if r := call("d", 600, 0); r.Code != 0 {
		t.Errorf("d = %+v; want denied: c's 600 are counted", r)
	}
}

// A debt is counted in the current sub-window even when the window's only
// count is a turn reserved ahead.
func TestSlidingDebtBeforeTurn(t *testing.T) {
	var b Budget
	us := int64(t0) * 1000
	tokOnly := Config{Rates: slidingTokens.Rates[:1]}
	call := func(id string, tokens, maxWait int64) Reply {
		return b.Acquire(us, Call{ID: id, MaxWait: maxWait, TTL: 60_000, Spacing: 1, Charges: tokOnly.Charges(Request{Tokens: tokens}, false, 0)})
	}
	call("a", 800, 0)
	r := call("b", 500, 60_000)
	b.Settle(us, "a", us, 0, 0, tokOnly.Deltas(Canceled, Request{Tokens: 800}, t0, Usage{}))
	b.Settle(us, "b", us, 0, 0, tokOnly.Deltas(Settled, Request{Tokens: 500}, t0+r.Wait, Usage{Tokens: 800}))
	g := sub(tokOnly.Fields()[0])
	cur := int64(t0) * 1000 / g
	j := (int64(t0) + r.Wait) * 1000 / g
	// b's turn lies a window and a sub-window ahead: the ring holds it
	// alone, and the debt, before the ring, is folded.
	w := wire.SlidingState{Head: j, Last: j, Current: 500, Folded: 300, FoldedLast: cur}
	if j != cur+parts+1 {
		t.Fatalf("b's turn is sub-window %d; want %d", j, cur+parts+1)
	}
	if want, got := w.Header(), b.Value(tokOnly.Fields()[0]); got != want {
		t.Errorf("after the debt: %q; want %q", got, want)
	}
}

// A window that folds counts out of its ring (a turn reserved more than a
// window ahead) gives them back, and once the far turn is canceled, the
// next call takes a turn before it again: the folded counts keep it only
// as long as they are in its window.
func TestSlidingFoldedCanceled(t *testing.T) {
	var b Budget
	us := int64(t0) * 1000
	tokOnly := Config{Rates: slidingTokens.Rates[:1]}
	call := func(id string, tokens, maxWait int64) Reply {
		return b.Acquire(us, Call{ID: id, MaxWait: maxWait, TTL: 60_000, Spacing: 1, Charges: tokOnly.Charges(Request{Tokens: tokens}, false, 0)})
	}
	call("a", 600, 0)
	r := call("b", 500, 60_000) // a's 600 must roll out first
	if r.Code != 1 || r.Wait == 0 {
		t.Fatalf("b = %+v; want a later turn", r)
	}
	b.Settle(us, "a", us, 0, 0, tokOnly.Deltas(Settled, Request{Tokens: 600}, t0, Usage{Tokens: 400}))
	if got := b.windows[tokOnly.Fields()[0]]; got.folded != 400 {
		t.Fatalf("after a's give-back: %+v; want 400 folded", got)
	}
	b.Settle(us, "b", us, 0, 0, tokOnly.Deltas(Canceled, Request{Tokens: 500}, t0+r.Wait, Usage{}))
	// Only a's 400 are left, folded: a call of 600 fits now (not behind
	// b's canceled turn), and one more waits until sub-window cur rolls
	// out of the window, 65 sub-windows of 15.625 ms on.
	if r := call("c", 600, 0); r.Code != 1 || r.Wait != 0 {
		t.Errorf("c = %+v; want admitted now", r)
	}
	if r := call("d", 100, 60_000); r.Code != 1 || r.Wait != 1016 {
		t.Errorf("d = %+v; want a turn when a's sub-window rolls out, in 1016 ms", r)
	}
}
