package model

import (
	"math"
	"strconv"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Charge is one rate's part of an acquire, as the caller sends it (package
// wire's Charge): for a bucket the call's charge and its allowance in µs,
// for a sliding window in units (see acquire.lua).
type Charge = wire.Charge

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
	// Charges are the configured rates' parts, in the scripts' order: a
	// queued waiter keeps them (w:<id>), and the script that frees a slot
	// admits it with them.
	Charges []Charge
	// Tenant is the tenant's hash (KEYS[5]; "": none), whose fields the
	// charges marked '@' and '%' are (see tenant.go). OverShare sends an
	// interactive call's priority as "0:<KeepPPM>": over the tenant's
	// share, it may use only its allowance less KeepPPM millionths of
	// each budget bucket.
	Tenant    string
	OverShare bool
	KeepPPM   int64
	// Versioned sends Version, the version of the definition the caller
	// runs, with the definition key (KEYS[4]).
	Versioned bool
	Version   int64
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
//   - 1: admitted, every rate charged, the lease held until its expiry;
//     Ticket 0 if it holds its slot (or there is no limit), else the lease
//     is pending (no slot until it claims one at its turn, with Ticket).
//     Reason names the rate that set a wait > 0 (the first of the longest
//     waits). A bucket found full restarts at us, and its give-back stack
//     records the charge; a sliding window counts the charge in the
//     sub-window of the call's turn. Reason "probe": the one call a stop's
//     probe interval lets through.
//   - 2: the id is already in the lease set (a retry, or a claim before its
//     turn), nothing charged.
//   - 0: not admitted; with a Ticket, queued for a slot, its request kept
//     for the script that frees one (see give). The queue may have moved:
//     the waiters before the caller get the free slots first. Reason "quota" or "stop": the budget is
//     stopped (see Stop).
//   - -1: the charge exceeds the allowance in bucket Reason: the call can
//     never be admitted.
//   - 3: the caller runs another version of the definition than the one
//     stored: nothing done; Ticket is the stored version (0: none).
//
// A call naming a tenant is charged in the tenant's hash too, all or
// nothing with the budget: its own rates ('@') as the budget's are, its
// shares ('%') never holding it back. A call one of whose shares its charge
// would take past the share's allowance is over its share: served as a
// batch call (it never reserves a later turn, and waits along the
// tenant's qb), and, with OverShare, it may use only its allowance less
// floor(allowance × KeepPPM / 10^6) of each budget rate.
//
// A caller that leaves the slot queue (admitted, held back by its
// buckets, or past its bound; or, resent after its first run queued it,
// admitted) leaves the free slots to the next
// waiters after its own charges (see give): give stopped at it, and a
// tenant's waiter was kept one.
func (b *Budget) Acquire(us int64, c Call) Reply {
	_, queued := b.queue[c.ID]
	r := b.acquire(us, c)
	if _, still := b.queue[c.ID]; c.Limit > 0 && queued && !still {
		b.give(us/1000, us, c.Limit, c.BatchSlots, "", 0)
	}
	return r
}

func (b *Budget) acquire(us int64, c Call) Reply {
	now := us / 1000
	n := float64(now)
	// The definition: the state's copy of its version, read from the
	// definition key when missing or different; written on admission.
	dvw := ""
	if c.Versioned {
		mine := strconv.FormatInt(c.Version, 10)
		dv := b.dv
		if dv == "" {
			dv = b.def.stored()
			dvw = dv
		}
		if dv != mine {
			if dvw == "" {
				dv = b.def.stored()
			}
			if dv != mine {
				return Reply{3, 0, "definition", 0, b.def.v}
			}
			dvw = dv
		}
	}
	// Over the tenant's share: a share its charge would take past its
	// allowance.
	overShare, swait := false, int64(0) // swait: µs until it is within
	for _, ch := range c.Charges {
		if c.Tenant == "" || !isShare(ch.Field) {
			continue
		}
		if past := b.tenant(c.Tenant).from(ch.Field, us) + ch.Charge - us - ch.Allow; past > 0 {
			overShare, swait = true, max(swait, past)
		}
	}
	keep := -1.0
	if c.Tenant != "" && c.OverShare && !c.Batch {
		keep = float64(c.KeepPPM) / 1e6
	}
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
		// The waiters before the caller get the free slots first, before
		// its buckets are read: they are charged first.
		slots, free, blocked = b.give(now, us, c.Limit, c.BatchSlots, c.ID, mine)
	}
	take := func() bool {
		if free <= 0 || blocked || (c.Batch && slots >= c.BatchSlots) {
			return false
		}
		// A first attempt found queued is the call resent after its first
		// run queued it (see acquire.lua): its entry goes too.
		b.dequeue(c.ID)
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
		switch {
		case isPending:
		case c.Tenant != "":
			w.marker = true // give cannot reach the tenant's hash
		default:
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
		if st := b.stop; st.active(now) {
			// A stop refuses a pending lease's claim too.
			wait := st.end - now
			if st.every > 0 {
				wait = min(wait, max(st.next-now, 1))
			}
			return Reply{0, wait, st.kind, 0, 0}
		}
		if take() {
			expiry = max(expiry, now+c.TTL)
			b.leases[c.ID] = expiry
			return Reply{1, 0, "", expiry, 0}
		}
		return queued()
	}

	// Each rate's wait: a bucket's TAT after the charge, less its
	// allowance; a sliding window's first sub-window with room. The
	// longest names the reason, and its step (a bucket's charge, a
	// sliding window's sub-window) spaces batch waiters.
	tats := map[string]int64{}
	var wus, sus int64 // µs
	reason := ""
	for _, ch := range c.Charges {
		h, allow := b.at(c.Tenant, ch.Field), ch.Allow
		if isShare(ch.Field) {
			// A share never holds a call back, nor is it ever too small:
			// its TAT lies at most twice its allowance past now.
			tats[ch.Field] = shared(h.from(ch.Field, us), ch.Charge, us, allow)
			continue
		}
		if ch.Charge > allow {
			return Reply{-1, 0, ch.Field, 0, 0}
		}
		if overShare && keep >= 0 && !tenantField(ch.Field) {
			allow -= int64(math.Floor(float64(allow) * keep))
		}
		var w, step int64
		if g := sub(ch.Field); g > 0 {
			cur := now * 1000 / g
			if ch.Charge > allow {
				// Over its share, a call larger than what the rate leaves
				// it fits no sub-window: it waits to be within its share.
				w = swait
			} else if j := h.windows[ch.Field].fit(cur, ch.Charge, allow); j > cur {
				w = j*g - now*1000
			}
			step = g
		} else {
			tats[ch.Field] = h.from(ch.Field, us) + ch.Charge
			w, step = tats[ch.Field]-us-allow, ch.Charge
		}
		if w > wus {
			wus, reason, sus = w, ch.Field, step
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
	// Stopped: refused, unless the probe is due and the call fits now.
	probe := false
	if st := b.stop; st.active(now) {
		if st.every == 0 || st.next > now || w > 0 {
			wait := st.end - now
			if st.every > 0 {
				wait = min(wait, max(st.next-now, int64(math.Ceil(w)), 1))
			}
			return deny(wait, st.kind)
		}
		probe = true
	}
	var bound int64
	if w > 0 {
		bound = c.MaxWait
	}
	if w > 0 && (c.Batch || overShare || w > float64(bound)) {
		if conc && c.Ticket != 0 {
			leave()
		}
		// Batch calls never reserve ahead, nor do a tenant's calls over
		// its share; a batch waiter willing to wait is spaced along qb
		// instead (one over its share along its tenant's).
		if (c.Batch || overShare) && bound > 0 {
			q := &b.hash
			if overShare {
				q = b.tenant(c.Tenant)
			}
			qb := float64(q.qb)
			if qb < n+w {
				qb = n + w
			} else {
				qb += sp
			}
			if qb-n <= float64(bound) {
				qb = math.Ceil(qb)
				q.qb = int64(qb)
				if overShare {
					q.tcover(now, qb)
				} else {
					b.written = true
				}
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
		// turn before the charge. A sliding window counts the call in
		// the sub-window of its turn, in ms as its caller knows it.
		// A tenant's fields go to its hash, kept until tms.
		turn := us + wait*1000
		tms := 0.0
		for _, ch := range c.Charges {
			h := b.at(c.Tenant, ch.Field)
			var ms float64
			if g := sub(ch.Field); g > 0 {
				jt := (now + wait) * 1000 / g
				h.slide(ch.Field).add(now*1000/g, jt, ch.Charge)
				ms = float64((jt+parts+1)*g) / 1000
			} else {
				bk, tat := h.bucket(ch.Field), tats[ch.Field]
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
		if c.Tenant != "" {
			b.tenant(c.Tenant).tcover(now, max(tms, n))
		}
		b.written = true
		if dvw != "" {
			b.dv = dvw
		}
		if probe {
			// The next probe is due an interval from now.
			b.stop.next = now + b.stop.every
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
		if probe {
			return Reply{1, 0, "probe", expiry, 0}
		}
		return Reply{1, wait, reason, expiry, 0}
	}
	return deny(wait, reason)
}
