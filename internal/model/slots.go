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
	claim bool // a pending lease waiting to claim its slot ('p')
	// marker is a tenant's waiter ('t'; 'T' once told): give cannot
	// reach its tenant's hash, so it keeps its place, owed a slot, and is
	// told once to ask again.
	marker, told  bool
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

// dequeue takes id out of the slot queue with its request, if it is
// there, and reports whether it was.
func (b *Budget) dequeue(id string) bool {
	if _, ok := b.queue[id]; ok {
		delete(b.queue, id)
		delete(b.waiters, id)
		return true
	}
	return false
}

// give mirrors slots.lua's give: it hands the free slots to the slot
// queue's waiters in order, admitting each as acquire would, up to the
// caller me (score mine; "" for none), which comes after the waiters with
// a lower score, or the same score and a lower id. Each waiter handled
// leaves the queue, and '<id>:<code>:<expiry>:<charged µs>' is published
// for it: 1 admitted holding its slot, 2 a pending lease (a later turn),
// 0 not admitted. A tenant's waiter (a marker) stays, owed one of the
// free slots, and is told 0 the first time; from then on it holds the slot
// one lease TTL at most. It returns the slots held
// after it, those still free, and whether a waiter before the caller is
// still queued.
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
		code, expiry, at, stop, stays := 0, int64(0), int64(0), false, false
		w, ok := b.waiters[h.id]
		switch {
		case !ok || w.deadline < now:
		case w.marker:
			given, stays = given+1, true
			if !w.told {
				// Told, it holds the slot one lease TTL at most.
				w.told, w.deadline = true, min(w.deadline, now+w.ttl)
				b.waiters[h.id] = w
				sent = append(sent, h.id+":0:0:0")
			}
		case w.claim:
			// A pending lease's claim: a stop holds it back, a pause not.
			if b.stop.active(now) {
				stop = true
			} else if held, ok := b.leases[h.id]; ok && held >= pending {
				expiry = max(held-pending, now+w.ttl)
				b.leases[h.id] = expiry
				code, given = 1, given+1
			}
		case b.pause > now || b.stop.active(now):
			stop = true
		default:
			code, expiry = b.admitWaiter(now, us, h.id, w)
			if code != 0 {
				at = us
			}
			if code == 1 {
				given++
			}
		}
		if !stays {
			gone = append(gone, h.id)
			sent = append(sent, fmt.Sprintf("%s:%d:%d:%d", h.id, code, expiry, at))
		}
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

// admitWaiter admits waiter id's request w at us as give does, its
// buckets and sliding windows read and charged as acquire would (no pause
// or stop in force): 1 holding its slot now, 2 as a pending lease whose
// turn lies ahead, 0 not admitted (a batch waiter, which never reserves
// ahead, or a turn past its deadline); and the lease's expiry.
func (b *Budget) admitWaiter(now, us int64, id string, w waiter) (int, int64) {
	froms, tats := map[string]int64{}, map[string]int64{}
	var wus int64
	for _, ch := range w.charges {
		if g := sub(ch.Field); g > 0 {
			cur := now * 1000 / g
			if j := b.windows[ch.Field].fit(cur, ch.Charge, ch.Allow); j > cur {
				wus = max(wus, j*g-now*1000)
			}
			continue
		}
		froms[ch.Field] = b.from(ch.Field, us)
		tats[ch.Field] = froms[ch.Field] + ch.Charge
		wus = max(wus, tats[ch.Field]-us-ch.Allow)
	}
	wait := (wus + 999) / 1000
	if wait != 0 && (w.batch || wait > w.deadline-now) {
		return 0, 0
	}
	if b.leases == nil {
		b.leases = make(map[string]int64)
	}
	code, expiry := 1, now+wait+w.ttl
	b.leases[id] = expiry
	if wait > 0 {
		code = 2
		b.leases[id] = pending + expiry
	}
	// Charged as acquire charges an admission: each bucket's headroom past
	// the turn goes on its give-back stack; a sliding window counts the
	// call in the sub-window of its turn.
	turn := us + wait*1000
	for _, ch := range w.charges {
		if g := sub(ch.Field); g > 0 {
			b.slide(ch.Field).add(now*1000/g, (now+wait)*1000/g, ch.Charge)
			continue
		}
		b.push(ch.Field, us, max(froms[ch.Field]-turn, 0))
		bk := b.bucket(ch.Field)
		bk.tat, bk.stored = tats[ch.Field], true
	}
	return code, expiry
}

// reap removes up to maxReap leases whose expiry is at or
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

// Owed reports whether id is a tenant's waiter that was told to take the
// slot it is owed: it stays queued, but a freed slot is kept for it.
func (b *Budget) Owed(id string) bool {
	w, ok := b.waiters[id]
	return ok && w.marker && w.told
}

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
