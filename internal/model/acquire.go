package model

import "math"

// Acquire mirrors acquire.lua: it admits one call against every limit, all
// or nothing, or says how long until it could be. The parameters follow the
// script's ARGV in order (batch is priority 1, floorMilli the batch floor in
// thousandths, hold the caller's mean hold time in ms), and the results are its reply without now_ms:
//
//   - 1, wait, reason: admitted, the lease held until now+wait+ttl and every
//     bucket charged; reason names the bucket that set a wait > 0.
//   - 2, wait, "": id is already in the lease set (a retry), nothing charged.
//   - 0, wait, reason: not admitted; the queues qc or qb may have moved.
//   - -1, 0, reason: the call's share (plus, for batch, the floor) exceeds
//     the capacity of bucket reason: it can never be admitted.
func (b *Budget) Acquire(now int64, id string, cost int64, batch bool, maxWait, ttl, conc, floorMilli, hold int64, bs Buckets) (code int, wait int64, reason string) {
	n, c, mw := float64(now), float64(cost), float64(maxWait)
	floor := float64(floorMilli) / 1000
	lv, ts := b.load(now, bs)

	// deny answers 0, or 2 when id is still in the lease set, expired or not.
	// Whatever the path changed before (a queue) stays changed.
	deny := func(wait int64, reason string) (int, int64, string) {
		if held, ok := b.leases[id]; ok {
			return 2, max(held-ttl-now, 0), ""
		}
		return 0, wait, reason
	}

	// A call whose share (plus, for batch, the floor) exceeds a capacity
	// can never be admitted.
	for i, k := range lv {
		if !k.on {
			continue
		}
		need := 1.0
		if isToken(i) {
			need = c
		}
		if batch {
			need += float64(k.cap * floor)
		}
		if need > k.cap {
			return -1, 0, Name(i)
		}
	}
	if b.pause > now {
		return deny(b.pause-now, "pause")
	}
	if conc > 0 {
		if w, full := b.concurrencyWait(now, batch, maxWait, ttl, conc, hold, floor); full {
			return deny(w, "concurrency")
		}
	}

	// How long until every bucket has this call's share (for batch, plus
	// the floor kept for interactive calls). The first bucket with the
	// longest wait names it; spacing is the time its refill takes for c.
	var w, spacing float64
	for i, k := range lv {
		if !k.on {
			continue
		}
		ci := 1.0
		if isToken(i) {
			ci = c
		}
		need := ci
		if batch {
			need = ci + float64(k.cap*floor)
		}
		if need > k.level {
			if wi := (need - k.level) / k.rate; wi > w {
				w, reason, spacing = wi, Name(i), ci/k.rate
			}
		}
	}
	if w > 0 && (batch || w > mw) {
		// Batch calls never reserve ahead; a batch waiter willing to wait is
		// spaced along qb instead.
		if batch && maxWait > 0 {
			qb := float64(b.qb)
			if qb < n+w {
				qb = n + w
			} else {
				qb += spacing
			}
			if qb-n <= mw {
				b.qb = int64(math.Ceil(qb))
				w = qb - n
			}
		}
		return deny(int64(math.Ceil(w)), reason)
	}

	// Admit: the buckets go below zero when the turn lies ahead.
	for i := range lv {
		if !lv[i].on {
			continue
		}
		if isToken(i) {
			lv[i].level -= c
		} else {
			lv[i].level--
		}
	}
	start := now + int64(math.Ceil(w))
	expiry := start + ttl
	if held, ok := b.leases[id]; ok {
		// ZADD NX found the id: a retry; nothing is stored.
		return 2, max(held-ttl-now, 0), ""
	}
	if b.leases == nil {
		b.leases = make(map[string]int64)
	}
	b.leases[id] = expiry
	if now%16 == 0 {
		b.reap(now)
	}
	b.store(now, ts, lv)
	return 1, int64(math.Ceil(w)), reason
}

// concurrencyWait mirrors acquire.lua's concurrency check. full reports that
// no slot is free for this call (batch calls leave the floor's share of the
// slots); then wait is when to come back, spaced along the virtual queue qc
// by the caller's mean hold time over the limit and capped by the earliest live
// expiry. A waiter that will wait (maxWait > 0 and wait <= maxWait) takes its
// place in the queue.
func (b *Budget) concurrencyWait(now int64, batch bool, maxWait, ttl, conc, hold int64, floor float64) (wait int64, full bool) {
	allowed := conc
	if batch {
		allowed = conc - int64(math.Floor(float64(conc)*floor))
	}
	if b.inFlight(now) < allowed {
		return 0, false
	}
	n := float64(now)
	spacing := float64(hold) / float64(conc)
	if spacing < 1 {
		spacing = 1
	}
	latest := float64(ttl)
	if first, ok := b.firstExpiry(now); ok {
		latest = float64(first - now)
	}
	qc := float64(b.qc)
	if qc < n {
		qc = n
	}
	qc += spacing
	w := math.Ceil(qc - n)
	if w > latest {
		w = math.Ceil(latest)
	}
	if w < 1 {
		w = 1
	}
	if maxWait > 0 && w <= float64(maxWait) {
		b.qc = int64(math.Ceil(qc))
	}
	return int64(w), true
}
