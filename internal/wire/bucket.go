package wire

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Bucket is one configured limit as the scripts see it: a GCRA bucket whose
// state is a single time, its theoretical arrival time (TAT) in
// microseconds on the Redis clock. The bucket is full at and after its TAT;
// at an earlier time t it holds (t + Span - TAT) / Interval units, which is
// negative while reserved turns or debt are pending.
//
// The scripts take times, not units: the caller converts a call's units
// into microseconds with Charge and Refund, so no script parses a rate or
// divides by one. Both round against the caller (a charge up, a refund
// down), by at most a microsecond per call.
type Bucket struct {
	Field    string  // the state hash field: rpm, tpm, rpd or tpd
	Capacity int64   // units a full bucket holds (the burst)
	Interval float64 // µs of refill per unit: window / refill
	Span     int64   // µs a full bucket holds: Capacity units, rounded up
	// Slack is added to every allowance: charges are rounded up, so calls
	// that together take exactly the capacity may sum to a few µs more
	// than Span, and must still fit a full bucket. It is under a
	// millisecond, so a wait (reported in whole ms, rounded up) is never
	// more than 1 ms short, and under half an Interval, so it never admits
	// a unit more than the bucket holds.
	Slack int64
	// Unit says what the bucket counts: requests (a call is charged 1),
	// tokens (input + output), or input or output tokens alone.
	Unit Unit
	// Sub is, for a strict sliding window, the width of its sub-windows
	// in µs (see NewSliding); 0 for a GCRA bucket. A sliding bucket's
	// charges, refunds and allowances are in units, not µs.
	Sub int64
	// Room is, for a tenant's share (a field that begins with '%'), the
	// most units its room for ShareCalls calls may reach: Share of the
	// budget rate's limit (see allowance).
	Room int64
}

// SlidingParts is how many sub-windows make a sliding window: the scripts
// count a window as SlidingParts + 1 of them, the oldest whole, so the
// check is exact in the safe direction, and steady throughput is at most
// SlidingParts / (SlidingParts + 1) of the limit (1.5% short). 32 parts
// (3% short) ran the storm's sliding scenario 5.1% over its floor, 64 parts
// 3.8%; each call sums at most 65 counts per rate.
const SlidingParts = 64

// NewSliding returns the bucket of a strict sliding window: at most limit
// units in any window, counted per sub-window of window / SlidingParts
// (rounded up to a µs). Its field is name marked for the scripts:
// "~<sub-window µs>:<name>".
func NewSliding(name string, limit int64, window time.Duration, unit Unit) Bucket {
	g := (window.Microseconds() + SlidingParts - 1) / SlidingParts
	return Bucket{Field: "~" + strconv.FormatInt(g, 10) + ":" + name, Capacity: limit, Interval: 1, Span: limit, Unit: unit, Sub: g}
}

// Unit is what a bucket counts.
type Unit int

// The units a bucket may count.
const (
	Requests Unit = iota // one per call
	Tokens               // input + output tokens
	Input                // input (prompt) tokens
	Output               // output tokens: the cap reserved, then the output used
	Spend                // money, in the unit of the budget's prices
)

// Use is a call's tokens: reserved at admission, or used at its end. Split
// says Input and Output are known; without it only Tokens is, and a bucket
// of input or output tokens takes Tokens as its bound.
type Use struct {
	Tokens, Input, Output int64
	Split                 bool
	// Spend is the money, in the unit of the budget's prices: reserved at
	// the worst case, or spent (an upper bound when Split is false).
	Spend int64
}

// Price is what a model's tokens cost per million, in the unit of a
// budget's Spend rates.
type Price struct {
	Input, CachedInput, Output float64
	// InputMargin is the share of a reservation's input estimate reserved
	// beyond it, for the estimator's error (0.25: 125% of it). It only
	// ever enlarges a reservation: usage is priced as it is.
	InputMargin float64
}

// Reserve returns what a reservation r may cost at most: input, enlarged by
// the margin, and output at their prices; or without the split all of r's
// tokens at the dearest of the output price and the enlarged input prices
// (any of them may be input).
func (p Price) Reserve(r Use) int64 {
	in := 1 + max(p.InputMargin, 0)
	if r.Split {
		return perMillion(float64(r.Input)*in*p.Input + float64(r.Output)*p.Output)
	}
	return perMillion(float64(r.Tokens) * max(in*p.Input, in*p.CachedInput, p.Output))
}

// Free reports whether every token of the model costs nothing.
func (p Price) Free() bool { return p.Input == 0 && p.CachedInput == 0 && p.Output == 0 }

// Bound returns what tokens cost at most, each at the dearest price.
func (p Price) Bound(tokens int64) int64 {
	return perMillion(float64(tokens) * max(p.Input, p.CachedInput, p.Output))
}

