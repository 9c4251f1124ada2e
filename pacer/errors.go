package pacer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/classify"
)

// Sentinel errors, for errors.Is. Every one of the package is here. Errors
// returned by this package wrap them with a message that says what was
// wrong and what to do.
var (
	// ErrInvalid reports bad input: a Config, Request or argument that can
	// never be right. The wrapping message names the field and the fix.
	ErrInvalid = errors.New("pacer: invalid argument")

	// ErrTooLarge reports a request that can never fit: its tokens exceed a
	// token bucket's capacity. It is returned at once, never waited on.
	ErrTooLarge = errors.New("pacer: request can never fit the budget")

	// ErrWaitTimeout reports that no room would be found within the wait
	// bound (Config.MaxWait, Request.MaxWait or the context's deadline). It
	// is returned as soon as the script's answer shows the bound is too
	// short, not after sleeping it out; RetryAfter says how long it would
	// have taken.
	ErrWaitTimeout = errors.New("pacer: no room within the wait bound")

	// ErrNotYet reports that TryAcquire or TryRun found no room now. Hand
	// the job back to its queue and try again after RetryAfter(err).
	ErrNotYet = errors.New("pacer: no room yet")

	// ErrStopped reports a call refused because the budget is stopped: by
	// StopQuota after the provider said its quota is exhausted (the error
	// then matches ErrQuotaExhausted too), or by an operator's Stop. The
	// call was not sent and nothing was charged.
	ErrStopped = errors.New("pacer: budget stopped")

	// ErrUnavailable reports a call refused because Redis is unreachable
	// and a limit of the budget fails closed (see Outage). It is returned
	// wrapped in an *UnavailableError, which also matches the Redis error.
	ErrUnavailable = errors.New("pacer: Redis is unreachable")

	// ErrLeaseExpired reports a lease ended or kept alive after its TTL ran
	// out and the budget took its slot back. Its reserved tokens stay
	// charged: a late Settle refunds nothing, so it can never refund twice.
	ErrLeaseExpired = errors.New("pacer: lease expired before it ended; its reserved tokens stay charged")

	// ErrQuotaExhausted reports that the provider says the account's
	// credits, billing or hard limit are used up (OpenAI's
	// insufficient_quota, Anthropic's low credit balance). Retrying cannot
	// help, so Run never does.
	ErrQuotaExhausted = errors.New("pacer: provider quota exhausted")

	// ErrRateLimited reports that the provider still answered 429 rate
	// limited when Run ran out of retries or latency budget.
	ErrRateLimited = errors.New("pacer: provider rate limited")

	// ErrRetriesExhausted reports that every attempt Run was allowed failed
	// with a retryable error.
	ErrRetriesExhausted = errors.New("pacer: retries exhausted")

	// ErrPermanent reports that the provider refused the call for a reason
	// retrying cannot fix (bad request, auth, not found, context too long).
	ErrPermanent = errors.New("pacer: permanent provider error")

	// ErrStateLost is the Err of a StateLost event: Redis no longer held
	// the budget's state, which this process had seen in use and not yet
	// expired.
	ErrStateLost = errors.New("pacer: Redis lost the budget's state while it was in use (a restart without persistence, a failover, or an eviction); the buckets restart empty and refill at their rate")

	// ErrEvictable is the Err of a Warning event: the Redis server may
	// evict the budget's keys under memory pressure, and with them what the
	// budget has used.
	ErrEvictable = errors.New("pacer: Redis may evict the budget's keys")

	// ErrNotDefined reports that no definition of the budget is stored in
	// Redis: Open has nothing to run.
	ErrNotDefined = errors.New("pacer: no definition of the budget is stored")

	// ErrSuperseded reports that a definition was not stored because a
	// newer one (a higher version) is stored already.
	ErrSuperseded = errors.New("pacer: a newer definition of the budget is stored")
)

// RetryAfter returns how long err says to wait before trying again, and
// whether it says so at all. It reads the wait of a *WaitError, a
// *NotYetError or a *StoppedError, and a *RunError's Verdict.RetryAfter
// when the provider gave one, wrapped with %w or not. Any other error has
// no wait: ok is false.
func RetryAfter(err error) (wait time.Duration, ok bool) {
	var w waiter
	if !errors.As(err, &w) {
		return 0, false
	}
	return w.retryAfter()
}

// waiter is an error that carries how long to wait.
type waiter interface {
	error
	retryAfter() (time.Duration, bool)
}

// WaitError is returned by Acquire when the budget would have room only
// after the wait bound. It matches ErrWaitTimeout with errors.Is, and also
// context.DeadlineExceeded when the bound was the context's deadline.
// RetryAfter reads how long, as of the failed attempt, until the call
// could have been admitted (an estimate when Limit is "concurrency").
type WaitError struct {
	// Bound is the wait bound that the wait exceeded.
	Bound time.Duration
	// Limit names the limit that held the call back.
	Limit Limit

	wait     time.Duration
	ctxBound bool
}

