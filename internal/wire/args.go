package wire

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Charge is one bucket's part of an acquire: the call's charge and its
// allowance, in µs of the bucket's time (see acquire.lua).
type Charge struct {
	Field         string
	Charge, Allow int64
	// Empty is what the bucket restarts at when its state was lost: its
	// span in µs (a sliding window: its limit in units), or 0 for a
	// tenant's bucket, which restarts full (see Acquire.Seen).
	Empty int64
}

// Charges returns what a call reserving r sends acquire for each bucket.
// keep is the share of every bucket the call must leave: the batch floor
// for a batch call, 0 for an interactive one.
func Charges(buckets []Bucket, r Use, keep float64) []Charge {
	cs := make([]Charge, len(buckets))
	for i, b := range buckets {
		c := b.Charge(r.Of(b.Unit))
		cs[i] = Charge{Field: b.Field, Charge: c, Allow: b.allowance(c, keep)}
		if f := b.Field[0]; f != '@' && f != '%' {
			cs[i].Empty = b.Span
		}
	}
	return cs
}

// ShareKeep returns the fraction of every budget bucket that a tenant's
// call past its share leaves to tenants within theirs, from the call's
// charges cs: room for ShareCalls calls like it, up to half the bucket, and
// at least floor (the batch floor). The batch floor alone (a fifth of a
// burst of twelve calls) left light tenants two calls to absorb their
// random arrivals beside a heavy one: their p95 wait ran past a call's
// refill. It is never so much that the call could not fit at all.
func ShareKeep(cs []Charge, floor float64) float64 {
	keep, fit := floor, 1.0
	for _, c := range cs {
		if f := c.Field[0]; f == '@' || f == '%' || c.Allow <= 0 {
			continue
		}
		a := float64(c.Allow)
		keep = max(keep, min(ShareCalls*float64(c.Charge), a/2)/a)
		fit = min(fit, float64(c.Allow-c.Charge)/a)
	}
	return max(0, min(keep, fit))
}

// Slots returns the concurrency slots a call may use under a limit of conc
// (0: no limit): all of them, or for a call that must leave keep of them,
// the rest.
func Slots(conc int64, keep float64) int64 {
	if conc == 0 {
		return 0
	}
	return conc - int64(math.Floor(float64(conc)*keep))
}

// Acquire is one acquire call, as its caller computed it.
type Acquire struct {
	ID      string
	Batch   bool
	MaxWait time.Duration // how far ahead the call may reserve its turn, and wait for a slot
	TTL     time.Duration // the lease's TTL
	// Limit is the concurrency limit (0: none), and BatchSlots the slots a
	// batch call may use (see Slots).
	Limit, BatchSlots int64
	Spacing           int64 // ms between two slots freeing, at least 1
	// Ticket is 0 on a call's first attempt, then the ticket a reply gave:
	// it keeps the call's place in the slot queue and claims its slot.
	Ticket  int64
	Charges []Charge
	// OverShare says the call is a tenant's interactive one: past its
	// share, it is served as a batch call that leaves KeepPPM millionths
	// of each of the budget's buckets (sent as priority "0:<ppm>").
	OverShare bool
	KeepPPM   int64
	// Versioned sends Version, the version of the definition the caller
	// runs (0: none stored), as the last argument: acquire.lua answers
	// Stale when another is stored. It needs the definition key as
	// KEYS[4].
	Versioned bool
	Version   int64
	// Seen is the latest expiry (ms on the Redis clock) the caller saw
	// the budget's keys kept until (0: none seen). Sent after the version
	// (it needs Versioned) with each bucket's Empty: a state found to keep
	// them less long, before Seen, was lost, and its missing buckets
	// restart empty rather than full (see acquire.lua).
	Seen int64
}

// Args returns acquire.lua's ARGV.
func (a Acquire) Args() []any {
	batch := 0
	if a.Batch {
		batch = 1
	}
	args := make([]any, 0, 8+3*len(a.Charges))
	var priority any = batch
	if a.OverShare && !a.Batch {
		priority = "0:" + strconv.FormatInt(a.KeepPPM, 10)
	}
	args = append(args, a.ID, priority, a.MaxWait.Milliseconds(), a.TTL.Milliseconds(), a.Limit, a.BatchSlots, max(1, a.Spacing), a.Ticket)
	for _, c := range a.Charges {
		args = append(args, c.Field)
	}
	for _, c := range a.Charges {
		args = append(args, c.Charge, c.Allow)
	}
	if a.Versioned {
		args = append(args, a.Version)
		if a.Seen > 0 {
			args = append(args, a.lost())
		}
	}
	return args
}

