package pacer

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// How a failed end is retried in the background: each attempt bounded by
// retryAttempt, the pause between attempts doubling from retryFirst to
// retryMax. retryMax is short so that the slots of leases whose settle met
// an outage are free within about half a second of Redis answering (plus
// go-redis's own redial: once PoolSize dials have failed, its pool redials
// once a second); an attempt against a Redis that refuses connections
// costs a failed dial, at most two a second per lease.
const (
	retryAttempt = time.Second
	retryFirst   = 50 * time.Millisecond
	retryMax     = 500 * time.Millisecond
)

// retryable reports whether an end that failed with err is retried in the
// background: any failure of Redis or of time (ctx done before the reply),
// but not an expired lease, a closed client (it will never answer), or a
// reply that does not parse (a retry would get it again).
func retryable(err error) bool {
	return err != nil && !errors.Is(err, ErrLeaseExpired) && !errors.Is(err, redis.ErrClosed) && !errors.Is(err, wire.ErrReply)
}

// retry ends the lease in the background, as how says, after an attempt
// failed: this is the one loop that ends a lease nobody waits for, whether
// its caller's Settle failed during an outage, pacer gave back a turn
// nobody will use, or pacerhttp's transport ended a call whose context was
// done. It tries until the end lands, the lease expires (its slot is then
// free anyway, and its reservation stays charged: the safe side), or the
// client is closed. A lease that expires first is reported so (see
// lapse). The attempts carry ctx's values, not its deadline or
// cancellation: the caller has moved on.
//
// Retrying cannot change the budget twice: the settle script ends a lease
// at most once, and an attempt that finds it gone, while an expired lease
// would still be listed, knows an earlier attempt ended it (see
// finishLocked). One loop runs per lease, with the first end that failed;
// a caller may still end the lease itself meanwhile, and the first end
// that lands wins.
func (l *Lease) retry(ctx context.Context, how LeaseState, used wire.Use, reported int64) {
	l.mu.Lock()
	if l.retrying {
		l.mu.Unlock()
		return
	}
	l.retrying = true
	l.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer l.set(func() { l.retrying = false })
		pause := retryFirst
		for {
			// Jittered, so that leases whose ends failed together do not
			// retry in step.
			time.Sleep(pause/2 + rand.N(pause/2+1))
			if i := l.Info(); i.State != Active {
				return
			} else if !time.Now().Before(i.Expiry) {
				l.lapse(ctx)
				return
			}
			c, cancel := context.WithTimeout(ctx, retryAttempt)
			err := l.attempt(c, how, used, reported)
			cancel()
			if !retryable(err) {
				return
			}
			pause = min(2*pause, retryMax)
		}
	}()
}

// lapse marks a lease whose end never landed before its expiry as
// expired, and reports it: its slot is free by now and its reservation
// stays charged, and a failed call's Ended event (see Lease.Fail) is not
// lost. It gives up if the call turn is not free within retryAttempt.
func (l *Lease) lapse(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, retryAttempt)
	defer cancel()
	if l.lock(c) != nil {
		return
	}
	lapsed := false
	l.set(func() {
		if l.end == Active {
			l.end, lapsed = Expired, true
		}
	})
	l.unlock()
	if lapsed {
		l.report(Expired, 0, 0, ErrLeaseExpired)
	}
}
