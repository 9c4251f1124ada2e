package model

import (
	"cmp"
	"slices"
)

// maxReap is how many expired leases one admission removes at most, and
// reapAfter how long (ms) a lease stays past its expiry before it may be.
const maxReap, reapAfter = 100, 60_000

// KeepAlive mirrors keepalive.lua: a live lease's expiry moves to now+ttl if
// that is later. It returns 1 and the expiry in force, or 0, 0 when id is
// unknown or already expired (its slot was counted free; it stays over).
func (b *Budget) KeepAlive(now int64, id string, ttl int64) (code int, expiry int64) {
	score, ok := b.leases[id]
	if !ok || score <= now {
		return 0, 0
	}
	expiry = max(score, now+ttl)
	b.leases[id] = expiry
	return 1, expiry
}

// inFlight counts the leases that hold a slot at now: those whose expiry is
// after now (ZCOUNT leases (now (SENTINEL).
func (b *Budget) inFlight(now int64) int64 {
	var n int64
	for _, e := range b.leases {
		if e > now {
			n++
		}
	}
	return n
}

// firstExpiry returns the earliest expiry after now, if any lease is live.
func (b *Budget) firstExpiry(now int64) (int64, bool) {
	first, ok := int64(0), false
	for _, e := range b.leases {
		if e > now && (!ok || e < first) {
			first, ok = e, true
		}
	}
	return first, ok
}

// reap removes up to maxReap leases whose expiry is at or before
// now-reapAfter, in the
// sorted set's order (by expiry, then by id as bytes), as acquire.lua's
// ZREMRANGEBYRANK does.
func (b *Budget) reap(now int64) {
	type lease struct {
		id     string
		expiry int64
	}
	var expired []lease
	for id, e := range b.leases {
		if e <= now-reapAfter {
			expired = append(expired, lease{id, e})
		}
	}
	slices.SortFunc(expired, func(x, y lease) int {
		return cmp.Or(cmp.Compare(x.expiry, y.expiry), cmp.Compare(x.id, y.id))
	})
	for _, l := range expired[:min(len(expired), maxReap)] {
		delete(b.leases, l.id)
	}
}
