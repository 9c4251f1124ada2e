package model

import (
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
	// Seen is the latest expiry (ms) the caller saw the budget's keys kept
	// until (0: none), sent with Versioned: a state missing before then
	// was lost, and its buckets restart empty (see lost).
	Seen int64
}

// Reply is acquire's reply without now_us and the state's xp, which the
// model does not keep; Lost says the call found the state lost (xp -1).
type Reply struct {
	Code   int
	Wait   int64
	Reason string
	Expiry int64
	Ticket int64
	Lost   bool
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
	r.Lost, b.found = b.found, false
	if _, still := b.queue[c.ID]; c.Limit > 0 && queued && !still {
		b.give(us/1000, us, c.Limit, c.BatchSlots, "", 0)
	}
	return r
}

// acquire works one call out in steps, each on an attempt, in the script's
// order: the definition's version, whether the call is over its tenant's
// share, its place among the slot queue's waiters, a pending lease's
// claim, each rate's wait, a stop or pause, a wait too long to reserve,
// and the admission.
func (b *Budget) acquire(us int64, c Call) Reply {
	a := &attempt{b: b, c: c, us: us, now: us / 1000, keep: -1, tk: us, blocked: true}
	if c.Versioned {
		if r, stale := a.definition(); stale {
			return r
		}
	}
	b.found = c.Versioned && b.lost(us, c)
	a.share()
	if a.conc = c.Limit > 0; a.conc {
		if r, done := a.line(); done {
			return r
		}
	}
	if a.isPending {
		return a.claim()
	}
	if r, done := a.rates(); done {
		return r
	}
	if r, done := a.held(); done {
		return r
	}
	if r, done := a.far(); done {
		return r
	}
	return a.admit()
}

// attempt is one acquire as its steps work it out: the call, the script's
// clock, and what each step found for the next ones.
type attempt struct {
	b   *Budget
	c   Call
	us  int64 // the script's clock
	now int64 // us in ms
	// dvw is the definition's version the admission writes ("": none).
	dvw string
	// overShare: a share the call's charge would take past its allowance,
	// swait µs until it is within. keep is the part of each budget rate's
	// allowance an interactive call over its share leaves (-1: none).
	overShare bool
	swait     int64
	keep      float64
	// With a concurrency limit (conc): the caller's ticket tk (µs) and
	// queue score mine; pend the score of its pending lease, if
	// isPending; the slots held and free once the waiters before it were
	// served, and blocked whether one of them is still queued.
	conc              bool
	tk, mine          int64
	isPending         bool
	pend, slots, free int64
	blocked           bool
	// Each bucket's TAT after the charge (µs); the longest wait w and its
	// step sp (ms), and reason, the rate that set it.
	tats   map[string]int64
	w, sp  float64
	reason string
	// probe: a stop's probe lets this call through.
	probe bool
}

// definition compares the caller's version of the definition with the
// state's copy, read from the definition key when missing or different,
// and keeps it for the admission to write. stale: the versions differ, r
// is the reply.
func (a *attempt) definition() (r Reply, stale bool) {
	b, mine := a.b, strconv.FormatInt(a.c.Version, 10)
	dv := b.dv
	if dv == "" {
		dv = b.def.stored()
		a.dvw = dv
	}
	if dv != mine {
		if a.dvw == "" {
			dv = b.def.stored()
		}
		if dv != mine {
			return Reply{3, 0, "definition", 0, b.def.v, false}, true
		}
		a.dvw = dv
	}
	return Reply{}, false
}

// share finds whether the call is over its tenant's share (a share its
// charge would take past its allowance), how long until it is within, and
// what an interactive call's priority keeps of each budget rate.
func (a *attempt) share() {
	c := a.c
	for _, ch := range c.Charges {
		if c.Tenant == "" || !isShare(ch.Field) {
			continue
		}
		if past := a.b.tenant(c.Tenant).from(ch.Field, a.us) + ch.Charge - a.us - ch.Allow; past > 0 {
			a.overShare, a.swait = true, max(a.swait, past)
		}
	}
	if c.Tenant != "" && c.OverShare && !c.Batch {
		a.keep = float64(c.KeepPPM) / 1e6
	}
}

// already answers 2: the id is in the lease set with score, pending or
// holding its slot.
func (a *attempt) already(score int64) Reply {
	if score >= pending {
		turn := score - pending - a.c.TTL
		return Reply{2, max(turn-a.now, 0), "", score - pending, turn * 1000, false}
	}
	return Reply{2, max(score-a.c.TTL-a.now, 0), "", score, 0, false}
}

// deny answers 0, or 2 when id is still in the lease set, ended or not.
// Whatever the path changed before (a queue) stays changed.
func (a *attempt) deny(wait int64, reason string) Reply {
	if a.c.Ticket == 0 || !a.conc {
		if held, ok := a.b.leases[a.c.ID]; ok {
			return a.already(held)
		}
	}
	return Reply{0, wait, reason, 0, 0, false}
}
