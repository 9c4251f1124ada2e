package pacer

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// call is one Request worked out once, under one definition of the budget:
// what it reserves in the buckets' units, at which weight and price, its
// tenant, and the keys and buckets its scripts run on. Every step of an
// Acquire, and the lease it opens, reads it: nothing is worked out twice,
// and a lease charged under one definition ends under it, whatever
// definition is in force by then (see acquisition.under).
type call struct {
	p       *Pacer
	s       *settings
	r       Request // with its total (withTotal)
	use     wire.Use
	weight  float64
	price   wire.Price
	priced  bool   // the model has a price (a budget with Spend rates)
	tenant  string // the tenant's key; "" for a call charged to the budget alone
	keys    []string
	buckets []wire.Bucket
}

// callOf works r (with its total) out under definition s.
func (p *Pacer) callOf(s *settings, r Request) *call {
	r = r.withTotal()
	c := &call{p: p, s: s, r: r, keys: p.keys, buckets: s.wireBuckets, weight: 1}
	if w, ok := s.weights[r.Model]; ok {
		c.weight = w
	}
	c.price, c.priced = s.price(r)
	c.use = wire.Reserved(r.Tokens, r.Input, r.Output, c.weight, c.price, c.priced)
	if r.Tenant != "" {
		c.tenant = p.tenantKey(r.Tenant)
		c.keys = append(p.keys[:len(p.keys):len(p.keys)], c.tenant)
		c.buckets = s.withTenant
	}
	return c
}

// now returns the call under the definition in force: c itself, unless
// another was adopted since c was worked out.
func (c *call) now() *call {
	if s := c.p.s(); s != c.s {
		return c.p.callOf(s, c.r)
	}
	return c
}

// admission returns the lease fields of the call's admission as id: what
// it reserved, at which weight and price, and its tenant.
func (c *call) admitAs(id string) admission {
	return admission{
		ID: id, Tokens: c.r.Tokens, Priority: c.r.Priority, Reserve: c.use, Weight: c.weight,
		Price: c.price, Priced: c.s.spend, TenantKey: c.tenant,
	}
}

// open returns the lease of an admission charged under c's definition,
// which it ends against.
func (c *call) open(ad admission) *Lease {
	return openLease(c.s.budget, ad)
}

// prepare readies r for an acquire: the definition settled, r checked,
// and worked out under the definition in force.
func (p *Pacer) prepare(ctx context.Context, r Request) (*call, error) {
	if err := p.settleDefinition(ctx); err != nil {
		return nil, err
	}
	return p.checked(r)
}

// checked checks r and works it out under the definition in force.
func (p *Pacer) checked(r Request) (*call, error) {
	if err := checkTokens("", r); err != nil {
		return nil, err
	}
	c := p.callOf(p.s(), r)
	return c, c.check()
}

// check checks a call against its definition: an error names the field to
// fix, or says the call can never fit (ErrTooLarge).
func (c *call) check() error {
	r, s := c.r, c.s
	if r.Priority != Interactive && r.Priority != Batch {
		return invalidf("Request.Priority = %d: use pacer.Interactive or pacer.Batch", int(r.Priority))
	}
	if r.Tenant != "" && s.withTenant == nil {
		return invalidf("Request.Tenant is set but Config.Tenants is empty: give tenants their Rates or a Share, or leave Tenant empty")
	}
	if len(r.Tenant) > maxTenantLen {
		return invalidf("Request.Tenant is %d bytes long: use at most %d (an id, not a payload)", len(r.Tenant), maxTenantLen)
	}
	if r.MaxWait < 0 || r.MaxWait > maxDur {
		return invalidf("Request.MaxWait = %v: must be between 0 (Config.MaxWait) and %v", r.MaxWait, maxDur)
	}
	// The same comparison as acquire.lua's, on the same integers.
	if s.spend && !c.priced {
		return invalidf("Request.Model = %q has no price in Config.Prices: a Spend rate needs one; add it, or a \"\" entry for models not listed", r.Model)
	}
	for _, b := range c.buckets {
		if strings.HasPrefix(b.Field, "%") {
			continue // a share never holds a call back
		}
		need := c.use.Of(b.Unit)
		name := strings.ToUpper(b.Field)
		// Units first: a charge for an absurd count would not fit an int64.
		if need > b.Capacity || b.Charge(need) > b.Allowance(0) {
			return fmt.Errorf("%w: %d %s exceed the %s bucket's capacity of %d; split the call, lower max output tokens, or raise its limit or burst", ErrTooLarge, need, unitWord(b.Unit), name, b.Capacity)
		}
		if r.Priority == Batch && b.Charge(need) > b.Allowance(s.keep) {
			return fmt.Errorf("%w: a batch call may not take the last %.0f%% of the %s bucket (capacity %d), so %d %s can never fit; send it as Interactive, split it, or lower Config.BatchFloor", ErrTooLarge, 100*s.keep, name, b.Capacity, need, unitWord(b.Unit))
		}
	}
	return nil
}

// redefined follows the definition stored, which an acquire found differs
// from the one the call was worked out under, and returns the call worked
// out and checked again under it. n counts the definitions one call
// followed: a budget redefined faster than a call can follow is an error,
// not a loop.
func (c *call) redefined(ctx context.Context, n *int) (*call, error) {
	p := c.p
	if *n++; *n > 3 {
		return nil, fmt.Errorf("pacer: the definition of %q changed %d times during one call; retry", p.local.Name, *n)
	}
	if err := p.reload(ctx); err != nil {
		return nil, err
	}
	next := p.callOf(p.s(), c.r)
	return next, next.check()
}

