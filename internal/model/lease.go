package model

// maxReap is how many expired leases one admission removes at most, and
// reapAfter how long (ms) a lease stays past its expiry before it may be.
const maxReap, reapAfter = 100, 60_000

// KeepAlive mirrors keepalive.lua: a live lease's expiry moves to now+ttl if
// that is later (a pending lease stays pending). It returns 1 and the
// expiry in force, or 0, 0 when id is unknown or already expired (its slot
// was counted free; it stays over). us is the script's clock (µs); with a
// concurrency limit (limit > 0, bslots the slots batch calls may use) the
// slots that expired leases freed go to the queue's waiters first (see
// give), whatever the answer.
func (b *Budget) KeepAlive(us int64, id string, ttl, limit, bslots int64) (code int, expiry int64) {
	now := us / 1000
	score, ok := b.leases[id]
	if limit > 0 {
		b.give(now, us, limit, bslots, "", 0)
	}
	if !ok {
		return 0, 0
	}
	var off int64
	if score >= pending {
		off = pending
	}
	score -= off
	if score <= now {
		return 0, 0
	}
	expiry = max(score, now+ttl)
	b.leases[id] = off + expiry
	return 1, expiry
}
