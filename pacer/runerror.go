package pacer

import (
	"errors"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/classify"
)

// More sentinel errors, for Run and TryRun.
var (
	// ErrQuotaExhausted: the provider says the account's credits, billing
	// or hard limit are used up (OpenAI's insufficient_quota, Anthropic's
	// low credit balance). Retrying cannot help, so Run never does.
	ErrQuotaExhausted = errors.New("pacer: provider quota exhausted")
	// ErrRateLimited: the provider still answered 429 rate limited when
	// Run ran out of retries or latency budget.
	ErrRateLimited = errors.New("pacer: provider rate limited")
	// ErrRetriesExhausted: every attempt Run was allowed failed with a
	// retryable error.
	ErrRetriesExhausted = errors.New("pacer: retries exhausted")
	// ErrPermanent: the provider refused the call for a reason retrying
	// cannot fix (bad request, auth, not found, context too long).
	ErrPermanent = errors.New("pacer: permanent provider error")
	// ErrNotYet: TryAcquire or TryRun found no room now; hand the job back
	// to its queue and try again after the *NotYetError's RetryAfter.
	ErrNotYet = errors.New("pacer: no room yet")
)

// RunError is the error Run and TryRun return when the call failed. It
// wraps the last call's error (errors.Is and errors.As reach it) and
// matches ErrQuotaExhausted, ErrRateLimited, ErrPermanent or
// ErrRetriesExhausted as the Verdict and attempts say.
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

// NotYetError is TryAcquire's and TryRun's answer when the budget has no
// room now: the call was not sent and nothing was charged.
type NotYetError struct {
	// RetryAfter is how long until the call could be admitted.
	RetryAfter time.Duration
	// Limit names the limit that has no room.
	Limit Limit
}

// Error says how long until the call could be admitted.
func (e *NotYetError) Error() string {
	return "pacer: no room yet in " + string(e.Limit) + "; retry after " + e.RetryAfter.Round(time.Millisecond).String()
}

// Is makes errors.Is(err, ErrNotYet) hold.
func (e *NotYetError) Is(target error) bool { return target == ErrNotYet }
