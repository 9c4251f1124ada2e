package model

import "math"

// Charge is one bucket's part of an acquire, as the caller sends it: the
// call's charge and its allowance, in µs (see acquire.lua).
type Charge struct {
	Bucket        int
	Charge, Allow int64
}

// Acquire mirrors acquire.lua: it admits one call against every limit, all
// or nothing, or says how long until it could be. us is the script's clock;
// the other parameters follow its ARGV (slots 0: no concurrency limit), and
// the results are its reply without now_us:
//
//   - 1, wait, reason: admitted, the lease held until now+wait+ttl (its
//     expiry, also returned) and every bucket charged; reason names the
//     bucket that set a wait > 0. A bucket found full restarts at us.
//   - 2, wait, "": id is already in the lease set (a retry), nothing
//     charged; expiry is its score.
//   - 0, wait, reason: not admitted; the queues qc or qb may have moved.
//   - -1, 0, reason: the charge exceeds the allowance in bucket reason: the
//     call can never be admitted.
func (b *Budget) Acquire(us int64, id string, batch bool, maxWait, ttl, slots, spacing int64, cs []Charge) (code int, wait int64, reason string, expiry int64) {
	now := us / 1000
	n := float64(now)

	// deny answers 0, or 2 when id is still in the lease set, ended or not.
	// Whatever the path changed before (a queue) stays changed.
	deny := func(wait int64, reason string) (int, int64, string, int64) {
		if held, ok := b.leases[id]; ok {
			return 2, max(held-ttl-now, 0), "", held
		}
		return 0, wait, reason, 0
	}

	var tats [4]int64
	var restarted [4]bool
	var wus, sus int64 // the longest wait and its bucket's charge, µs
	for _, c := range cs {
		if c.Charge > c.Allow {
			return -1, 0, Name(c.Bucket), 0
		}
		tat, r := b.from(c.Bucket, us)
		tat += c.Charge
		tats[c.Bucket], restarted[c.Bucket] = tat, r
		if w := tat - us - c.Allow; w > wus {
			wus, reason, sus = w, Name(c.Bucket), c.Charge
		}
	}
	w, sp := float64(wus)/1000, float64(sus)/1000

	if b.pause > now {
		return deny(b.pause-now, "pause")
	}
	if slots > 0 && b.inFlight(now) >= slots {
		latest := float64(ttl)
		if first, ok := b.firstExpiry(now); ok {
			latest = float64(first - now)
		}
		qc := float64(b.qc)
		if qc < n {
			qc = n
		}
		qc = math.Ceil(qc + float64(spacing))
		wc := qc - n
		if wc > latest {
			wc = math.Ceil(latest)
		}
		if wc < 1 {
			wc = 1
		}
		if maxWait > 0 && wc <= float64(maxWait) {
			b.qc = int64(qc)
		}
		return deny(int64(wc), "concurrency")
	}
	if w > 0 && (batch || w > float64(maxWait)) {
		// Batch calls never reserve ahead; a batch waiter willing to wait is
		// spaced along qb instead.
		if batch && maxWait > 0 {
			qb := float64(b.qb)
			if qb < n+w {
				qb = n + w
			} else {
				qb += sp
			}
			if qb-n <= float64(maxWait) {
				qb = math.Ceil(qb)
				b.qb = int64(qb)
				w = qb - n
			}
		}
		return deny(int64(math.Ceil(w)), reason)
	}

	// Admit: the TATs move past their allowance when the turn lies ahead.
	wait = int64(math.Ceil(w))
	if held, ok := b.leases[id]; ok {
		// ZADD NX found the id: a retry; nothing is stored.
		return 2, max(held-ttl-now, 0), "", held
	}
	if b.leases == nil {
		b.leases = make(map[string]int64)
	}
	expiry = now + wait + ttl
	b.leases[id] = expiry
	if now%16 == 0 {
		b.reap(now)
	}
	for _, c := range cs {
		b.tat[c.Bucket], b.stored[c.Bucket] = tats[c.Bucket], true
		if restarted[c.Bucket] {
			b.restart[c.Bucket] = us
		}
	}
	return 1, wait, reason, expiry
}
