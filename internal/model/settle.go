package model

// Delta is one correction a settle sends: to bucket Bucket (RPM, TPM, RPD or
// TPD), Us µs, negative to give back, positive for a debt.
type Delta struct {
	Bucket int
	Us     int64
}

// Settle mirrors settle.lua: it ends lease id once, removing it from the
// lease set. us is the script's clock, expiry the caller's
// copy of the lease's expiry (ms), and deltas the corrections it sends, all
// of one sign. It returns 1 if the lease ended now, 0 if id was not in the
// lease set or expiry is not after now (its reservation then stays
// charged).
//
// Giving back adds to the stored TATs as they are (HINCRBY; a missing TAT
// counts from 0, which reads as full). A debt starts from now if the TAT
// lies in the past.
func (b *Budget) Settle(us int64, id string, expiry int64, deltas []Delta) int {
	if _, ok := b.leases[id]; !ok {
		return 0
	}
	delete(b.leases, id)
	if expiry <= us/1000 {
		return 0
	}
	if len(deltas) == 0 {
		return 1
	}
	if deltas[0].Us < 0 {
		for _, d := range deltas {
			if !b.stored[d.Bucket] {
				b.tat[d.Bucket], b.stored[d.Bucket] = 0, true
			}
			b.tat[d.Bucket] += d.Us
		}
		return 1
	}
	for _, d := range deltas {
		b.tat[d.Bucket], b.stored[d.Bucket] = b.from(d.Bucket, us)+d.Us, true
	}
	return 1
}
