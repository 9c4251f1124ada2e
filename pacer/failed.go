package pacer

import (
	"context"
	"errors"
	"time"

	"github.com/llmpacer/llmpacer/classify"
)

// How Fail tells the budget of a 429 or an exhausted quota: a 429 that
// names no delay pauses it for throttleDefault (as package retry waits
// after one by default); and when the caller's context is already done,
// the pause or stop is sent in the background, bounded by tellTimeout
// (see toFleet).
const (
	throttleDefault = time.Second
	tellTimeout     = 2 * time.Second
)

// Fail is the one thing to do after a failed call: it ends the call's
// lease and tells every process of the budget what the provider said.
// err is the call's error, and v its verdict (classify.FromError, or
// classify.FromHTTP for an HTTP answer, when err may be nil). Package
// retry and the transport of package pacerhttp end their failed calls
// with it.
//
// The lease ends by the failure:
//
//   - Refused as it stood (out of quota, or a 4xx other than a rate limit
//     and than a 408, 409 or 425 the provider may retry): nothing was
//     generated, so the tokens go back and the request stays counted (the
//     lease ends Rejected).
//   - Anything else keeps the whole reservation (Released). A 5xx, an
//     overload (Anthropic's 529, a 503) or a broken connection may have
//     been processed and counted: OpenAI counts unsuccessful requests
//     toward its per-minute limits, and no provider says that an overload
//     is not counted, so the safe side is taken: a refund the provider did
//     not make would let the budget run ahead of it. A 429 shows the budget
//     was ahead of the provider by at least one call's worth, and keeping
//     the charge corrects by that much per refusal.
//
// And the budget hears of it, in every process:
//
//   - classify.RateLimited pauses it for v.RetryAfter (a second if 0), and
//     lowers the buckets of the limit the provider named (v.Limit; all
//     per-minute buckets for classify.LimitUnknown) to this call's share:
//     a 429 means the budget believed in room the provider did not have,
//     and a pause alone would leave it as far ahead.
//   - classify.QuotaExhausted stops it for v.RetryAfter (classify's
//     MaxRetryAfter if 0): every call is refused at once with an error
//     matching ErrQuotaExhausted, except one probe every Config.QuotaProbe,
//     whose success (its lease settled) resumes the budget.
//
// The pause or stop is sent even when ctx is already done (the caller
// gave up, but the provider's answer is the fleet's): then in the
// background, with a short timeout of its own.
//
// The lease's Ended event carries v and err. A Fail after the lease ended
// otherwise (settled, canceled) still tells the budget but emits nothing;
// a second Fail does nothing, and returns what ending the lease returns.
// The zero Verdict says nothing is known of the failure: the lease is
// released and the budget told nothing (package pacerhttp's handler ends
// the leases its handlers leave open so).
//
// Its error is the end's (see Settle: an end that fails for want of Redis
// is retried in the background) joined with the pause's or the stop's.
func (l *Lease) Fail(ctx context.Context, v classify.Verdict, err error) error {
	first := l.failed.CompareAndSwap(false, true)
	if first {
		l.set(func() { l.verdict, l.callErr = v, err })
	}
	var endErr error
	if refused(v) {
		endErr = l.reject(ctx)
	} else {
		endErr = l.release(ctx)
	}
	if !first {
		return endErr
	}
	return errors.Join(endErr, l.tell(ctx, v))
}

// tell passes a failed call's verdict on to the budget: a pause for a
// rate limit, a stop for an exhausted quota (see Fail), even when ctx is
// already done (see toFleet).
func (l *Lease) tell(ctx context.Context, v classify.Verdict) error {
	p := l.b.Pacer
	var f func(context.Context) error
	switch {
	case p == nil:
		return nil
	case v.Kind == classify.RateLimited:
		d, use := v.RetryAfter, l.reserved()
		if d <= 0 {
			d = throttleDefault
		}
		f = func(ctx context.Context) error { return p.throttled(ctx, d, v.Limit, use) }
	case v.Kind == classify.QuotaExhausted:
		d := v.RetryAfter
		if d <= 0 {
			d = classify.MaxRetryAfter
		}
		f = func(ctx context.Context) error { return p.stopQuota(ctx, d) }
	default:
		return nil
	}
	return toFleet(ctx, f)
}

// toFleet runs f, which tells every process of a budget what a provider
// said (a pause, a stop, a cooldown), with ctx; or, when ctx is already
// done, in the background with a short context of its own, returning nil:
// the caller has given up, but the fleet must still hear. A failure is
// dropped then, and the next answer of the kind tries again.
func toFleet(ctx context.Context, f func(context.Context) error) error {
	if ctx.Err() == nil {
		return f(ctx)
	}
	go func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), tellTimeout)
		defer cancel()
		_ = f(c)
	}()
	return nil
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
