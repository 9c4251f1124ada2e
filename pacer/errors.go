package pacer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, for errors.Is. Every one of the package is here. Errors
// returned by this package wrap them with a message that says what was
// wrong and what to do.
var (
	// ErrInvalid reports bad input: a Config, Request or argument that can
	// never be right, or a budget Open cannot run, as no definition of it
	// is stored or the one stored cannot be used. The wrapping message
	// names the field, or what is missing, and the fix.
	ErrInvalid = errors.New("pacer: invalid argument")

	// ErrTooLarge reports a request that can never fit: its tokens exceed a
	// token bucket's capacity. It is returned at once, never waited on.
	ErrTooLarge = errors.New("pacer: request can never fit the budget")

	// ErrWaitTimeout reports that no room would be found within the wait
	// bound (Config.MaxWait, Request.MaxWait or the context's deadline):
	// the *RefusedError's Bound. It is returned as soon as the script's
	// answer shows the bound is too short, not after sleeping it out;
	// RetryAfter says how long it would have taken. TryAcquire (and
	// retry.Run WithNoWait) never wait: their refusal for want of room is
	// this one with Bound 0, a job queue's normal answer; hand the job
	// back to its queue and try again after RetryAfter(err).
	ErrWaitTimeout = errors.New("pacer: no room within the wait bound")

	// ErrStopped reports a call refused because the budget is stopped: by
	// Lease.Fail after the provider said its quota is exhausted (the error
	// then matches ErrQuotaExhausted too), or by an operator's Stop. The
	// call was not sent and nothing was charged.
	ErrStopped = errors.New("pacer: budget stopped")

	// ErrUnavailable reports a call refused because Redis is unreachable
	// and a limit of the budget fails closed (see Outage). It is returned
	// in a *RefusedError, which also unwraps to the Redis error.
	ErrUnavailable = errors.New("pacer: Redis is unreachable")

	// ErrLeaseExpired reports a lease ended or kept alive after its TTL ran
	// out and the budget took its slot back. Its reserved tokens stay
	// charged: a late Settle refunds nothing, so it can never refund twice.
	ErrLeaseExpired = errors.New("pacer: lease expired before it ended; its reserved tokens stay charged")

	// ErrQuotaExhausted reports that the provider says the account's
	// credits, billing or hard limit are used up (OpenAI's
	// insufficient_quota, Anthropic's low credit balance). Retrying cannot
	// help, so package retry never does.
	ErrQuotaExhausted = errors.New("pacer: provider quota exhausted")

	// ErrStateLost is the Err of a Warning event that says Redis no
	// longer held the budget's state, which this process had seen in use
	// and not yet expired.
	ErrStateLost = errors.New("pacer: Redis lost the budget's state while it was in use (a restart without persistence, a failover, or an eviction); the buckets restart empty and refill at their rate")

	// ErrSuperseded reports that a definition was not stored because a
	// newer one (a higher version) is stored already.
	ErrSuperseded = errors.New("pacer: a newer definition of the budget is stored")
)

// RetryAfter returns how long err says to wait before trying again, and
// whether it says so at all, wrapped with %w or not. It reads the wait of
// a *RefusedError (but ErrUnavailable's, which has none), and of an error
// with a method RetryAfter() (time.Duration, bool): package retry's
// *Error, which gives the provider's Retry-After when it sent one. Any
// other error has no wait: ok is false.
func RetryAfter(err error) (wait time.Duration, ok bool) {
	// An error of package retry comes first: a retry that gave up wraps
	// the last call's error, then why no further attempt could start.
	var w interface {
		error
		RetryAfter() (time.Duration, bool)
	}
	if errors.As(err, &w) {
		return w.RetryAfter()
	}
	var r *RefusedError
	if errors.As(err, &r) {
		return r.retryAfter()
	}
	return 0, false
}