// args returns acquire.lua's ARGV for the call as id.
func (c *call) args(id string, maxWait time.Duration, ticket int64) []any {
	r, s, p := c.r, c.s, c.p
	keep := 0.0
	if r.Priority == Batch {
		keep = s.keep
	}
	a := wire.Acquire{
		ID: id, Batch: r.Priority == Batch, MaxWait: maxWait, TTL: s.leaseTTL,
		Limit: s.limits.Concurrency, BatchSlots: wire.Slots(s.limits.Concurrency, s.keep), Spacing: 1, Ticket: ticket,
		Charges:   wire.Charges(c.buckets, c.use, keep),
		Versioned: true, Version: s.version, Seen: p.seen.Load(),
	}
	if r.Tenant != "" && r.Priority == Interactive && s.share > 0 {
		// Over its share, the call leaves room for tenants within theirs.
		a.OverShare = true
		a.KeepPPM = int64(math.Floor(wire.ShareKeep(a.Charges, s.keep) * 1e6))
	}
	if n := s.limits.Concurrency; n > 0 {
		// Slots free up one every mean hold time / limit: how long each
		// waiter ahead in the slot queue adds (100 ms until a lease of this
		// Pacer ends).
		hold := 100.0
		if h := p.hold.Load(); h != 0 {
			hold = math.Float64frombits(h)
		}
		a.Spacing = int64(math.Ceil(hold / float64(n)))
	}
	return a.Args()
}

// acquireOnce runs acquire.lua once for the call as id, with its ticket
// (0 on its first attempt). It also returns the µs at which the buckets
// were charged, as settle.lua wants it: the reply's clock, or for an id
// admitted before (by an attempt whose reply go-redis lost and resent, or
// by a freed slot while it waited in the queue) a lower bound, the clock
// less the time since the call began.
func (c *call) acquireOnce(ctx context.Context, id string, maxWait time.Duration, ticket int64, began time.Time) (wire.AcquireReply, int64, error) {
	p := c.p
	late := func(v any) {
		if rep, err := wire.DecodeAcquire(v); err == nil {
			c.undoLate(rep, id, maxWait, began)
		}
	}
	var v any
	var err error
	if ticket == 0 {
		// A first attempt: by group commit.
		v, err = p.acquires.run(ctx, c.tenant, c.args(id, maxWait, ticket), late)
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("pacer: redis on %q: %w", p.s().name, err)
		}
	} else {
		v, err = p.callKeys(ctx, c.keys, lua.Acquire, c.args(id, maxWait, ticket), late)
	}
	if err != nil {
		return wire.AcquireReply{}, 0, err
	}
	rep, err := wire.DecodeAcquire(v)
	if err != nil {
		return wire.AcquireReply{}, 0, fmt.Errorf("pacer: acquire on %q: %w", c.s.name, err)
	}
	p.saw(rep)
	return rep, chargedAt(rep, began), nil
}

// undoLate undoes an acquire whose reply came after the caller gave up:
// it gives the lease back, or leaves the slot queue. A caller that sent a
// ticket was queued before and also leaves by itself (see
// acquisition.abandon), but that leave and this ask go on two connections
// in no set order: a leave that lands first finds nobody queued, and the
// ask then queues the caller again, so a queued reply always leaves (a
// second leave finds nobody and changes nothing).
func (c *call) undoLate(rep wire.AcquireReply, id string, maxWait time.Duration, began time.Time) {
	// What the reply says of the state holds whoever waits for it: a loss
	// this call found, and restarted the buckets from, is reported (no
	// other call will find it).
	c.p.saw(rep)
	switch {
	case rep.Code == wire.Admitted || rep.Code == wire.Already:
		ad := c.admitAs(id)
		ad.Start, ad.Expiry, ad.ChargedUs, ad.TurnMs, ad.Quiet = rep.Now, rep.Expiry, chargedAt(rep, began), rep.TurnMs(), true
		c.p.giveBack(c.open(ad))
	case rep.Ticket != 0:
		c.leave(id, rep.Ticket, time.Now().Add(maxWait))
	}
}

// leave takes a waiter that gives up (the call as id) out of the slot
// queue, in the background. A freed slot may have admitted it meanwhile,
// or may do so until it leaves, so it leaves as a lease that is canceled
// (see giveBack): settle.lua removes an id that is not a lease from the
// queue, and ends one that is, giving its tokens back and its slot to the
// next waiter. chargedUs is a lower bound of when it may have been
// charged; deadline the end of its wait, after which the budget admits it
// no more. Until a settle lands, or the lease it may hold expires, it
// retries while Redis fails. The call's definition is the one it queued
// under, which a hand-over charged it under.
func (c *call) leave(id string, chargedUs int64, deadline time.Time) {
	ad := c.admitAs(id)
	ad.Start, ad.Expiry, ad.ChargedUs, ad.Quiet = time.Now(), deadline.Add(c.s.leaseTTL), chargedUs, true
	c.p.giveBack(c.open(ad))
}

// chargedAt returns when an admission of a call that began at began
// charged the buckets.
func chargedAt(rep wire.AcquireReply, began time.Time) int64 {
	if rep.Code == wire.Already {
		return rep.NowUs - time.Since(began).Microseconds() - 1000
	}
	return rep.NowUs
}
