package lua_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/llmpacer/llmpacer/internal/model"
)

// The promises the budget makes, checked on the model, which the scripts
// match step by step. A clock that steps back voids them (an expired lease
// comes back to life), so such runs are not checked.

// checkBound checks the rate promise of every bucket of rates, over the
// calls ls (a tenant's own rates over its calls alone), whatever order
// give-backs arrive in: what the calls whose turn falls in any interval
// [t, t+d] use of a bucket never exceeds a full bucket plus d's refill. In
// µs of the bucket's time: the span (and its slack) plus d. Calls that
// overrun their reservation count their reservation: a debt is charged
// after the fact.
func (r *runner) checkBound(rates []model.Rate, ls []*lease) {
	for _, rt := range rates {
		if rt.Sliding {
			continue
		}
		wb := rt.Wire()
		calls := slices.Clone(ls)
		slices.SortFunc(calls, func(x, y *lease) int { return cmp.Compare(x.turn, y.turn) })
		for j := range calls {
			var sum int64
			for k := j; k < len(calls); k++ {
				sum += calls[k].used[wb.Field]
				if bound := wb.Span + wb.Slack + calls[k].turn - calls[j].turn; sum > bound {
					r.fail("%s: the calls whose turns lie in [%d, %d] use %d µs of the bucket; bound %d (span %d + slack %d + %d)",
						wb.Field, calls[j].turn, calls[k].turn, sum, bound, wb.Span, wb.Slack, calls[k].turn-calls[j].turn)
				}
			}
		}
	}
}

// checkSliding checks the promise of each sliding window of rates against
// the calls ls, from the log of
// admissions the runner keeps (each call's turn, as its caller knows it,
// and its units less what it gave back), not against the counts the model
// and the scripts keep: what is admitted in any window of the rate's
// length, starting anywhere, never exceeds its limit. Windows starting at
// an admission's turn are the ones to check: any other holds no more than
// the one starting at its first turn.
func (r *runner) checkSliding(rates []model.Rate, ls []*lease) {
	for _, rt := range rates {
		if !rt.Sliding {
			continue
		}
		f := rt.Field()
		var calls []*lease
		for _, l := range ls {
			if l.used[f] > 0 {
				calls = append(calls, l)
			}
		}
		slices.SortFunc(calls, func(x, y *lease) int { return cmp.Compare(x.turnMs, y.turnMs) })
		for j := range calls {
			var sum int64
			for k := j; k < len(calls) && calls[k].turnMs < calls[j].turnMs+rt.Window; k++ {
				sum += calls[k].used[f]
				if sum > rt.Cap {
					r.fail("%s: the calls whose turns lie in [%d, %d] ms, within one window of %d ms, take %d units; the limit is %d",
						f, calls[j].turnMs, calls[k].turnMs, rt.Window, sum, rt.Cap)
				}
			}
		}
	}
}

// checkSlidingWait checks that a call a sliding window made wait learned
// the exact time. waits are, for each sliding rate, its own wait (µs)
// read before the call: at the call, at its turn, and a ms before. The
// reply's wait is the first, rounded up to a ms; at the turn the rate has
// room for the call, a ms before not. It holds where a sub-window spans a
// ms or more (on the compressed real lane it may not).
func (r *runner) checkSlidingWait(c acquireArgs, us int64, rep model.Reply, waits map[string][3]int64) {
	if !strings.HasPrefix(rep.Reason, "~") || rep.Wait == 0 || r.back || c.batch {
		return
	}
	var g int64
	if _, err := fmt.Sscanf(rep.Reason, "~%d:", &g); err != nil || g < 1000 {
		return
	}
	r.seen["sliding exact wait"]++
	w := waits[rep.Reason]
	if (w[0]+999)/1000 != rep.Wait || w[1] != 0 || w[2] == 0 {
		r.fail("acquire %+v at %d µs waits %d ms for %s; that rate alone waits %d µs then, %d µs at the turn, %d µs a ms before",
			c, us, rep.Wait, rep.Reason, w[0], w[1], w[2])
	}
}

// checkSlots checks, after each step, the slot promises: never more slots
// held than the limit; and first come, first served: a waiter the step
// handed a slot (or otherwise took out of the queue) is one that no waiter
// of its priority left in the queue came before. r.before is the queue
// before the step.
func (r *runner) checkSlots() {
	before := r.before
	msgs := r.m.Published()
	r.published = append(r.published, msgs...)
	for _, msg := range msgs {
		r.handed(msg)
	}
	if r.sc.conc == 0 || r.back {
		return
	}
	if held := r.m.InFlight(r.last); held > r.sc.conc {
		r.fail("%d slots held; the limit is %d", held, r.sc.conc)
	}
	after := r.queued()
	for _, msg := range msgs {
		for _, e := range strings.Fields(msg) {
			id, _, _ := strings.Cut(e, ":")
			i := slices.IndexFunc(before, func(e entry) bool { return e.id == id })
			if i < 0 {
				r.fail("handed %s a slot, which was not queued", id)
			}
			r.overtook(id, before[i].score, after)
		}
	}
}

// checkTaker checks that a call that took a slot itself came before every
// waiter of its priority still queued: a waiter that queued is never
// overtaken by a later one.
func (r *runner) checkTaker(c acquireArgs, us int64) {
	if r.back {
		return
	}
	ticket := c.ticket
	if ticket == 0 {
		ticket = us
	}
	score := model.QueueScore(ticket, c.batch)
	// A caller already queued (a retry whose first reply was lost) is
	// placed at its entry.
	if i := slices.IndexFunc(r.before, func(e entry) bool { return e.id == c.id }); i >= 0 {
		score = r.before[i].score
	}
	r.overtook(c.id, score, r.queued())
}

// overtook fails if a waiter in queue of the same priority as score came
// before it. A tenant's waiter told to take the slot it is owed is not
// overtaken: that slot is kept for it.
func (r *runner) overtook(id string, score int64, queue []entry) {
	for _, e := range queue {
		if model.IsBatch(e.score) == model.IsBatch(score) && e.score < score && !r.m.Owed(e.id) {
			r.fail("%s (score %d) got a slot before %s (score %d), queued earlier", id, score, e.id, e.score)
		}
	}
}
