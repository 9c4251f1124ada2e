package pacer

import (
	"context"
	"time"

	"github.com/llmpacer/llmpacer/internal/leasing"
)

// downCall is how a call is admitted or refused while the circuit is
// tripped (Redis down). Its wait methods return again when Redis answers
// while the call sleeps: it then asks the shared budget.
type downCall struct {
	p     *Pacer
	r     Request // with its total (withTotal)
	began time.Time
	cause error           // the Redis error that tripped the circuit
	up    <-chan struct{} // closed when Redis answers again
}

// down returns the call's downCall if Redis is down, or ok false.
func (p *Pacer) down(r Request, began time.Time) (downCall, bool) {
	isDown, cause, up := p.out.state()
	return downCall{p: p, r: r, began: began, cause: cause, up: up}, isDown
}

// try admits the call from this process's share if it has room now. It
// returns the lease, or the wait until it might have room and the limit
// short of it, or an error: ErrUnavailable for a call that a fail-closed
// limit refuses or that exceeds this process's share.
func (d downCall) try() (*Lease, time.Duration, Limit, error) {
	p, r := d.p, d.r
	if lim, closed := p.closedFor(r); closed {
		// No Denied event, as for any Redis error: RedisDown said it.
		return nil, 0, "", &UnavailableError{Limit: lim, Err: d.cause}
	}
	id := leasing.NewID()
	now := time.Now()
	expiry := now.Add(p.s().leaseTTL)
	wait, short, never := p.out.local.admit(id, p.use(r), r.Priority == Batch, expiry)
	if never {
		return nil, 0, "", &UnavailableError{Limit: short, Err: d.cause, tooLarge: true}
	}
	if wait > 0 {
		return nil, wait, short, nil
	}
	waited := time.Since(d.began)
	l := p.newLease(leasing.Admission{
		ID: id, Tokens: r.Tokens, Reserve: p.use(r), Weight: p.weight(r), Price: p.priceOf(r), Priced: p.s().spend,
		Start: now, Expiry: expiry, Waited: waited, Local: p.out.local,
	})
	p.emit(Event{Kind: Admitted, Tokens: r.Tokens, Priority: r.Priority, Wait: waited, Local: true})
	return l, 0, "", nil
}

// tryNow is TryAcquire while Redis is down: a lease, or a *NotYetError.
func (d downCall) tryNow() (*Lease, error) {
	l, wait, short, err := d.try()
	if l != nil || err != nil {
		return l, err
	}
	err = &NotYetError{wait: wait, Limit: short}
	d.p.emit(Event{Kind: Denied, Tokens: d.r.Tokens, Priority: d.r.Priority, Wait: wait, Limit: short, Err: err})
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
		if remain := time.Until(a.deadline); wait > remain {
			err := &WaitError{wait: wait, Bound: a.bound, Limit: short, ctxBound: a.ctxBound}
			if a.ctxBound {
				err.Bound = max(remain, 0)
			}
			d.p.emit(Event{Kind: Denied, Tokens: d.r.Tokens, Priority: d.r.Priority, Wait: wait, Limit: short, Err: err})
			return nil, err
		}
		if waits == 0 { // a call waiting for a local slot asks every localWait
			d.p.emit(Event{Kind: Waiting, Tokens: d.r.Tokens, Priority: d.r.Priority, Wait: wait, Limit: short, Local: true})
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
