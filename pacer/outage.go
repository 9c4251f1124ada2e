package pacer

import (
	"math"
	"slices"
	"strings"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Outage says what a budget does while its Redis is unreachable. The zero
// value fails closed, as a budget always did: no call is admitted until
// Redis answers, each call asks Redis, and each is refused with an error
// that matches ErrUnavailable.
//
// A limit listed in FailOpen fails open instead: while Redis is down, this
// process admits calls from a limiter of its own that refills at Share of
// the limit (1/Replicas), so that the fleet together stays within the
// limit rather than multiplying it by the number of processes. The local
// limiter starts empty when Redis is lost, since the shared budget may
// have been spent: over an outage of length T the fleet admits at most
// the limit's refill over T, and a call waits for its share to refill
// (its burst is Share of the limit's burst). Fail open what
// protects the provider's servers (requests per minute, calls in flight);
// keep closed what protects money (token quotas, spend). Spend rates can
// never fail open.
//
// Every call counts against every limit of its budget: a request limit
// counts it, concurrency its slot, a token or spend limit its usage at
// Settle. So a call is admitted locally only when every limit of its
// budget fails open. A call that reserves 0 tokens of a fail-closed token
// limit is refused too: its usage, known only at Settle, could never be
// charged to it. The one exception is a Spend rate and a model priced at
// zero, which can never be charged.
//
// While Redis is down no call asks it: after the first connection-class
// error (refused, reset, timed out, loading, cluster down) a probe asks it
// every 200 ms in the background, and the first answer hands admission
// back to the shared budget. Redis events say when (Err set: lost; nil:
// found again).
// A lease admitted locally ends locally (LeaseInfo.Local): settling it,
// releasing or canceling it never touches Redis, before or after Redis
// comes back, so it is neither lost nor counted twice. Calls admitted
// locally and still running when Redis returns are not counted by the
// shared budget: for their duration the fleet may run up to its local
// share above a limit.
type Outage struct {
	// FailOpen lists the limits that fail open, by name: "rpm", "tpm",
	// "rpd", "tpd", "concurrency", or a Config.Rates entry's Rate.Name().
	// Each must be a limit of the budget.
	FailOpen []string
	// Replicas is how many processes share the budget: each admits at
	// most 1/Replicas of every open limit while Redis is down. Set it, or
	// Share, when FailOpen is set.
	Replicas int
	// Share is the fraction of every open limit this process may use while
	// Redis is down, in (0, 1], when Replicas does not fit (processes of
	// unequal weight). Set Replicas or Share, not both.
	Share float64
	// FailFast makes a budget that fails closed detect Redis down as one
	// with FailOpen does: after the first connection-class error, calls
	// are refused at once instead of each waiting out the client's dials
	// and retries, until the probe sees Redis answer, and Redis events
	// say when. A budget with FailOpen always does.
	FailFast bool
}

// outageSettings is a validated Config.Outage.
type outageSettings struct {
	circuit bool            // the budget has an outage circuit (FailOpen or FailFast)
	open    map[string]bool // the limits that fail open; nil: none
	share   float64
	local   []wire.Bucket // this process's share of each open rate limit
	slots   int64         // its share of an open concurrency limit; 0: none
}

// limitOf returns the name a bucket's limit goes by in Config.Outage and in
// events: its field, without a sliding window's "~<µs>:" mark.
func limitOf(b bucket) string {
	if strings.HasPrefix(b.field, "~") {
		if _, name, ok := strings.Cut(b.field, ":"); ok {
			return name
		}
	}
	return b.field
}

// outageSettings checks c.Outage against the budget s describes and builds
// the local limiter's buckets.
func (c Config) outageSettings(s settings) (outageSettings, error) {
	o := c.Outage
	if len(o.FailOpen) == 0 {
		if o.Replicas != 0 || o.Share != 0 {
			return outageSettings{}, invalidf("Config.Outage sets Replicas or Share but FailOpen is empty: list the limits that fail open, or leave them zero to fail closed")
		}
		return outageSettings{circuit: o.FailFast}, nil
	}
	switch {
	case o.Replicas < 0 || o.Replicas > 1_000_000:
		return outageSettings{}, invalidf("Config.Outage.Replicas = %d: must be between 1 and 1000000, the number of processes sharing the budget", o.Replicas)
	case math.IsNaN(o.Share) || o.Share < 0 || o.Share > 1:
		return outageSettings{}, invalidf("Config.Outage.Share = %v: must be a fraction in (0, 1], this process's part of each open limit", o.Share)
	case o.Replicas != 0 && o.Share != 0:
		return outageSettings{}, invalidf("Config.Outage sets both Replicas (%d) and Share (%v): set one", o.Replicas, o.Share)
	case o.Replicas == 0 && o.Share == 0:
		return outageSettings{}, invalidf("Config.Outage.FailOpen is set but neither Replicas nor Share: say how many processes share the budget, so that failing open stays within the limit")
	}
	share := o.Share
	if o.Replicas != 0 {
		share = 1 / float64(o.Replicas)
	}
	out := outageSettings{circuit: true, open: map[string]bool{}, share: share}
	buckets := s.configured()
	for _, name := range o.FailOpen {
		i := slices.IndexFunc(buckets, func(b bucket) bool { return limitOf(b) == name })
		switch {
		case name == nameConcurrency && s.limits.Concurrency > 0:
		case i < 0:
			return outageSettings{}, invalidf("Config.Outage.FailOpen names %q, which is not a limit of the budget: use %s", name, strings.Join(limitNames(s), ", "))
		case buckets[i].unit == Spend:
			return outageSettings{}, invalidf("Config.Outage.FailOpen names %q, a Spend rate: spend can never fail open, since money spent while Redis is down cannot be taken back; leave it out", name)
		}
		out.open[name] = true
	}
	for _, b := range buckets {
		if !out.open[limitOf(b)] {
			continue
		}
		lb, err := localBucket(b, share)
		if err != nil {
			return outageSettings{}, err
		}
		out.local = append(out.local, lb)
	}
	if out.open[nameConcurrency] {
		out.slots = int64(math.Floor(float64(s.limits.Concurrency) * share))
		if out.slots < 1 {
			return outageSettings{}, invalidf("Config.Outage: a share of %.4g of Limits.Concurrency = %d leaves this process no slot while Redis is down; keep concurrency closed, or use fewer replicas", share, s.limits.Concurrency)
		}
	}
	return out, nil
}

// localBucket returns share of bucket b, as this process's limiter holds
// it while Redis is down: the same shape (burst and refill) scaled down. A
// strict sliding window becomes a refilling bucket of half its share with
// half its share of refill, which never admits more than its share in any
// window either.
func localBucket(b bucket, share float64) (wire.Bucket, error) {
	name := string(limitOf(b))
	capacity, refill := b.capacity*share, b.perMs*float64(b.window.Milliseconds())*share
	if b.wb.Sub > 0 {
		capacity, refill = float64(b.limit)*share/2, float64(b.limit)*share/2
	}
	// Rounded to a unit first: refill is a product of floats.
	c, r := int64(math.Floor(math.Round(capacity*1e6)/1e6)), int64(math.Floor(math.Round(refill*1e6)/1e6))
	if c < 1 || r < 1 {
		return wire.Bucket{}, invalidf("Config.Outage: a share of %.4g of %s (%d per %v) leaves this process less than one %s while Redis is down; keep %s closed, or use fewer replicas",
			share, name, b.limit, b.window, strings.TrimSuffix(unitWord(b.wb.Unit), "s"), name)
	}
	return wire.NewBucket(name, c, r, b.window, b.wb.Unit), nil
}

// limitNames lists the names of the budget's limits, for errors.
func limitNames(s settings) []string {
	var out []string
	for _, b := range s.configured() {
		out = append(out, string(limitOf(b)))
	}
	if s.limits.Concurrency > 0 {
		out = append(out, string(nameConcurrency))
	}
	return out
}

// closedFor returns the fail-closed limit that refuses the call while
// Redis is down, if any: see Outage for why every limit counts every call.
func (c *call) closedFor() (string, bool) {
	s := c.s
	o := s.outage
	for _, b := range s.configured() {
		name := limitOf(b)
		if o.open[name] {
			continue
		}
		if b.unit == Spend {
			if c.priced && c.price.Free() {
				continue // a free model is never charged
			}
		}
		return name, true
	}
	if s.limits.Concurrency > 0 && !o.open[nameConcurrency] {
		return nameConcurrency, true
	}
	// A tenant's own rates live in Redis only: no local share can keep
	// them, so a tenant's call fails closed on them.
	if c.r.Tenant != "" && len(s.tenantRates) > 0 {
		return "@" + s.tenantRates[0].Name(), true
	}
	return "", false
}
