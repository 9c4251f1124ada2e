package model

// Delta is one correction a settle sends: to bucket Bucket (RPM, TPM, RPD or
// TPD), Us µs, negative to give back, positive for a debt.
type Delta struct {
	Bucket int
	Us     int64
}

// Settle mirrors settle.lua: it ends lease id once, removing it from the
// lease set. us is the script's clock, charged the µs at which the lease was
// charged (as its caller knows it), limit and bslots the concurrency limit
// (0: none) and the slots batch calls may use, and deltas the corrections
// it sends, all of one sign. It returns 1 if the lease ended now, 0 if id
// was not in the lease set, and 2 if its expiry is not after now: then the
// lease stays in the set and its reservation stays charged.
//
// An id that holds no slot (a waiter giving up, a pending lease) leaves
// the slot queue; a slot a lease held goes to the queue's head (see give),
// after the corrections.
//
// Giving back moves each stored TAT back by what the charges since
// charged leave room for (see giveBack), and never for a bucket that is
// full at us. A debt starts from now if the bucket is full, which restarts
// it, and is recorded in the give-back stacks like an admission.
func (b *Budget) Settle(us int64, id string, charged, limit, bslots int64, deltas []Delta) int {
	now := us / 1000
	score, ok := b.leases[id]
	expiry := score
	if !ok || score >= pending {
		if limit > 0 {
			b.dequeue(id)
		}
		if !ok {
			return 0
		}
		expiry = score - pending
	}
	live := expiry > now
	if live {
		delete(b.leases, id)
	}
	// The slot freed goes to the queue's head once the buckets are
	// corrected: a give-back may let it fit.
	freed := limit > 0 && score < pending
	if !live || len(deltas) == 0 {
		if freed {
			b.give(now, us, limit, bslots, "", 0)
		}
		if !live {
			return 2
		}
		return 1
	}
	if freed {
		defer b.give(now, us, limit, bslots, "", 0)
	}
	if deltas[0].Us < 0 {
		for _, d := range deltas {
			b.giveBack(d.Bucket, us, charged, -d.Us)
		}
		return 1
	}
	// A debt is a charge event whose turn is now.
	for _, d := range deltas {
		tat := b.from(d.Bucket, us)
		b.push(d.Bucket, us, tat-us)
		b.tat[d.Bucket], b.stored[d.Bucket] = tat+d.Us, true
	}
	return 1
}