// lost returns the argument that lets acquire.lua tell a lost state: Seen
// and each bucket's Empty, space-separated.
func (a Acquire) lost() string {
	b := make([]byte, 0, 16+12*len(a.Charges))
	b = strconv.AppendInt(b, a.Seen, 10)
	for _, c := range a.Charges {
		b = append(b, ' ')
		b = strconv.AppendInt(b, c.Empty, 10)
	}
	return string(b)
}

// Correction is one bucket's part of a settle, in µs of the bucket's time:
// negative gives back, positive charges a debt.
type Correction struct {
	Field string
	Us    int64
	// At is, for a sliding window's give-back, the sub-window the call was
	// counted in (sent as "<units>@<at>").
	At      int64
	Sliding bool
	// Allow is, for a tenant's share (a field marked '%'), the share's
	// allowance in µs, as an interactive call's acquire sends it (sent as
	// "<µs>:<allow>"): settle keeps a debt's TAT within now + 2 × Allow,
	// as acquire keeps a charge's.
	Allow int64
}

// Corrections returns what ending a lease sends settle for each bucket it
// changes, when the call reserved r and really used u (u = r for a failed
// call that keeps its reservation, zero for one refused or never sent);
// request says whether the request itself is given back too (a call never
// sent). Each bucket gets its own correction, of its own sign: one settle
// may carry a debt for one bucket and a give-back for another (less input
// and more output than reserved), and a token bucket gets the net. A
// debt (used > reserved) is charged at most one full bucket, so one wildly
// wrong estimate holds the budget back for at most a window more.
//
// A usage without its split (only Tokens known) bounds the input and the
// output used by its total: an input or output bucket gets back what its
// reservation exceeds that total by, and is charged no debt.
//
// A sliding window's give-back comes off the sub-window of the call's turn,
// turnMs on the Redis clock; with turnMs 0 (not known exactly) it gives
// nothing back, the safe side.
func Corrections(buckets []Bucket, r, u Use, request bool, turnMs int64) []Correction {
	var cs []Correction
	for _, b := range buckets {
		var back int64 // units given back; negative: owed
		switch {
		case b.Unit == Requests:
			if request {
				back = 1
			}
		case b.Unit == Spend && !u.Split:
			back = max(r.Spend-u.Spend, 0) // u.Spend is only a bound
		case b.Unit != Tokens && !u.Split:
			back = max(r.Of(b.Unit)-u.Tokens, 0)
		default:
			back = r.Of(b.Unit) - u.Of(b.Unit)
		}
		var d int64
		switch {
		case back > 0:
			d = -b.Refund(back)
		case back < 0:
			d = b.Charge(min(-back, b.Capacity))
		}
		switch {
		case d == 0:
		case b.Sub > 0 && d < 0 && turnMs <= 0:
		case b.Sub > 0:
			cs = append(cs, Correction{Field: b.Field, Us: d, At: turnMs * 1000 / b.Sub, Sliding: true})
		case strings.HasPrefix(b.Field, "%"):
			cs = append(cs, Correction{Field: b.Field, Us: d, Allow: b.allowance(b.Charge(r.Of(b.Unit)), 0)})
		default:
			cs = append(cs, Correction{Field: b.Field, Us: d})
		}
	}
	return cs
}

// KeepAliveArgs returns keepalive.lua's ARGV for lease id, renewed for
// ttl, on a budget whose concurrency limit is limit (0: none) and whose
// batch calls may use bslots slots: a slot an expired lease freed goes to
// the next waiter.
func KeepAliveArgs(id string, ttl time.Duration, limit, bslots int64) []any {
	if limit == 0 {
		return []any{id, ttl.Milliseconds()}
	}
	return []any{id, ttl.Milliseconds(), limit, bslots}
}

// SettleArgs returns settle.lua's ARGV for lease id, charged at chargedUs
// (µs, Redis clock), with corrections cs, on a budget whose concurrency
// limit is limit (0: none) and whose batch calls may use bslots slots: a
// slot freed goes to the next waiter.
func SettleArgs(id string, chargedUs, limit, bslots int64, cs []Correction) []any {
	args := make([]any, 0, 4+2*len(cs))
	args = append(args, id, chargedUs, limit, bslots)
	for _, c := range cs {
		if c.Sliding {
			args = append(args, c.Field, strconv.FormatInt(c.Us, 10)+"@"+strconv.FormatInt(c.At, 10))
			continue
		}
		if c.Allow > 0 {
			args = append(args, c.Field, strconv.FormatInt(c.Us, 10)+":"+strconv.FormatInt(c.Allow, 10))
			continue
		}
		args = append(args, c.Field, c.Us)
	}
	return args
}
