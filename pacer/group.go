package pacer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Policy says in which order a Group offers a call to its deployments.
// Whatever the order, a call goes to a deployment with room now whenever
// one has: the order only chooses among those.
type Policy int

const (
	// FillInOrder offers each call to the deployments in the order given:
	// the first fills up before the second gets a call, so list a cheaper
	// or nearer deployment first. It is the zero value.
	FillInOrder Policy = iota
	// Spread offers each call first to a deployment drawn at random in
	// proportion to the weights, then to the others in a like order:
	// while several have room, each gets its weight's share of the calls.
	Spread
	// MostRoom offers each call first to the deployment with the most
	// room left after it, as a fraction of its capacity in its tightest
	// rate, read in the same script call: the deployments fill evenly,
	// whatever their sizes, and a deployment someone else drains gets
	// fewer calls at once. Equal room goes in the order given. Weights
	// are not used. Concurrency slots and strict sliding rates do not
	// count towards room (a deployment without room there is still
	// passed over). Where the deployments do not share a script call
	// (see NewGroup), it offers calls in the order given.
	MostRoom
)

// Deployment is one budget of a Group: a region, project or key with its
// own limits, serving the same model as the group's others.
type Deployment struct {
	// Pacer is the deployment's budget (its own Config, limits and name).
	Pacer *Pacer
	// Weight is the deployment's share of the calls under Spread, while
	// several deployments have room: its size (its TPM, say) spreads calls
	// in proportion to room. 0 means 1. FillInOrder ignores it.
	Weight float64
}

// GroupConfig describes a Group.
type GroupConfig struct {
	// Deployments are the budgets, at least 1 and at most 16, each a
	// different budget. Give them one Config.HashTag so that a call is
	// routed in one round trip on a Redis Cluster (see NewGroup).
	Deployments []Deployment
	// Policy is the order in which a call is offered to the deployments.
	Policy Policy
	// Cooldown is how long retry.RunGroup and the transport of package
	// pacerhttp take a deployment out of the group, for every process, when a call
	// to it fails as overloaded or with a server error or a broken
	// connection: they pause its budget (Pacer.Pause). Default 5 seconds;
	// negative: never.
	Cooldown time.Duration
}

// defaultCooldown is GroupConfig.Cooldown's default.
const defaultCooldown = 5 * time.Second

// maxDeployments bounds GroupConfig.Deployments: every one is tried in one
// script, which Redis runs alone.
const maxDeployments = 16

// Group routes each call to one of several budgets (deployments of one
// model: regions, projects, keys, or a fallback provider), so that no call
// waits on a full deployment while another has room.
//
// A call is admitted on a deployment that has room now, the first in the
// Policy's order; when none has, it waits, first come, first served, on the
// deployment whose room comes first: it reserves its turn there, or queues
// for a slot, as Pacer.Acquire would. A deployment that is paused (a 429),
// stopped (an exhausted quota, an operator) or cooling down after failures
// is passed over by every process, as its state lives in its budget.
// Each deployment keeps its own limits: a group never admits more on one
// than its budget allows, whoever else uses that budget.
//
// One script call (route.lua) tries every deployment, when their budgets
// are on one Redis and, on a Redis Cluster, share a hash slot
// (Config.HashTag). Otherwise each is tried with its own call.
//
// Acquire and TryAcquire mirror the Pacer's, and say which deployment they
// chose; retry.RunGroup retries a call on a group. A Group is safe for simultaneous use by
// multiple goroutines.
type Group struct {
	ds       []Deployment
	policy   Policy
	cooldown time.Duration
	weights  []float64
	// one says the deployments can be tried in one script call.
	one bool
}

