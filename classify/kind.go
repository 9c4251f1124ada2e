package classify

import "strconv"

// Kind says what a failed provider call means for the caller: wait and retry,
// back off and retry, or stop.
//
// The zero value is OK, so the zero Verdict (what FromError(nil) returns)
// reads as "nothing went wrong". Every failure path sets a non-zero Kind.
type Kind int

const (
	// OK means the call did not fail.
	OK Kind = iota

	// RateLimited means the caller went over a request or token rate. The
	// shared budget should pause for Verdict.RetryAfter (when known) and the
	// call may then be retried.
	RateLimited

	// QuotaExhausted means credits, billing or a hard (daily or monthly)
	// quota is used up. Waiting seconds will not help, so it is never
	// retried.
	QuotaExhausted

	// Overloaded means the provider is short of capacity for everyone
	// (Anthropic 529 overloaded_error, HTTP 503, Bedrock ModelNotReady).
	// It is not the caller's budget: back off and retry.
	Overloaded

	// Transient means a network error, a timeout or a 5xx that is likely to
	// pass: retry with backoff.
	Transient

	// Permanent means the request itself is wrong (bad request, auth, not
	// found, context too long) or the failure could not be recognised.
	// Retrying sends the same doomed request again, so it is never retried.
	Permanent

	// Canceled means the caller's own context ended (canceled or past its
	// deadline). Retrying would outlive the caller's intent, so it is never
	// retried.
	Canceled
)

var kindNames = [...]string{
	OK:             "ok",
	RateLimited:    "rate_limited",
	QuotaExhausted: "quota_exhausted",
	Overloaded:     "overloaded",
	Transient:      "transient",
	Permanent:      "permanent",
	Canceled:       "canceled",
}

// String returns the kind's name in snake case, e.g. "rate_limited", or
// "Kind(n)" for a value outside the defined set.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Retryable reports whether a call that failed this way may be sent again:
// true for RateLimited, Overloaded and Transient.
func (k Kind) Retryable() bool {
	switch k {
	case RateLimited, Overloaded, Transient:
		return true
	}
	return false
}
