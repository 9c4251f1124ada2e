package retry

import (
	"errors"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
)

// Sentinel errors, for errors.Is. Every one of the package is here; an
// *Error matches the one that says why Run stopped.
var (
	// ErrRateLimited reports that the provider still answered 429 rate
	// limited when Run ran out of retries or latency budget.
	ErrRateLimited = errors.New("retry: provider rate limited")

	// ErrExhausted reports that every attempt Run was allowed failed with a
	// retryable error.
	ErrExhausted = errors.New("retry: retries exhausted")

	// ErrPermanent reports that the provider refused the call for a reason
	// retrying cannot fix (bad request, auth, not found, context too long).
	ErrPermanent = errors.New("retry: permanent provider error")
)

// Error is the error Run and RunGroup return when the call failed. It
// wraps the last call's error (errors.Is and errors.As reach it) and
// matches pacer.ErrQuotaExhausted, ErrRateLimited, ErrPermanent or
// ErrExhausted as the Verdict and attempts say. pacer.RetryAfter reads the
// provider's Retry-After from it, when the provider sent one.
type Error struct {
	// Verdict is the classification of the last attempt's error.
	Verdict classify.Verdict
	// Attempts is how many times the call was sent.
	Attempts int
	// Err is the last attempt's error.
	Err error

	exhausted bool // gave up on a retryable error
}

// Error says how many attempts were made, the verdict and the last error.
func (e *Error) Error() string {
	what := "failed"
	if e.exhausted {
		what = "gave up"
	}
	return fmt.Sprintf("retry: call %s after %d attempt(s) (%s): %v", what, e.Attempts, e.Verdict, e.Err)
}

// Unwrap returns the last call's error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel that says why Run stopped.
func (e *Error) Is(target error) bool {
	switch target {
	case pacer.ErrQuotaExhausted:
		return e.Verdict.Kind == classify.QuotaExhausted
	case ErrPermanent:
		return e.Verdict.Kind == classify.Permanent
	case ErrRateLimited:
		return e.Verdict.Kind == classify.RateLimited
	case ErrExhausted:
		return e.exhausted
	}
	return false
}

// RetryAfter returns the provider's wait, Verdict.RetryAfter, and whether
// the provider gave one. It is what pacer.RetryAfter reads: call that,
// which also reads the budget's own waits, through any wrapping.
func (e *Error) RetryAfter() (time.Duration, bool) {
	return e.Verdict.RetryAfter, e.Verdict.RetryAfter > 0
}
