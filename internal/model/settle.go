package model

// Delta is one correction a settle sends: to bucket Bucket (RPM, TPM, RPD or
// TPD), Milli thousandths, positive to give back, negative for a debt.
type Delta struct {
	Bucket int
	Milli  int64
}

// Settle mirrors settle.lua: it ends lease id once, marking it ended (score
// 0) rather than removing it. expiry is the caller's copy of the lease's
// expiry, and deltas the corrections it sends, all of one sign. It returns
// 1 if the lease ended now, 0 if id was not in the lease set, had ended, or
// expiry is not after now (its reservation then stays charged).
//
// Refunds are added to the stored levels as they are (HINCRBY): no refill,
// no clamp, ts unchanged; a missing level is created holding just the
// refund. A debt refills the buckets to now, adds, and stores, like acquire.
func (b *Budget) Settle(now int64, id string, expiry int64, deltas []Delta, bs Buckets) int {
	if e, ok := b.leases[id]; !ok || e == 0 {
		return 0
	}
	b.leases[id] = 0
	if expiry <= now {
		return 0
	}
	if len(deltas) == 0 {
		return 1
	}
	if deltas[0].Milli >= 0 {
		for _, d := range deltas {
			if !b.stored[d.Bucket] {
				b.level[d.Bucket], b.stored[d.Bucket] = 0, true
			}
			b.level[d.Bucket] += d.Milli
		}
		return 1
	}
	lv, ts := b.load(now, bs)
	for _, d := range deltas {
		k := lv[d.Bucket]
		if !k.on {
			continue
		}
		level := float64(k.level + float64(d.Milli)/1000)
		if level > k.cap {
			level = k.cap
		}
		lv[d.Bucket].level = level
	}
	b.store(now, ts, lv)
	return 1
}
