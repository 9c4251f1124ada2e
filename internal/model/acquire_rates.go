package model

import "math"

// The rates' steps of an acquire: each rate's wait, what holds the call
// back, and the admission that charges every rate.

// rates works out each rate's wait: a bucket's TAT after the charge, less
// its allowance; a sliding window's first sub-window with room. The
// longest names the reason, and its step (a bucket's charge, a sliding
// window's sub-window) spaces batch waiters. done: a charge exceeds its
// allowance (the call can never be admitted), r is the reply.
func (a *attempt) rates() (r Reply, done bool) {
	b, c, us, now := a.b, a.c, a.us, a.now
	a.tats = map[string]int64{}
	var wus, sus int64 // µs
	for _, ch := range c.Charges {
		h, allow := b.at(c.Tenant, ch.Field), ch.Allow
		if isShare(ch.Field) {
			// A share never holds a call back, nor is it ever too small:
			// its TAT lies at most twice its allowance past now.
			a.tats[ch.Field] = shared(h.from(ch.Field, us), ch.Charge, us, allow)
			continue
		}
		if ch.Charge > allow {
			return Reply{-1, 0, ch.Field, 0, 0, false}, true
		}
		if a.overShare && a.keep >= 0 && !tenantField(ch.Field) {
			allow -= int64(math.Floor(float64(allow) * a.keep))
		}
		var w, step int64
		if g := sub(ch.Field); g > 0 {
			cur := now * 1000 / g
			if ch.Charge > allow {
				// Over its share, a call larger than what the rate leaves
				// it fits no sub-window: it waits to be within its share.
				w = a.swait
			} else if j := h.windows[ch.Field].fit(cur, ch.Charge, allow); j > cur {
				w = j*g - now*1000
			}
			step = g
		} else {
			a.tats[ch.Field] = h.from(ch.Field, us) + ch.Charge
			w, step = a.tats[ch.Field]-us-allow, ch.Charge
		}
		if w > wus {
			wus, a.reason, sus = w, ch.Field, step
		}
	}
	a.w, a.sp = float64(wus)/1000, float64(sus)/1000
	return Reply{}, false
}

// held answers a call a stop or a pause holds back. A stop wins over a
// pause, and refuses every call but its probe: due, with no pause in
// force, and fitting now.
func (a *attempt) held() (r Reply, done bool) {
	b, now, w := a.b, a.now, a.w
	if st := b.stop; st.active(now) {
		if st.every == 0 || st.next > now || w > 0 || b.pause > now {
			wait := st.end - now
			if st.every > 0 {
				wait = min(wait, max(st.next-now, int64(math.Ceil(w)), b.pause-now, 1))
			}
			return a.deny(wait, st.kind), true
		}
		a.probe = true
	}
	if b.pause > now {
		return a.deny(b.pause-now, "pause"), true
	}
	return Reply{}, false
}

// far answers a call that must wait but may not reserve its turn: one
// whose wait is past its bound, a batch call, or a tenant's call over its
// share. Those never reserve ahead; a batch waiter willing to wait is
// spaced along qb instead (one over its share along its tenant's).
func (a *attempt) far() (r Reply, done bool) {
	b, c, now, w := a.b, a.c, a.now, a.w
	n := float64(now)
	var bound int64
	if w > 0 {
		bound = c.MaxWait
	}
	if w <= 0 || !(c.Batch || a.overShare || w > float64(bound)) {
		return Reply{}, false
	}
	if a.conc && c.Ticket != 0 {
		b.dequeue(c.ID)
	}
	if (c.Batch || a.overShare) && bound > 0 {
		q := &b.hash
		if a.overShare {
			q = b.tenant(c.Tenant)
		}
		qb := float64(q.qb)
		if qb < n+w {
			qb = n + w
		} else {
			qb += a.sp
		}
		if qb-n <= float64(bound) {
			qb = math.Ceil(qb)
			q.qb = int64(qb)
			if a.overShare {
				q.tcover(now, qb)
			} else {
				b.written = true
			}
			w = qb - n
		}
	}
	return a.deny(int64(math.Ceil(w)), a.reason), true
}

// admit admits the call at its turn, wait ms from now: holding its slot,
// pending until its turn when that lies ahead, or queued for a slot.
func (a *attempt) admit() Reply {
	c, now := a.c, a.now
	wait := int64(math.Ceil(a.w))
	expiry := now + wait + c.TTL
	if a.conc && wait > 0 {
		// A later turn holds no slot: the lease is pending until it claims
		// one.
		if c.Ticket != 0 {
			a.b.dequeue(c.ID)
		}
		if a.charge(wait, pending+expiry) {
			return Reply{1, wait, a.reason, expiry, (now + wait) * 1000, false}
		}
		return a.deny(wait, a.reason)
	}
	if a.conc && !a.take() {
		return a.queued()
	}
	if a.charge(wait, expiry) {
		if a.probe {
			return Reply{1, 0, "probe", expiry, 0, false}
		}
		return Reply{1, wait, a.reason, expiry, 0, false}
	}
	return a.deny(wait, a.reason)
}

// charge adds the lease with score and charges every rate for a turn wait
// ms from now: the TATs move past their allowance when the turn lies
// ahead. It reports false, changing nothing, if the id is in the lease
// set already (ZADD NX found it: a retry).
func (a *attempt) charge(wait, score int64) bool {
	b, c, now := a.b, a.c, a.now
	if _, ok := b.leases[c.ID]; ok {
		return false
	}
	if b.leases == nil {
		b.leases = make(map[string]int64)
	}
	b.leases[c.ID] = score
	if now%16 == 0 {
		b.reap(now)
	}
	tms := a.chargeRates(wait)
	if c.Tenant != "" {
		b.tenant(c.Tenant).tcover(now, max(tms, float64(now)))
	}
	b.written = true
	if a.dvw != "" {
		b.dv = a.dvw
	}
	if a.probe {
		// The next probe is due an interval from now.
		b.stop.next = now + b.stop.every
	}
	return true
}

// chargeRates charges each rate for a turn wait ms from now, and returns
// how long (ms) the tenant's hash must be kept for its fields charged.
// Each bucket's give-back stack records its headroom: how far its TAT lay
// past the call's turn before the charge. A sliding window counts the
// call in the sub-window of its turn, in ms as its caller knows it. A
// tenant's fields go to its hash.
func (a *attempt) chargeRates(wait int64) (tms float64) {
	b, c, us, now := a.b, a.c, a.us, a.now
	turn := us + wait*1000
	for _, ch := range c.Charges {
		h := b.at(c.Tenant, ch.Field)
		var ms float64
		if g := sub(ch.Field); g > 0 {
			jt := (now + wait) * 1000 / g
			h.slide(ch.Field).add(now*1000/g, jt, ch.Charge)
			ms = float64((jt+parts+1)*g) / 1000
		} else {
			bk, tat := h.bucket(ch.Field), a.tats[ch.Field]
			if !isShare(ch.Field) {
				h.push(ch.Field, us, max(h.from(ch.Field, us)-turn, 0))
			}
			bk.tat, bk.stored = tat, true
			ms = float64(tat) / 1000
		}
		if tenantField(ch.Field) && c.Tenant != "" {
			tms = max(tms, ms)
		}
	}
	return tms
}
