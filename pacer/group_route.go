package pacer

import (
	"context"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// routed is one route's outcome: the deployment it chose, the call's id,
// and acquire's answer there (the call worked out under the definition
// its charges were made under).
type routed struct {
	p  *Pacer
	id string
	answer
}

// route offers r, under a new id, to every deployment that can take it,
// in the Policy's order (see route.lua): it returns the first admission,
// or else the deployment whose room comes first with its reply to an
// acquire with max wait bound (admitted with a later turn, queued for a
// slot, or denied). A deployment too small for r, or that refuses it as
// invalid, is left out; when all are, the first one's error is returned.
func (g *Group) route(ctx context.Context, r Request, bound time.Duration, began time.Time) (routed, error) {
	var cs []*call
	var first error
	for _, i := range g.order() {
		p := g.ds[i].Pacer
		if err := p.settleDefinition(ctx); err != nil {
			return routed{}, err
		}
		c, err := p.checked(r)
		if err != nil {
			if first == nil || i == 0 {
				first = err
			}
			continue
		}
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return routed{}, first
	}
	id := newID()
	if g.one {
		return g.routeOnce(ctx, id, cs, bound, began)
	}
	return g.routeEach(ctx, id, cs, bound, began)
}

// routeOnce runs route.lua: every deployment in one script call.
func (g *Group) routeOnce(ctx context.Context, id string, cs []*call, bound time.Duration, began time.Time) (routed, error) {
	args := make([]any, 2+2*len(cs), 2+2*len(cs)+len(cs)*16)
	args[0], args[1] = len(cs), bound.Milliseconds()
	if g.policy == MostRoom {
		args[0] = -len(cs) // route.lua orders them by room
	}
	var keys []string
	for k, c := range cs {
		as := c.args(id, bound, 0)
		args[2+2*k], args[3+2*k] = len(c.keys), len(as)
		keys = append(keys, c.keys...)
		args = append(args, as...)
	}
	p0 := cs[0].p
	asked := time.Now()
	v, err := wire.Run(ctx, lua.Route, p0.rdb, keys, args, func(v any) {
		// The reply came after the caller gave up: undo it where it was
		// made.
		if k, rep, err := decodeRoute(v, len(cs)); err == nil {
			cs[k].undoLate(rep, id, bound, began)
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return routed{}, err
		}
		return routed{}, unavailable(fmt.Errorf("pacer: redis on the group of %q: %w", p0.s().name, err))
	}
	k, rep, err := decodeRoute(v, len(cs))
	if err != nil {
		return routed{}, fmt.Errorf("pacer: route on the group of %q: %w", p0.s().name, err)
	}
	cs[k].p.saw(rep)
	return routed{p: cs[k].p, id: id, answer: answer{rep: rep, c: cs[k], charged: chargedAt(rep, began), asked: asked}}, nil
}

// decodeRoute checks route.lua's reply, {i, acquire's reply...}, for n
// deployments, and returns i 0-based.
func decodeRoute(v any, n int) (int, wire.AcquireReply, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 8 {
		return 0, wire.AcquireReply{}, fmt.Errorf("%w: %v", wire.ErrReply, v)
	}
	i, ok := a[0].(int64)
	if !ok || i < 1 || i > int64(n) {
		return 0, wire.AcquireReply{}, fmt.Errorf("%w: %v", wire.ErrReply, v)
	}
	rep, err := wire.DecodeAcquire(a[1:])
	return int(i - 1), rep, err
}

// routeEach does what route.lua does, one acquire call per deployment: for
// budgets a single script cannot reach (several Redis servers, or slots of
// a cluster). It costs a round trip per deployment tried, and the choice
// is not atomic: a deployment found full may have room by the time the
// last is asked.
func (g *Group) routeEach(ctx context.Context, id string, cs []*call, bound time.Duration, began time.Time) (routed, error) {
	var out routed
	best := false
	for k, c := range cs {
		rt, err := c.routeTo(ctx, id, 0, began)
		if err != nil {
			return routed{}, err
		}
		rep := rt.rep
		switch {
		case rep.Code > wire.Denied: // admitted, or another definition stored
			return rt, nil
		case rep.Code == wire.Denied && stopped(rep) == nil && (!best || rep.Wait < out.rep.Wait):
			out, best = rt, true
		case k == 0:
			out = rt
		}
	}
	if !best || bound < time.Millisecond || out.rep.Reason == wirePause || out.rep.Wait > bound.Truncate(time.Millisecond) {
		return out, nil
	}
	return out.c.now().routeTo(ctx, id, bound, began)
}

// routeTo runs acquire.lua for the call as id, with max wait bound, as
// routeEach tries one deployment.
func (c *call) routeTo(ctx context.Context, id string, bound time.Duration, began time.Time) (routed, error) {
	asked := time.Now()
	rep, charged, err := c.acquireOnce(ctx, id, bound, 0, began)
	if err != nil {
		if ctx.Err() != nil {
			return routed{}, err
		}
		return routed{}, unavailable(err)
	}
	return routed{p: c.p, id: id, answer: answer{rep: rep, c: c, charged: charged, asked: asked}}, nil
}

// singleServer says whether p's budget is on one Redis server, where one
// script reaches any key: not a Cluster or a Ring, which place keys by
// their hash slot.
func singleServer(p *Pacer) bool {
	_, ok := p.sub.(*redis.Client)
	return ok
}
