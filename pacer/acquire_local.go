package pacer

import (
	"context"
	"time"
)

// downCall is how a call is admitted or refused while the circuit is
// tripped (Redis down). Its wait methods return again when Redis answers
// while the call sleeps: it then asks the shared budget.
type downCall struct {
	c     *call
	began time.Time
	cause error           // the Redis error that tripped the circuit
	up    <-chan struct{} // closed when Redis answers again
}

// down returns the call's downCall if Redis is down, or ok false.
func (p *Pacer) down(c *call, began time.Time) (downCall, bool) {
	isDown, cause, up := p.out.state()
	return downCall{c: c, began: began, cause: cause, up: up}, isDown
}

// try admits the call from this process's share if it has room now. It
// returns the lease, or the wait until it might have room and the limit
// short of it, or an error: ErrUnavailable for a call that a fail-closed
// limit refuses or that exceeds this process's share.
func (d downCall) try() (*Lease, time.Duration, string, error) {
	c, p := d.c, d.c.p
	if lim, closed := c.closedFor(); closed {
		// No Denied event, as for any Redis error: the Redis event said it.
		return nil, 0, "", unreachableErr(lim, d.cause, false)
	}
	id := newID()
	now := time.Now()
	expiry := now.Add(c.s.leaseTTL)
	wait, short, never := p.out.local.admit(id, c.use, c.r.Priority == Batch, expiry)
	if never {
		return nil, 0, "", unreachableErr(short, d.cause, true)
	}
	if wait > 0 {
		return nil, wait, short, nil
	}
	waited := time.Since(d.began)
	// A local lease ends against this process's limiter, never a
	// tenant's hash in Redis.
	ad := c.admitAs(id)
	ad.TenantKey, ad.Start, ad.Expiry, ad.Waited, ad.Local = "", now, expiry, waited, p.out.local
	l := c.open(ad)
	p.emit(Event{Kind: Admitted, Tokens: c.r.Tokens, Priority: c.r.Priority, Wait: waited, Local: true})
	return l, 0, "", nil
}

// tryNow is TryAcquire while Redis is down: a lease, or a refusal for want
// of room now.
func (d downCall) tryNow() (*Lease, error) {
	l, wait, short, err := d.try()
	if l != nil || err != nil {
		return l, err
	}
	err = notYet(wait, short)
	d.c.p.emit(Event{Kind: Denied, Tokens: d.c.r.Tokens, Priority: d.c.r.Priority, Wait: wait, Limit: short, Err: err})
	return nil, err
}

// acquire is Acquire while Redis is down: it waits for room in this
// process's share until a.deadline. It returns again (nil, nil) when
// Redis answers or ctx is done meanwhile: Acquire's loop then asks the
// shared budget, or returns ctx's error.
func (d downCall) acquire(ctx context.Context, a *acquisition) (*Lease, error) {
	for waits := 0; ; waits++ {
		select {
		case <-d.up:
			return nil, nil
		default:
		}
		l, wait, short, err := d.try()
		if l != nil || err != nil {
			return l, err
		}
		if wait > time.Until(a.deadline) {
			err := a.tooLong(wait, short)
			a.emit(Denied, wait, short, err)
			return nil, err
		}
		if waits == 0 { // a call waiting for a local slot asks every localWait
			d.c.p.emit(Event{Kind: Waiting, Tokens: d.c.r.Tokens, Priority: d.c.r.Priority, Wait: wait, Limit: short, Local: true})
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-d.up:
			t.Stop()
			return nil, nil
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		}
	}
}
