package pacer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// TryAcquire admits r only if every limit has room now. It never waits: it
// returns a lease, or a *RefusedError (errors.Is ErrWaitTimeout, with a
// Bound of 0) that says how long until r could be admitted (assuming no
// other caller takes the room first), having charged nothing. It returns
// ErrTooLarge for a request that can never fit.
//
// In a shadow budget (Config.Shadow) Acquire and TryAcquire never refuse
// for want of room or Redis: they report the refusal as a Denied event and
// return a lease the budget does not count (LeaseInfo.Shadow).
func (p *Pacer) TryAcquire(ctx context.Context, r Request) (*Lease, error) {
	l, err := p.tryAcquire(ctx, r)
	if err == nil || !p.s().shadow || errors.Is(err, ErrInvalid) {
		return l, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the caller gave up: nothing to let run
	}
	// A shadow budget reports the refusal and lets the call run.
	if !errors.Is(err, ErrWaitTimeout) && !errors.Is(err, ErrStopped) { // those emitted Denied already
		p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Err: err})
	}
	now := time.Now()
	s := p.s()
	return openLease(s.budget, admission{ID: newID(), Tokens: r.withTotal().Tokens, Priority: r.Priority, Start: now, Expiry: now.Add(s.leaseTTL), Detached: true}), nil
}

func (p *Pacer) tryAcquire(ctx context.Context, r Request) (*Lease, error) {
	c, err := p.prepare(ctx, r)
	if err != nil {
		return nil, err
	}
	if d, down := p.down(c, time.Now()); down {
		return d.tryNow()
	}
	id := newID()
	for stale := 0; ; {
		c = c.now()
		rep, charged, err := c.acquireOnce(ctx, id, 0, 0, time.Now())
		if err == nil && rep.Code == wire.Stale {
			var next *call
			if next, err = c.redefined(ctx, &stale); err == nil {
				c = next
				continue
			}
		}
		if err != nil {
			if d, down := p.down(c, time.Now()); down && ctx.Err() == nil {
				return d.tryNow()
			}
			return nil, unavailable(err)
		}
		return c.tryAnswer(id, rep, charged)
	}
}

// tryAnswer turns a reply to an acquire sent with max wait 0 into
// TryAcquire's answer: a lease, or the error that says why not.
func (c *call) tryAnswer(id string, rep wire.AcquireReply, charged int64) (*Lease, error) {
	p, r := c.p, c.r
	if err := stopped(rep); err != nil {
		p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: err.Limit, Err: err})
		return nil, err
	}
	switch rep.Code {
	case wire.Admitted, wire.Already:
		ad := c.admitAs(id)
		ad.Start, ad.Expiry, ad.ChargedUs, ad.Probe, ad.TurnMs = rep.Now, rep.Expiry, charged, rep.Reason == reasonProbe, rep.TurnMs()
		l := c.open(ad)
		p.emit(Event{Kind: Admitted, Tokens: r.Tokens, Priority: r.Priority})
		return l, nil
	case wire.TooLarge:
		return nil, fmt.Errorf("%w: %d tokens exceed the %s bucket's capacity", ErrTooLarge, r.Tokens, rep.Reason)
	}
	err := notYet(rep.Wait, limitOfReason(rep.Reason))
	p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: limitOfReason(rep.Reason), Err: err})
	return nil, err
}
