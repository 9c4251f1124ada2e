package lua_test

import (
	"cmp"
	"slices"
	"strings"

	"github.com/llmpacer/llmpacer/internal/model"
)

// The promises the budget makes, checked on the model, which the scripts
// match step by step. A clock that steps back voids them (an expired lease
// comes back to life), so such runs are not checked.

// checkBound checks the rate promise, whatever order give-backs arrive
// in: what the calls whose turn falls in any interval [t, t+d] use of a
// bucket never exceeds a full bucket plus d's refill. In µs of the
// bucket's time: the span (and its slack) plus d. Calls that overrun their
// reservation count their reservation: a debt is charged after the fact.
func (r *runner) checkBound() {
	for i, bk := range r.sc.buckets {
		if bk.Cap == 0 {
			continue
		}
		wb := bk.Wire(i)
		calls := slices.Clone(r.leases)
		slices.SortFunc(calls, func(x, y *lease) int { return cmp.Compare(x.turn, y.turn) })
		for j := range calls {
			var sum int64
			for k := j; k < len(calls); k++ {
				sum += calls[k].used[i]
				if bound := wb.Span + wb.Slack + calls[k].turn - calls[j].turn; sum > bound {
					r.fail("%s: the calls whose turns lie in [%d, %d] use %d µs of the bucket; bound %d (span %d + slack %d + %d)",
						wb.Field, calls[j].turn, calls[k].turn, sum, bound, wb.Span, wb.Slack, calls[k].turn-calls[j].turn)
				}
			}
		}
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
// before it.
func (r *runner) overtook(id string, score int64, queue []entry) {
	for _, e := range queue {
		if model.IsBatch(e.score) == model.IsBatch(score) && e.score < score {
			r.fail("%s (score %d) got a slot before %s (score %d), queued earlier", id, score, e.id, e.score)
		}
	}
}