// NewGroup returns a Group of cfg's deployments. It validates cfg and does
// not contact Redis.
//
// Deployments whose Pacer is a shadow (Config.Shadow) or may fail open
// while Redis is down (Config.Outage) are refused with ErrInvalid: a group
// cannot yet route without the shared state.
func NewGroup(cfg GroupConfig) (*Group, error) {
	n := len(cfg.Deployments)
	if n == 0 || n > maxDeployments {
		return nil, invalidf("GroupConfig.Deployments has %d deployments: give 1 to %d", n, maxDeployments)
	}
	if cfg.Policy != FillInOrder && cfg.Policy != Spread && cfg.Policy != MostRoom {
		return nil, invalidf("GroupConfig.Policy = %d: use pacer.FillInOrder, pacer.Spread or pacer.MostRoom", int(cfg.Policy))
	}
	g := &Group{ds: append([]Deployment(nil), cfg.Deployments...), policy: cfg.Policy, cooldown: cfg.Cooldown, one: true}
	if g.cooldown == 0 {
		g.cooldown = defaultCooldown
	}
	if g.cooldown > maxDur {
		return nil, invalidf("GroupConfig.Cooldown = %v: at most %v", g.cooldown, maxDur)
	}
	seen := map[string]int{}
	tag := ""
	for i, d := range g.ds {
		p := d.Pacer
		if p == nil {
			return nil, invalidf("GroupConfig.Deployments[%d].Pacer is nil", i)
		}
		if d.Weight < 0 || math.IsNaN(d.Weight) || math.IsInf(d.Weight, 0) {
			return nil, invalidf("GroupConfig.Deployments[%d].Weight = %v: use a positive number, or 0 for 1", i, d.Weight)
		}
		if j, ok := seen[p.keys[0]]; ok {
			return nil, invalidf("GroupConfig.Deployments[%d] and [%d] are the same budget %q: list each deployment once", j, i, p.s().name)
		}
		seen[p.keys[0]] = i
		if p.s().shadow || p.out != nil {
			return nil, invalidf("GroupConfig.Deployments[%d] (%q) has Config.Shadow or Config.Outage set: a Group does not route shadow budgets or fail open yet", i, p.s().name)
		}
		w := d.Weight
		if w == 0 {
			w = 1
		}
		g.weights = append(g.weights, w)
		t := hashTag(p.keys[0])
		if i == 0 {
			tag = t
		}
		// One script reaches every budget on one server; on a cluster
		// (or a ring) only if their keys share a slot.
		if p.sub != g.ds[0].Pacer.sub {
			g.one = false
		}
		if !singleServer(p) && t != tag {
			g.one = false
		}
	}
	return g, nil
}

// hashTag returns the hash tag of a key: what lies between its first '{'
// and the next '}'.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	j := strings.IndexByte(key[i+1:], '}')
	return key[i+1 : i+1+j]
}

// Config returns the group's GroupConfig, as NewGroup was given it, with
// Cooldown's default filled in. The result is a copy: changing it changes
// nothing in the group. A Group holds nothing else: a group made by
// NewGroup from the result, or from a part of its deployments, routes as
// this one does, as every deployment's state lives in its budget. A caller
// that sends a failed call on elsewhere routes it with such a group of the
// deployments not yet tried, so that none gets the same call twice; the
// transport of package pacerhttp does.
func (g *Group) Config() GroupConfig {
	return GroupConfig{Deployments: slices.Clone(g.ds), Policy: g.policy, Cooldown: g.cooldown}
}

// order returns the order in which a call is offered to the deployments:
// as given, or for Spread a weighted random order (each next deployment
// drawn among those left in proportion to its weight).
func (g *Group) order() []int {
	o := make([]int, len(g.ds))
	for i := range o {
		o[i] = i
	}
	if g.policy != Spread || len(o) == 1 {
		return o
	}
	total := 0.0
	for _, w := range g.weights {
		total += w
	}
	for k := 0; k < len(o)-1; k++ {
		x := rand.Float64() * total
		j := k
		for ; j < len(o)-1; j++ {
			if x -= g.weights[o[j]]; x < 0 {
				break
			}
		}
		total -= g.weights[o[j]]
		o[k], o[j] = o[j], o[k]
	}
	return o
}

