package model

// Delta is one correction a settle sends: to bucket Bucket (RPM, TPM, RPD or
// TPD), Us µs, negative to give back, positive for a debt.
type Delta struct {
	Bucket int
	Us     int64
}

// Settle mirrors settle.lua: it ends lease id once, removing it from the
// lease set. us is the script's clock, charged the µs at which the lease was
// charged (as its caller knows it), and deltas the corrections it sends, all
// of one sign. It returns 1 if the lease ended now, 0 if id was not in the
// lease set, and 2 if its expiry is not after now: then the lease stays in
// the set and its reservation stays charged.
//
// Giving back moves each stored TAT back, unless the bucket is full (its
// TAT at or before us) or restarted after charged: then what the lease
// reserved has been refilled already. A debt starts from now if the bucket
// is full, which restarts it.
func (b *Budget) Settle(us int64, id string, charged int64, deltas []Delta) int {
	expiry, ok := b.leases[id]
	if !ok {
		return 0
	}
	if expiry <= us/1000 {
		return 2
	}
	delete(b.leases, id)
	if len(deltas) == 0 {
		return 1
	}
	if deltas[0].Us < 0 {
		for _, d := range deltas {
			i := d.Bucket
			if b.stored[i] && b.tat[i] > us && b.restart[i] <= charged {
				b.tat[i] += d.Us
			}
		}
		return 1
	}
	for _, d := range deltas {
		tat, restarted := b.from(d.Bucket, us)
		b.tat[d.Bucket], b.stored[d.Bucket] = tat+d.Us, true
		if restarted {
			b.restart[d.Bucket] = us
		}
	}
	return 1
}
