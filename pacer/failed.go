package pacer

import (
	"context"

	"github.com/llmpacer/llmpacer/classify"
)

// Fail ends the lease of a call that failed with err, whose verdict is v
// (see classify.FromError). It is the one rule for a failed call's lease:
// package retry and the transport of package pacerhttp end theirs with it.
// err may be nil, for a failure that is an answer, not a Go error (an HTTP
// status the transport read).
//
// The first Fail of a lease not yet ended emits a Failed event, before the
// Ended event of its end; a second Fail, or a Fail after another end,
// emits nothing.
//
//   - Refused as it stood (out of quota, or a 4xx other than a rate limit
//     and than a 408, 409 or 425 the provider may retry): nothing was
//     generated, so the tokens go back and the request stays counted
//     (Lease.Reject).
//   - Anything else keeps the whole reservation (Lease.Release). A 5xx, an
//     overload (Anthropic's 529, a 503) or a broken connection may have
//     been processed and counted: OpenAI counts unsuccessful requests
//     toward its per-minute limits, and no provider says that an overload
//     is not counted, so the safe side is taken: a refund the provider did
//     not make would let the budget run ahead of it. A 429 shows the budget
//     was ahead of the provider by at least one call's worth, and keeping
//     the charge corrects by that much per refusal.
//
// Its error is Release's or Reject's.
func (l *Lease) Fail(ctx context.Context, v classify.Verdict, err error) error {
	if l.b.Failed != nil && l.Info().State == Active && l.failed.CompareAndSwap(false, true) {
		l.b.Failed(Event{Kind: Failed, Tokens: l.a.Tokens, Priority: l.a.Priority, Verdict: v, Err: err})
	}
	if refused(v) {
		return l.Reject(ctx)
	}
	return l.Release(ctx)
}

// refused says whether the provider turned a call away before any work:
// out of quota, or a 3xx or 4xx that is no rate limit and no passing
// failure (a kind OK comes from a transport that saw a redirect).
func refused(v classify.Verdict) bool {
	switch v.Kind {
	case classify.QuotaExhausted:
		return true
	case classify.Permanent, classify.OK:
		return v.Status >= 300 && v.Status < 500
	}
	return false
}
