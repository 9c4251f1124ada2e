package model

import (
	"cmp"
	"slices"
	"strings"
)

// The scripts' constants for slots (see prelude.lua).
const (
	pending     = 1_000_000_000_000_000 // PENDING: a pending lease's score is this plus its expiry
	batchOffset = 1 << 52               // BATCH: added to a batch waiter's ticket
	claimMs     = 1000                  // CLAIM: how long a grant keeps a slot, ms
	maxGive     = 100                   // MAXGIVE: the most grants one script makes
)

// grant returns the lease set member of a grant for waiter id.
func grant(id string) string { return "g:" + id }

// entry is a member of a sorted set and its score.
type entry struct {
	id    string
	score int64
}

// sorted returns the entries of set for which keep holds, in a sorted
// set's order: by score, then by member as bytes.
func sorted(set map[string]int64, keep func(int64) bool) []entry {
	var es []entry
	for id, s := range set {
		if keep(s) {
			es = append(es, entry{id, s})
		}
	}
	slices.SortFunc(es, func(x, y entry) int {
		return cmp.Or(cmp.Compare(x.score, y.score), strings.Compare(x.id, y.id))
	})
	return es
}

// inFlight counts the slots held at now: leases and grants whose expiry is
// after now, pending leases left out (ZCOUNT leases (now LIVE).
func (b *Budget) inFlight(now int64) int64 {
	var n int64
	for _, e := range b.leases {
		if e > now && e < pending {
			n++
		}
	}
	return n
}

// ahead counts the waiters queued before score.
func (b *Budget) ahead(score int64) int64 {
	var n int64
	for _, s := range b.queue {
		if s < score {
			n++
		}
	}
	return n
}

// hand mirrors prelude.lua's hand: it gives free slots (live held) to the
// queue's first waiters in order. The caller me (score mine; "" for none)
// takes its slot itself, at its own entry if it is queued, or else placed
// by its score after any waiter of the same score. Batch waiters get one
// only while fewer than bslots are held. Each other waiter gets a grant.
// It reports whether the caller got a slot.
func (b *Budget) hand(now, free, live, bslots int64, me string, mine int64) bool {
	heads := sorted(b.queue, func(int64) bool { return true })
	heads = heads[:min(int64(len(heads)), free)]
	took, seen := false, false
	var names []string
	i, given := 0, int64(0)
	for given < free {
		has := i < len(heads)
		var h entry
		if has {
			h = heads[i]
		}
		own := me != "" && has && h.id == me
		seen = seen || own
		if own && took {
			i++
			continue
		}
		caller := me != "" && !took && (own || !has || mine < h.score)
		if !caller && !has {
			break
		}
		score := h.score
		if caller && !own {
			score = mine
		}
		if score >= batchOffset && live+given >= bslots {
			break
		}
		given++
		if caller {
			took = true
			if own {
				i++
			}
			continue
		}
		if b.leases == nil {
			b.leases = make(map[string]int64)
		}
		b.leases[grant(h.id)] = now + claimMs
		names = append(names, h.id)
		i++
	}
	for _, id := range names {
		delete(b.queue, id)
	}
	if took && seen {
		delete(b.queue, me)
	}
	if len(names) > 0 {
		b.published = append(b.published, strings.Join(names, " "))
	}
	return took
}

// dispatch mirrors prelude.lua's dispatch: the slots free at now go to the
// queue's head.
func (b *Budget) dispatch(now, limit, bslots int64) {
	if len(b.queue) == 0 {
		return
	}
	live := b.inFlight(now)
	if free := min(limit-live, maxGive); free > 0 {
		b.hand(now, free, live, bslots, "", 0)
	}
}

// reap removes up to maxReap leases (and grants) whose expiry is at or
// before now-reapAfter, in the sorted set's order, as acquire.lua's
// ZREMRANGEBYRANK does; and up to maxReap pending leases whose expiry is.
func (b *Budget) reap(now int64) {
	for _, keep := range []func(int64) bool{
		func(s int64) bool { return s <= now-reapAfter },
		func(s int64) bool { return s >= pending && s <= pending+now-reapAfter },
	} {
		es := sorted(b.leases, keep)
		for _, e := range es[:min(len(es), maxReap)] {
			delete(b.leases, e.id)
		}
	}
}

// Published returns the messages the scripts published since the last
// call (each the ids granted a slot by one script, space-separated), and
// forgets them.
func (b *Budget) Published() []string {
	p := b.published
	b.published = nil
	return p
}

// Sets returns copies of the lease set (leases, pending leases as
// PENDING + expiry, grants as g:<id>) and the slot queue, members to
// scores, as the scripts keep them (without the sentinels).
func (b *Budget) Sets() (leases, queue map[string]int64) {
	return maps(b.leases), maps(b.queue)
}

func maps(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Queued returns the waiters in the slot queue in order, with their scores.
func (b *Budget) Queued() (ids []string, scores []int64) {
	for _, e := range sorted(b.queue, func(int64) bool { return true }) {
		ids, scores = append(ids, e.id), append(scores, e.score)
	}
	return ids, scores
}

// InFlight counts the slots held at now (ms): leases and grants.
func (b *Budget) InFlight(now int64) int64 { return b.inFlight(now) }

// IsBatch reports whether a queue score is a batch waiter's.
func IsBatch(score int64) bool { return score >= batchOffset }

// Pending reports whether id is a pending lease: admitted with a later
// turn, holding no slot.
func (b *Budget) Pending(id string) bool {
	s, ok := b.leases[id]
	return ok && s >= pending
}

// Grant returns the end of the claim window of a grant kept for id, if
// there is one (expired or not).
func (b *Budget) Grant(id string) (int64, bool) {
	s, ok := b.leases[grant(id)]
	return s, ok
}

// QueueScore returns the score of a waiter with ticket in the slot queue.
func QueueScore(ticket int64, batch bool) int64 {
	if batch {
		return ticket + batchOffset
	}
	return ticket
}
