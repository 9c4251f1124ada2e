package pacer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, for errors.Is. Errors returned by this package wrap them
// with a message that says what was wrong and what to do.
var (
	// ErrInvalid reports bad input: a Config, Request or argument that can
	// never be right. The wrapping message names the field and the fix.
	ErrInvalid = errors.New("llmpacer: invalid argument")

	// ErrTooLarge reports a request that can never fit: its tokens exceed a
	// token bucket's capacity. It is returned at once, never waited on.
	ErrTooLarge = errors.New("pacer: request can never fit the budget")

	// ErrWaitTimeout reports that no room would be found within the wait
	// bound (Config.MaxWait, Request.MaxWait or the context's deadline). It
	// is returned as soon as the script's answer shows the bound is too
	// short, not after sleeping it out; the *WaitError says how long it
	// would have taken.
	ErrWaitTimeout = errors.New("pacer: no room within the wait bound")

	// ErrLeaseExpired reports a lease ended or kept alive after its TTL ran
	// out and the budget took its slot back. Its reserved tokens stay
	// charged: a late Settle refunds nothing, so it can never refund twice.
	ErrLeaseExpired = errors.New("lease: expired before it ended; its reserved tokens stay charged")
)

// WaitError is returned by Acquire when the budget would have room only
// after the wait bound. It matches ErrWaitTimeout with errors.Is, and also
// context.DeadlineExceeded when the bound was the context's deadline.
type WaitError struct {
	// Wait is how long, as of the failed attempt, until the call could
	// have been admitted (an estimate when Limit is "concurrency").
	Wait time.Duration
	// Bound is the wait bound that Wait exceeded.
	Bound time.Duration
	// Limit names the limit that held the call back.
	Limit Limit

	ctxBound bool
}

// Error says how long the call would have waited, and for what.
func (e *WaitError) Error() string {
	return fmt.Sprintf("pacer: no room within the wait bound %v: %s needs %v more; raise MaxWait or the context deadline, or lower the load", e.Bound.Round(time.Millisecond), e.Limit, e.Wait.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrWaitTimeout) hold, and
// errors.Is(err, context.DeadlineExceeded) when the context set the bound.
func (e *WaitError) Is(target error) bool {
	return target == ErrWaitTimeout || (e.ctxBound && target == context.DeadlineExceeded)
}