// RefusedError is the error of a call that was not admitted: nothing was
// sent and nothing was charged. It matches one sentinel with errors.Is,
// which says why:
//
//   - ErrWaitTimeout: no room within the wait bound (Bound): Acquire would
//     find room only after it, or TryAcquire (or retry.Run WithNoWait),
//     whose bound is 0, found no room now. It also matches
//     context.DeadlineExceeded when the bound was the context's deadline.
//   - ErrStopped: the budget is stopped, by Lease.Fail (then it also
//     matches ErrQuotaExhausted) or by an operator's Stop. A stop is not a
//     limit: Limit is "".
//   - ErrUnavailable: Redis is unreachable and a limit fails closed (see
//     Outage); Err is the Redis error, which errors.Is and errors.As reach.
//
// RetryAfter(err) reads how long until the call could be admitted (an
// estimate when Limit is "concurrency"), or for a stop until the next
// probe is due or the stop ends, whichever comes first.
type RefusedError struct {
	// Limit names the limit that held the call back, as Rate.Name names
	// it ("rpm", "tpm", "rpd", "tpd", "concurrency", a Config.Rates
	// entry's name, or a tenant's own rate as "@" and its name). It is ""
	// when no limit did: for a stop (errors.Is says which), for a pause
	// (set by Pause or by Lease.Fail on another process's 429: the wait
	// does not know which limit the provider named, the Paused event
	// does), and for an unreachable Redis when every limit fails closed.
	Limit string
	// Bound is the wait bound that the wait exceeded, for ErrWaitTimeout:
	// 0 for a call that would not wait (TryAcquire).
	Bound time.Duration
	// Err is the Redis error that showed Redis unreachable, for
	// ErrUnavailable; nil otherwise.
	Err error

	why      error // the sentinel: ErrWaitTimeout, ErrStopped or ErrUnavailable
	wait     time.Duration
	quota    bool // a stop for an exhausted quota: also matches ErrQuotaExhausted
	ctxBound bool // the context's deadline set Bound
	tooLarge bool // larger than this process's share of an open limit
}

// notYet is TryAcquire's refusal: no room in limit for wait, with a bound
// of 0.
func notYet(wait time.Duration, limit string) *RefusedError {
	return &RefusedError{why: ErrWaitTimeout, Limit: limit, wait: wait}
}

// now says the refusal is of a call that would not wait (TryAcquire's):
// no room now.
func (e *RefusedError) now() bool {
	return e.why == ErrWaitTimeout && e.Bound == 0 && !e.ctxBound
}

// unreachableErr is the refusal of a call while Redis is unreachable.
func unreachableErr(limit string, cause error, tooLarge bool) *RefusedError {
	return &RefusedError{why: ErrUnavailable, Limit: limit, Err: cause, tooLarge: tooLarge}
}

// Error says why the call was refused and what would admit it.
func (e *RefusedError) Error() string {
	wait := e.wait.Round(time.Millisecond)
	switch {
	case e.now():
		if e.Limit == "" {
			return "pacer: no room yet: the budget is paused; retry after " + wait.String()
		}
		return "pacer: no room yet in " + e.Limit + "; retry after " + wait.String()
	case e.why == ErrWaitTimeout:
		return fmt.Sprintf("pacer: no room within the wait bound %v: %s needs %v more; raise MaxWait or the context deadline, or lower the load", e.Bound.Round(time.Millisecond), e.holder(), wait)
	case e.why == ErrStopped:
		if e.quota {
			return fmt.Sprintf("pacer: budget stopped: the provider's quota is exhausted; nothing sent; the next probe is due in %v (add credit or raise the quota, then Resume)", wait)
		}
		return fmt.Sprintf("pacer: budget stopped by an operator; nothing sent; the stop ends in %v unless Resume ends it sooner", wait)
	case e.why == ErrUnavailable:
		switch {
		case e.tooLarge:
			return fmt.Sprintf("pacer: Redis is unreachable and the call exceeds this process's share of %s (Config.Outage): %v", e.Limit, e.Err)
		case e.Limit == "":
			return fmt.Sprintf("pacer: Redis is unreachable; the budget fails closed (Config.Outage): %v", e.Err)
		}
		return fmt.Sprintf("pacer: Redis is unreachable and %s fails closed (Config.Outage): %v", e.Limit, e.Err)
	}
	return "pacer: call refused"
}

// holder names what held a call back, for messages: its limit, or the
// pause.
func (e *RefusedError) holder() string {
	if e.Limit == "" {
		return "the pause"
	}
	return e.Limit
}

// Unwrap returns the sentinel that says why the call was refused, with
// ErrQuotaExhausted for a quota stop, context.DeadlineExceeded for a wait
// bounded by the context's deadline, and the Redis error of an
// ErrUnavailable refusal: what errors.Is and errors.As match.
func (e *RefusedError) Unwrap() []error {
	var errs []error
	if e.why != nil {
		errs = append(errs, e.why)
	}
	switch {
	case e.why == ErrStopped && e.quota:
		errs = append(errs, ErrQuotaExhausted)
	case e.why == ErrWaitTimeout && e.ctxBound:
		errs = append(errs, context.DeadlineExceeded)
	case e.Err != nil:
		errs = append(errs, e.Err)
	}
	return errs
}

func (e *RefusedError) retryAfter() (time.Duration, bool) {
	if e.why == ErrUnavailable {
		return 0, false
	}
	return e.wait, true
}
