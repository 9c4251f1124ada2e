package model

// The slot queue's steps of an acquire with a concurrency limit.

// line finds the caller's place in the slot queue: its ticket and score,
// its pending lease if it has one, and the slots left once the waiters
// before it are served (they get the free slots first, before the
// caller's buckets are read: they are charged first). done: a lease
// holding its slot already has the id, r is the reply.
func (a *attempt) line() (r Reply, done bool) {
	b, c := a.b, a.c
	if c.Ticket != 0 {
		a.tk = c.Ticket
		if s, ok := b.leases[c.ID]; ok {
			if s < pending {
				return a.already(s), true
			}
			a.pend, a.isPending = s, true
		}
	}
	a.mine = a.tk
	if c.Batch {
		a.mine += batchOffset
	}
	a.slots, a.free, a.blocked = b.give(a.now, a.us, c.Limit, c.BatchSlots, c.ID, a.mine)
	return Reply{}, false
}

// take says whether the caller gets a free slot now, and if so takes it
// out of the queue.
func (a *attempt) take() bool {
	if a.free <= 0 || a.blocked || (a.c.Batch && a.slots >= a.c.BatchSlots) {
		return false
	}
	// A first attempt found queued is the call resent after its first
	// run queued it (see acquire.lua): its entry goes too.
	a.b.dequeue(a.c.ID)
	return true
}

// queued answers a caller that found no slot: queued, its request kept
// for the script that frees one, or told to go when its turn lies past
// its bound.
func (a *attempt) queued() Reply {
	b, c := a.b, a.c
	if c.Ticket == 0 {
		if held, ok := b.leases[c.ID]; ok {
			return a.already(held)
		}
	}
	wait := (b.ahead(a.mine) + 1) * c.Spacing
	if wait > c.MaxWait {
		if c.Ticket != 0 {
			b.dequeue(c.ID)
		}
		if a.isPending {
			return a.already(a.pend)
		}
		return Reply{0, wait, "concurrency", 0, 0, false}
	}
	w := waiter{claim: a.isPending, batch: c.Batch, ttl: c.TTL, deadline: a.now + c.MaxWait}
	switch {
	case a.isPending:
	case c.Tenant != "":
		w.marker = true // give cannot reach the tenant's hash
	default:
		w.charges = c.Charges
	}
	b.enqueue(c.ID, a.mine, w)
	return Reply{0, wait, "concurrency", 0, a.tk, false}
}

// claim answers a pending lease claiming its slot at its turn: no bucket,
// no pause, but a stop refuses it too.
func (a *attempt) claim() Reply {
	b, c, now := a.b, a.c, a.now
	expiry := a.pend - pending
	if expiry-c.TTL > now {
		return a.already(a.pend)
	}
	if st := b.stop; st.active(now) {
		wait := st.end - now
		if st.every > 0 {
			wait = min(wait, max(st.next-now, 1))
		}
		return Reply{0, wait, st.kind, 0, 0, false}
	}
	if a.take() {
		expiry = max(expiry, now+c.TTL)
		b.leases[c.ID] = expiry
		return Reply{1, 0, "", expiry, 0, false}
	}
	return a.queued()
}