// Spent returns what a call cost: its input, of which cached was read from
// the provider's cache, and its output.
func (p Price) Spent(input, cached, output int64) int64 {
	cached = min(max(cached, 0), input)
	return perMillion(float64(input-cached)*p.Input + float64(cached)*p.CachedInput + float64(output)*p.Output)
}

// perMillion returns x / 1e6 rounded up: money is charged against the
// caller, as tokens are.
func perMillion(x float64) int64 { return int64(math.Ceil(x / 1e6)) }

// Of returns u's units in unit: 1 for requests, the tokens otherwise.
func (u Use) Of(unit Unit) int64 {
	switch {
	case unit == Requests:
		return 1
	case unit == Spend:
		return u.Spend
	case unit == Input && u.Split:
		return u.Input
	case unit == Output && u.Split:
		return u.Output
	}
	return u.Tokens
}

// NewBucket returns the bucket for a limit that holds capacity units and
// refills refill units per window, continuously, counting unit.
func NewBucket(field string, capacity, refill int64, window time.Duration, unit Unit) Bucket {
	iv := float64(window.Microseconds()) / float64(refill)
	return Bucket{
		Field: field, Capacity: capacity, Interval: iv, Unit: unit,
		Span:  int64(math.Ceil(float64(capacity) * iv)),
		Slack: max(0, min(999, int64(math.Ceil(iv/2))-1)),
	}
}

// Charge returns the µs a call of units takes from the bucket, rounded up
// (for a sliding window, the units).
func (b Bucket) Charge(units int64) int64 {
	if b.Sub > 0 {
		return units
	}
	return int64(math.Ceil(float64(units) * b.Interval))
}

// Refund returns the µs that giving back units returns, rounded down (for
// a sliding window, the units).
func (b Bucket) Refund(units int64) int64 {
	if b.Sub > 0 {
		return units
	}
	return int64(math.Floor(float64(units) * b.Interval))
}

// Allowance returns how far past now the bucket's TAT may move for a call
// to be admitted without waiting: Span for interactive calls, and for batch
// calls Span less the share keep (a fraction) that batch calls leave; plus
// Slack.
func (b Bucket) Allowance(keep float64) int64 {
	if b.Sub > 0 {
		// The units of the window the call may see used, its own included.
		return b.Capacity - int64(math.Floor(float64(b.Capacity)*keep))
	}
	if keep == 0 {
		return b.Span + b.Slack
	}
	return int64(math.Ceil((float64(b.Capacity)-float64(b.Capacity)*keep)*b.Interval)) + b.Slack
}

// ShareCalls is how many calls a tenant's share ('%' bucket) has room
// for, however small its part of the budget's burst (Share of a burst of
// ten calls is one or two), up to its Room: a tenant whose calls arrive at
// random at 80% of its share finds about 7 of them outstanding 5% of the
// time (the storm's tenants scenario), and is then still within it. See
// pacer.Tenants.Share.
const ShareCalls = 8

// allowance returns a call's allowance in the bucket for a charge of
// charge µs: Allowance(keep); for a tenant's share at least ShareCalls
// such charges, but no more than Room units, plus Slack.
func (b Bucket) allowance(charge int64, keep float64) int64 {
	a := b.Allowance(keep)
	if strings.HasPrefix(b.Field, "%") {
		room := int64(math.Ceil(float64(b.Room) * b.Interval))
		a = max(a, min(ShareCalls*charge, room)+b.Slack)
	}
	return a
}

// Units returns what a call of tokens takes from the bucket: its tokens, or
// one request. A bucket of input or output tokens takes all of them: it
// cannot tell the two apart.
func (b Bucket) Units(tokens int64) int64 {
	return Use{Tokens: tokens}.Of(b.Unit)
}

// Level returns the units the bucket holds at nowUs given its stored TAT
// (ok false: none stored, the bucket is full). It is at most Capacity and
// negative while turns or debt are pending.
func (b Bucket) Level(nowUs, tat int64, ok bool) float64 {
	if !ok || tat <= nowUs {
		return float64(b.Capacity)
	}
	return math.Min(float64(b.Capacity), float64(nowUs+b.Span-tat)/b.Interval)
}

// Lowering returns what a refused call of units sends pause.lua to lower
// the bucket: the offset, the bucket's span less the call's charge (its
// units, at most the capacity), so that when the pause ends the bucket
// holds just the call's share; and the limit, two spans, so that it never
// goes below minus one full bucket.
func (b Bucket) Lowering(units int64) (offset, limit int64) {
	return b.Span - b.Charge(min(units, b.Capacity)), 2 * b.Span
}