// Error says how long the call would have waited, and for what.
func (e *WaitError) Error() string {
	return fmt.Sprintf("pacer: no room within the wait bound %v: %s needs %v more; raise MaxWait or the context deadline, or lower the load", e.Bound.Round(time.Millisecond), e.Limit, e.wait.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrWaitTimeout) hold, and
// errors.Is(err, context.DeadlineExceeded) when the context set the bound.
func (e *WaitError) Is(target error) bool {
	return target == ErrWaitTimeout || (e.ctxBound && target == context.DeadlineExceeded)
}

func (e *WaitError) retryAfter() (time.Duration, bool) { return e.wait, true }

// NotYetError is TryAcquire's and TryRun's answer when the budget has no
// room now: the call was not sent and nothing was charged. RetryAfter
// reads how long until the call could be admitted.
type NotYetError struct {
	// Limit names the limit that has no room.
	Limit Limit

	wait time.Duration
}

// Error says how long until the call could be admitted.
func (e *NotYetError) Error() string {
	return "pacer: no room yet in " + string(e.Limit) + "; retry after " + e.wait.Round(time.Millisecond).String()
}

// Is makes errors.Is(err, ErrNotYet) hold.
func (e *NotYetError) Is(target error) bool { return target == ErrNotYet }

func (e *NotYetError) retryAfter() (time.Duration, bool) { return e.wait, true }

// StoppedError is Acquire's and TryAcquire's answer while the budget is
// stopped. It matches ErrStopped, and ErrQuotaExhausted when Limit is
// LimitQuota. RetryAfter reads how long until the next probe is due or the
// stop ends, whichever comes first: asking sooner is refused again.
type StoppedError struct {
	// Limit is LimitQuota for a stop after an exhausted quota, LimitStop
	// for an operator's stop.
	Limit Limit

	wait time.Duration
}

// Error says why the call was refused and when to ask again.
func (e *StoppedError) Error() string {
	if e.Limit == LimitQuota {
		return fmt.Sprintf("pacer: budget stopped: the provider's quota is exhausted; nothing sent; the next probe is due in %v (add credit or raise the quota, then Resume)", e.wait.Round(time.Millisecond))
	}
	return fmt.Sprintf("pacer: budget stopped by an operator; nothing sent; the stop ends in %v unless Resume ends it sooner", e.wait.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrStopped) hold, and errors.Is(err,
// ErrQuotaExhausted) for a quota stop.
func (e *StoppedError) Is(target error) bool {
	return target == ErrStopped || (target == ErrQuotaExhausted && e.Limit == LimitQuota)
}

func (e *StoppedError) retryAfter() (time.Duration, bool) { return e.wait, true }

// RunError is the error Run and TryRun return when the call failed. It
// wraps the last call's error (errors.Is and errors.As reach it) and
// matches ErrQuotaExhausted, ErrRateLimited, ErrPermanent or
// ErrRetriesExhausted as the Verdict and attempts say. RetryAfter reads
// the provider's Retry-After, when it sent one.
type RunError struct {
	// Verdict is the classification of the last attempt's error.
	Verdict classify.Verdict
	// Attempts is how many times the call was sent.
	Attempts int
	// Err is the last attempt's error.
	Err error

	exhausted bool // gave up on a retryable error
}

// Error says how many attempts were made, the verdict and the last error.
func (e *RunError) Error() string {
	what := "failed"
	if e.exhausted {
		what = "gave up"
	}
	return fmt.Sprintf("pacer: call %s after %d attempt(s) (%s): %v", what, e.Attempts, e.Verdict, e.Err)
}

// Unwrap returns the last call's error.
func (e *RunError) Unwrap() error { return e.Err }

// Is matches the sentinel that says why Run stopped.
func (e *RunError) Is(target error) bool {
	switch target {
	case ErrQuotaExhausted:
		return e.Verdict.Kind == classify.QuotaExhausted
	case ErrPermanent:
		return e.Verdict.Kind == classify.Permanent
	case ErrRateLimited:
		return e.Verdict.Kind == classify.RateLimited
	case ErrRetriesExhausted:
		return e.exhausted
	}
	return false
}

// retryAfter is the provider's wait: a verdict without one says nothing.
func (e *RunError) retryAfter() (time.Duration, bool) {
	return e.Verdict.RetryAfter, e.Verdict.RetryAfter > 0
}

// UnavailableError is returned by Acquire and TryAcquire for a call refused
// while Redis is unreachable. It matches ErrUnavailable with errors.Is, and
// unwraps to the Redis error.
type UnavailableError struct {
	// Limit is the fail-closed limit that refused the call; empty for a
	// budget without Config.Outage, whose limits all fail closed, and
	// for a call too large for this process's share of an open limit.
	Limit Limit
	// Err is the Redis error that showed Redis unreachable.
	Err error

	tooLarge bool
}

// Error says why the call was refused and what would admit it.
func (e *UnavailableError) Error() string {
	switch {
	case e.tooLarge:
		return fmt.Sprintf("pacer: Redis is unreachable and the call exceeds this process's share of %s (Config.Outage): %v", e.Limit, e.Err)
	case e.Limit == "":
		return fmt.Sprintf("pacer: Redis is unreachable; the budget fails closed (Config.Outage): %v", e.Err)
	}
	return fmt.Sprintf("pacer: Redis is unreachable and %s fails closed (Config.Outage): %v", e.Limit, e.Err)
}

// Is makes errors.Is(err, ErrUnavailable) hold.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the Redis error.
func (e *UnavailableError) Unwrap() error { return e.Err }