// Acquire admits r on one deployment and returns its lease and the Pacer
// of the deployment it was admitted on: send the call there, and end the
// lease as Pacer.Acquire's (Settle, Fail...).
//
// r goes to the first deployment, in the Policy's order, with room for it
// now. When none has, it waits on the one whose room comes first, as
// Pacer.Acquire waits: it reserves its turn there or queues for a slot,
// and stays with that deployment, unless a pause or stop set meanwhile
// takes its turn back, when it is routed again. A deployment that is
// paused is waited for only if every other one's wait is longer, one that
// is stopped never, and one too small for r (ErrTooLarge) is passed over.
//
// The wait is bounded as Pacer.Acquire's: by r.MaxWait, or else the first
// deployment's Config.MaxWait, and by ctx. The errors are Pacer.Acquire's:
// a *RefusedError matching ErrWaitTimeout when no deployment has room
// within the bound, or ErrStopped when every deployment is stopped, ErrTooLarge when r fits
// none, ErrInvalid for a request every deployment refuses.
func (g *Group) Acquire(ctx context.Context, r Request) (*Lease, *Pacer, error) {
	r = r.withTotal()
	b := boundsOf(ctx, r, time.Now(), g.ds[0].Pacer.s().maxWait)
	var denied *wire.AcquireReply
	stale := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, b.deadlineErr(err, denied)
		}
		remain := b.remain()
		rt, err := g.route(ctx, r, remain, b.began)
		if err != nil {
			if ctx.Err() != nil {
				continue // the loop's top says which error
			}
			return nil, nil, err
		}
		switch rep := rt.rep; {
		case rep.Code == wire.Stale:
			if _, err := rt.c.redefined(ctx, &stale); err != nil {
				return nil, nil, err
			}
			continue
		case rep.Code == wire.TooLarge:
			return nil, nil, fmt.Errorf("%w: %d tokens exceed the %s bucket's capacity on every deployment", ErrTooLarge, r.Tokens, rep.Reason)
		case rep.Code == wire.Admitted || rep.Code == wire.Already || rep.Ticket != 0:
			// Admitted, or holding a place in a slot queue: the call goes on
			// as an Acquire of that deployment, which gives it back to the
			// group once it holds nothing there.
			a := &acquisition{bounds: b, c: rt.c, id: rt.id, next: &rt.answer, away: rerouted}
			l, err := a.run(ctx)
			if err == errReroute {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			return l, rt.p, nil
		}
		a := &acquisition{bounds: b, c: rt.c, id: rt.id}
		if err := stopped(rt.rep); err != nil {
			// Every deployment is stopped.
			rt.p.stoppedAt.Store(time.Now().UnixNano())
			a.emit(Denied, rt.rep.Wait, err.Limit, err)
			return nil, nil, err
		}
		if rt.rep.Wait > remain {
			err := b.tooLong(rt.rep.Wait, limitOfReason(rt.rep.Reason))
			a.emit(Denied, rt.rep.Wait, limitOfReason(rt.rep.Reason), err)
			return nil, nil, err
		}
		denied = &rt.rep
		_ = rt.p.sleep(ctx, r, rt.rep, b.deadline) // ctx's error: the loop's top says which
	}
}

// errReroute tells a Group that its call no longer holds anything on the
// deployment it was routed to, and must be routed again.
var errReroute = errors.New("pacer: route again")

// rerouted is a Group's hook into the acquisition of a call it routed to
// one deployment (see acquisition.away): once the call holds nothing
// there, a denial, a stop or a pause over its turn sends it back to be
// routed again, over every deployment, rather than wait on this one.
func rerouted(error) error { return errReroute }

// TryAcquire admits r on the first deployment, in the Policy's order, that
// has room for it now, and returns its lease and that deployment's Pacer.
// It never waits: when no deployment has room, it returns a *RefusedError
// (errors.Is ErrWaitTimeout, Bound 0) with the shortest time until one
// might, having charged nothing; when every deployment is stopped, one
// matching ErrStopped.
func (g *Group) TryAcquire(ctx context.Context, r Request) (*Lease, *Pacer, error) {
	r = r.withTotal()
	for stale := 0; ; {
		rt, err := g.route(ctx, r, 0, time.Now())
		if err != nil {
			return nil, nil, err
		}
		if rt.rep.Code == wire.Stale {
			if _, err := rt.c.redefined(ctx, &stale); err != nil {
				return nil, nil, err
			}
			continue
		}
		l, err := rt.c.tryAnswer(rt.id, rt.rep, rt.charged)
		if err != nil {
			return nil, nil, err
		}
		return l, rt.p, nil
	}
}

// Cooldown takes p's deployment out of the group for d (GroupConfig's
// Cooldown when d is 0), for every process: it pauses its budget. Call it
// when a deployment fails (a 5xx, a broken connection, an overload);
// retry.RunGroup and the transport of package pacerhttp call it
// themselves. A 429 is the budget's business: Lease.Fail, which they
// call, pauses it and corrects its buckets.
//
// A nil error means the deployment is out. With d 0 and a negative
// Cooldown in the GroupConfig (never cool down), it does nothing and
// returns an error matching ErrInvalid, so that a caller knows the next
// attempt may go to the same deployment (retry.RunGroup then backs off).
// Like Lease.Fail's pause, the cooldown reaches the fleet even when ctx is
// already done: then in the background, returning nil.
func (g *Group) Cooldown(ctx context.Context, p *Pacer, d time.Duration) error {
	if d == 0 {
		d = g.cooldown
	}
	if d < 0 {
		return invalidf("Group.Cooldown: the group never cools a deployment down (GroupConfig.Cooldown = %v); pass d > 0 to pause one", g.cooldown)
	}
	if p == nil {
		return invalidf("Group.Cooldown: the Pacer is nil")
	}
	return toFleet(ctx, func(ctx context.Context) error { return p.Pause(ctx, d) })
}
