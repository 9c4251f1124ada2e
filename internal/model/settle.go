package model

import "math"

// Settle mirrors settle.lua: it ends lease id once. mode is "settle" (refund
// reserved-used tokens, or charge the overrun as debt, capped at one bucket
// below zero), "release" (keep the whole reservation) or "cancel" (give back
// the tokens and the request); like the script, any other mode acts as
// release. start and expiry are the caller's copies of the lease's turn and
// expiry. It returns 1 if the lease ended now, 0 if id was not in the lease
// set or expiry is not after now; either way id leaves the set.
func (b *Budget) Settle(now int64, id, mode string, reserved, used, start, expiry int64, bs Buckets) int {
	if _, ok := b.leases[id]; !ok {
		return 0
	}
	delete(b.leases, id)
	if expiry <= now {
		return 0
	}
	// A cancelled lease, or one whose turn has not come, says nothing about
	// how long calls hold their slot.
	tracks := mode != "cancel" && start <= now
	lv, ts := b.load(now, bs)
	for i, k := range lv {
		if !k.on {
			continue
		}
		var delta float64
		switch {
		case mode == "settle" && isToken(i):
			delta = float64(reserved - used)
		case mode == "cancel" && isToken(i):
			delta = float64(reserved)
		case mode == "cancel":
			delta = 1
		}
		if delta < -k.cap {
			delta = -k.cap
		}
		level := k.level + delta
		if level > k.cap {
			level = k.cap
		}
		lv[i].level = level
	}
	if tracks {
		d := float64(now - start)
		hold := d
		if b.hasHold {
			hold = float64(float64(b.hold)*0.8) + float64(d*0.2)
		}
		b.hold, b.hasHold = int64(math.Floor(hold+0.5)), true
	}
	b.store(now, ts, lv)
	return 1
}
