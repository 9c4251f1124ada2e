package model

import "math"

// Charge is one bucket's part of an acquire, as the caller sends it: the
// call's charge and its allowance, in µs (see acquire.lua).
type Charge struct {
	Bucket        int
	Charge, Allow int64
}

// Call is an acquire's arguments, as its caller sends them (acquire.lua's
// ARGV).
type Call struct {
	ID           string
	Batch        bool
	MaxWait, TTL int64 // ms
	// Limit is the concurrency limit (0: none), BatchSlots the slots a
	// batch call may use.
	Limit, BatchSlots int64
	Spacing           int64 // ms between two slots freeing
	Ticket            int64 // µs; 0 on a call's first attempt
	// Charges are the configured buckets' parts, in the scripts' order
	// (rpm, tpm, rpd, tpd): a queued waiter keeps them, in that order.
	Charges []Charge
}

// Reply is acquire's reply without now_us.
type Reply struct {
	Code   int
	Wait   int64
	Reason string
	Expiry int64
	Ticket int64
}

// Acquire mirrors acquire.lua: it admits one call against every limit, all
// or nothing, or says how long until it could be. us is the script's clock;
// the reply is the script's without now_us:
//
//   - 1: admitted, every bucket charged, the lease held until its expiry;
//     Ticket 0 if it holds its slot (or there is no limit), else the lease
//     is pending (no slot until it claims one at its turn, with Ticket).
//     Reason names the bucket that set a wait > 0. A bucket found full
//     restarts at us. Each bucket's give-back stack records the charge.
//   - 2: the id is already in the lease set (a retry, or a claim before its
//     turn), nothing charged.
//   - 0: not admitted; with a Ticket, queued for a slot. The queues and
//     grants may have moved.
//   - -1: the charge exceeds the allowance in bucket Reason: the call can
//     never be admitted.
func (b *Budget) Acquire(us int64, c Call) Reply {
	now := us / 1000
	n := float64(now)
	already := func(score int64) Reply {
		if score >= pending {
			turn := score - pending - c.TTL
			return Reply{2, max(turn-now, 0), "", score - pending, turn * 1000}
		}
		return Reply{2, max(score-c.TTL-now, 0), "", score, 0}
	}

	conc := c.Limit > 0
	tk, mine := us, int64(0)
	var isPending bool
	var pend, slots, free int64
	blocked := true
	if conc {
		if c.Ticket != 0 {
			tk = c.Ticket
			if s, ok := b.leases[c.ID]; ok {
				if s < pending {
					return already(s)
				}
				pend, isPending = s, true
			}
		}
		mine = tk
		if c.Batch {
			mine += batchOffset
		}
		// The waiters before the caller get the free slots first.
		slots, free, blocked = b.give(now, us, c.Limit, c.BatchSlots, c.ID, mine)
	}
	take := func() bool {
		if free <= 0 || blocked || (c.Batch && slots >= c.BatchSlots) {
			return false
		}
		if c.Ticket != 0 {
			b.dequeue(c.ID)
		}
		return true
	}
	queued := func() Reply {
		if c.Ticket == 0 {
			if held, ok := b.leases[c.ID]; ok {
				return already(held)
			}
		}
		wait := (b.ahead(mine) + 1) * c.Spacing
		if wait > c.MaxWait {
			if c.Ticket != 0 {
				b.dequeue(c.ID)
			}
			if isPending {
				return already(pend)
			}
			return Reply{0, wait, "concurrency", 0, 0}
		}
		w := waiter{claim: isPending, batch: c.Batch, ttl: c.TTL, deadline: now + c.MaxWait}
		if !isPending {
			w.charges = c.Charges
		}
		b.enqueue(c.ID, mine, w)
		return Reply{0, wait, "concurrency", 0, tk}
	}
	leave := func() { b.dequeue(c.ID) }

	if isPending {
		// A pending lease claims its slot: no bucket, no pause.
		expiry := pend - pending
		if expiry-c.TTL > now {
			return already(pend)
		}
		if take() {
			expiry = max(expiry, now+c.TTL)
			b.leases[c.ID] = expiry
			return Reply{1, 0, "", expiry, 0}
		}
		return queued()
	}

	var tats [4]int64
	var wus, sus int64 // the longest wait and its bucket's charge, µs
	reason := ""
	for _, ch := range c.Charges {
		if ch.Charge > ch.Allow {
			return Reply{-1, 0, Name(ch.Bucket), 0, 0}
		}
		tat := b.from(ch.Bucket, us) + ch.Charge
		tats[ch.Bucket] = tat
		if w := tat - us - ch.Allow; w > wus {
			wus, reason, sus = w, Name(ch.Bucket), ch.Charge
		}
	}
	w, sp := float64(wus)/1000, float64(sus)/1000

	// deny answers 0, or 2 when id is still in the lease set, ended or not.
	// Whatever the path changed before (a queue) stays changed.
	deny := func(wait int64, reason string) Reply {
		if c.Ticket == 0 || !conc {
			if held, ok := b.leases[c.ID]; ok {
				return already(held)
			}
		}
		return Reply{0, wait, reason, 0, 0}
	}
	if b.pause > now {
		return deny(b.pause-now, "pause")
	}
	var bound int64
	if w > 0 {
		bound = c.MaxWait
	}
	if w > 0 && (c.Batch || w > float64(bound)) {
		if conc && c.Ticket != 0 {
			leave()
		}
		// Batch calls never reserve ahead; a batch waiter willing to wait is
		// spaced along qb instead.
		if c.Batch && bound > 0 {
			qb := float64(b.qb)
			if qb < n+w {
				qb = n + w
			} else {
				qb += sp
			}
			if qb-n <= float64(bound) {
				qb = math.Ceil(qb)
				b.qb = int64(qb)
				w = qb - n
			}
		}
		return deny(int64(math.Ceil(w)), reason)
	}

	// Admit: the TATs move past their allowance when the turn lies ahead.
	wait := int64(math.Ceil(w))
	expiry := now + wait + c.TTL
	admit := func(score int64) bool {
		if _, ok := b.leases[c.ID]; ok {
			return false // ZADD NX found the id: a retry
		}
		if b.leases == nil {
			b.leases = make(map[string]int64)
		}
		b.leases[c.ID] = score
		if now%16 == 0 {
			b.reap(now)
		}
		// Each bucket's headroom: how far its TAT lay past the call's
		// turn before the charge.
		turn := us + wait*1000
		for _, ch := range c.Charges {
			i := ch.Bucket
			b.push(i, us, max(tats[i]-ch.Charge-turn, 0))
			b.tat[i], b.stored[i] = tats[i], true
		}
		return true
	}
	if conc && wait > 0 {
		// A later turn holds no slot: the lease is pending until it claims
		// one.
		if c.Ticket != 0 {
			leave()
		}
		if admit(pending + expiry) {
			return Reply{1, wait, reason, expiry, (now + wait) * 1000}
		}
		return deny(wait, reason)
	}
	if conc && !take() {
		return queued()
	}
	if admit(expiry) {
		return Reply{1, wait, reason, expiry, 0}
	}
	return deny(wait, reason)
}
