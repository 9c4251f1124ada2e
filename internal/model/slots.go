package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The scripts' constants for slots (see prelude.lua).
const (
	pending     = 1_000_000_000_000_000 // PENDING: a pending lease's score is this plus its expiry
	batchOffset = 1 << 52               // BATCH: added to a batch waiter's ticket
	maxGive     = 100                   // MAXGIVE: the most slots one script gives
	look        = 4                     // LOOK: the waiters give looks at past the free slots
)

// waiter is the request a queued caller left with its queue entry (the
// state hash's w:<id>): what the script that frees a slot admits it with.
type waiter struct {
	claim         bool // a pending lease waiting to claim its slot ('p')
	batch         bool
	ttl, deadline int64 // ms
	charges       []Charge
}

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

// inFlight counts the slots held at now: leases whose expiry is after now,
// pending leases left out (ZCOUNT leases (now LIVE).
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

// enqueue puts id in the slot queue at score unless it is there (ZADD NX),
// and keeps its request w with it (HSET).
func (b *Budget) enqueue(id string, score int64, w waiter) {
	if b.queue == nil {
		b.queue = make(map[string]int64)
		b.waiters = make(map[string]waiter)
	}
	if _, ok := b.queue[id]; !ok {
		b.queue[id] = score
	}
	b.waiters[id] = w
}

// dequeue takes id out of the slot queue with its request, if it is there.
func (b *Budget) dequeue(id string) {
	if _, ok := b.queue[id]; ok {
		delete(b.queue, id)
		delete(b.waiters, id)
	}
}

// give mirrors prelude.lua's give: it hands the free slots to the slot
// queue's waiters in order, admitting each as acquire would, up to the
// caller me (score mine; "" for none), which comes after the waiters with
// a lower score, or the same score and a lower id. Each waiter handled
// leaves the queue, and '<id>:<code>:<expiry>:<charged µs>' is published
// for it: 1 admitted holding its slot, 2 a pending lease (a later turn),
// 0 not admitted. It returns the slots held after it, those still free,
// and whether a waiter before the caller is still queued.
func (b *Budget) give(now, us, limit, bslots int64, me string, mine int64) (int64, int64, bool) {
	live := b.inFlight(now)
	free := min(limit-live, maxGive)
	if free <= 0 {
		return live, 0, false
	}
	heads := sorted(b.queue, func(int64) bool { return true })
	if len(heads) == 0 {
		return live, free, false
	}
	// The script reads free+LOOK members, the sentinel among them if the
	// queue is shorter: reading it ends the queue.
	sentinel := int64(len(heads)) < free+look
	heads = heads[:min(int64(len(heads)), free+look)]
	given, blocked := int64(0), true
	var gone, sent []string
	for i, h := range heads {
		if me != "" && (h.id == me || h.score > mine || (h.score == mine && h.id > me)) {
			blocked = false
			break
		}
		if given >= free || (h.score >= batchOffset && live+given >= bslots) {
			break
		}
		code, expiry, at, stop := 0, int64(0), int64(0), false
		w, ok := b.waiters[h.id]
		switch {
		case !ok || w.deadline < now:
		case w.claim:
			if held, ok := b.leases[h.id]; ok && held >= pending {
				expiry = max(held-pending, now+w.ttl)
				b.leases[h.id] = expiry
				code, given = 1, given+1
			}
		case b.pause > now:
			stop = true
		default:
			var tats, froms [4]int64
			var wus int64
			for _, ch := range w.charges {
				froms[ch.Bucket] = b.from(ch.Bucket, us)
				tats[ch.Bucket] = froms[ch.Bucket] + ch.Charge
				wus = max(wus, tats[ch.Bucket]-us-ch.Allow)
			}
			wait := (wus + 999) / 1000
			if wait == 0 || (!w.batch && wait <= w.deadline-now) {
				if b.leases == nil {
					b.leases = make(map[string]int64)
				}
				expiry = now + wait + w.ttl
				if wait > 0 {
					code = 2
					b.leases[h.id] = pending + expiry
				} else {
					code, given = 1, given+1
					b.leases[h.id] = expiry
				}
				at = us
				turn := us + wait*1000
				for _, ch := range w.charges {
					k := ch.Bucket
					b.push(k, us, max(froms[k]-turn, 0))
					b.tat[k], b.stored[k] = tats[k], true
				}
			}
		}
		gone = append(gone, h.id)
		sent = append(sent, fmt.Sprintf("%s:%d:%d:%d", h.id, code, expiry, at))
		if stop {
			break
		}
		if i == len(heads)-1 && sentinel {
			blocked = false
		}
	}
	for _, id := range gone {
		b.dequeue(id)
	}
	if len(sent) > 0 {
		b.published = append(b.published, strings.Join(sent, " "))
	}
	return live + given, free - given, blocked
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
// call (each the waiters one script handed slots to, space-separated
// '<id>:<code>:<expiry>:<charged µs>', see give), and forgets them.
func (b *Budget) Published() []string {
	p := b.published
	b.published = nil
	return p
}

// Sets returns copies of the lease set (leases, pending leases as
// PENDING + expiry) and the slot queue, members to
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

// InFlight counts the slots held at now (ms).
func (b *Budget) InFlight(now int64) int64 { return b.inFlight(now) }

// IsBatch reports whether a queue score is a batch waiter's.
func IsBatch(score int64) bool { return score >= batchOffset }

// Pending reports whether id is a pending lease: admitted with a later
// turn, holding no slot.
func (b *Budget) Pending(id string) bool {
	s, ok := b.leases[id]
	return ok && s >= pending
}

// QueueScore returns the score of a waiter with ticket in the slot queue.
func QueueScore(ticket int64, batch bool) int64 {
	if batch {
		return ticket + batchOffset
	}
	return ticket
}
