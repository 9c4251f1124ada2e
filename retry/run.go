package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
)

// Run paces one LLM call on the shared budget p and retries it as the
// provider's answer says:
//
//  1. it acquires a lease for r (tokens and priority);
//  2. it runs call with ctx, keeping the lease alive while the call runs;
//  3. on success it settles the tokens usage reports (usage may be nil, or
//     return a negative count, when the real usage is unknown: the whole
//     reservation is then kept);
//  4. on a failure it asks the classifier, and hands the verdict to
//     pacer.Lease.Fail, which ends the lease (a call refused out of quota
//     or for a 4xx gets its tokens back but stays counted as a request; a
//     rate-limited call, an overload, a 5xx or a timeout keeps the whole
//     reservation) and tells every process: RateLimited pauses the shared
//     budget for the provider's retry delay (Run's own when it names
//     none), and QuotaExhausted stops it. Then RateLimited retries after
//     the pause (with jitter); Overloaded and Transient retry with capped
//     exponential backoff; QuotaExhausted and Permanent return at once, as
//     do ctx's errors.
//
// The error is an *Error (errors.Is pacer.ErrQuotaExhausted, ErrPermanent,
// ErrRateLimited, ErrExhausted as it applies), or an error from Acquire
// (pacer.ErrTooLarge, pacer.ErrWaitTimeout, with a Bound of 0 for
// WithNoWait, pacer.ErrStopped, pacer.ErrUnavailable, pacer.ErrInvalid,
// ctx's error). For job queues, WithNoWait makes Run send the call only if the
// budget has room now, once, and never sleep.
//
// For calls made through an SDK on net/http (openai-go, anthropic-sdk-go,
// and most others), prefer package pacerhttp: its transport paces every
// HTTP attempt, reads the usage from the answer (streams too), and makes
// the SDK's own retries safe. Run is for calls the transport cannot see,
// or when you want its retry policy.
//
// With Run, turn the provider SDK's own retries off; openai-go and
// anthropic-sdk-go take option.WithMaxRetries(0). By default they retry a
// 429 or a 5xx twice within call, and so within one lease. The budget then
// charges one request for up to three, and no other process hears of the
// 429 until the SDK gives up. An insufficient_quota answer is sent three
// times before Run can see that it must never be retried. Run instead takes
// a new lease for each attempt, and a 429 pauses every process. An
// exhausted quota stops every process, as the transport does, until a
// probe (every pacer.Config.QuotaProbe) succeeds.
func Run[T any](ctx context.Context, p *pacer.Pacer, r pacer.Request, call func(context.Context) (T, error), usage func(T) int64, opts ...Option) (T, error) {
	var zero T
	if call == nil {
		return zero, invalidf("Run: call is nil")
	}
	if p == nil {
		return zero, invalidf("Run: the Pacer is nil")
	}
	fn := func(ctx context.Context, _ *pacer.Pacer) (T, error) { return call(ctx) }
	if newConfig(opts).noWait {
		acquire := func(ctx context.Context, r pacer.Request) (*pacer.Lease, *pacer.Pacer, error) {
			l, err := p.TryAcquire(ctx, r)
			return l, p, err
		}
		return tryRun(ctx, acquire, nil, r, fn, usage, opts)
	}
	acquire := func(ctx context.Context, r pacer.Request) (*pacer.Lease, *pacer.Pacer, error) {
		l, err := p.Acquire(ctx, r)
		return l, p, err
	}
	return run(ctx, acquire, nil, r, fn, usage, opts)
}

// acquirer admits an attempt: on a Pacer, or on a deployment of a Group,
// which it returns.
type acquirer func(context.Context, pacer.Request) (*pacer.Lease, *pacer.Pacer, error)

// run is Run's and RunGroup's loop: acquire picks the budget of each
// attempt; g, if not nil, is the group whose failing deployments cool down.
func run[T any](ctx context.Context, acquire acquirer, g *pacer.Group, r pacer.Request, call func(context.Context, *pacer.Pacer) (T, error), usage func(T) int64, opts []Option) (T, error) {
	var zero T
	c := newConfig(opts)
	began := time.Now()
	var last *Error
	for attempt := 1; ; attempt++ {
		req := r
		if c.budget > 0 {
			left := c.budget - time.Since(began)
			if left <= 0 {
				return zero, giveUp(last, pacer.ErrWaitTimeout)
			}
			if req.MaxWait == 0 || req.MaxWait > left {
				req.MaxWait = left
			}
		}
		l, p, err := acquire(ctx, req)
		if err != nil {
			if last != nil && !errors.Is(err, pacer.ErrInvalid) && !errors.Is(err, pacer.ErrTooLarge) {
				return zero, giveUp(last, err)
			}
			return zero, err
		}
		waited := l.Info().Waited
		v, callErr, took := runOnce(ctx, l, func(ctx context.Context) (T, error) { return call(ctx, p) }, usage)
		if callErr == nil {
			report(c, Attempt{N: attempt, Waited: waited, Took: took})
			return v, nil
		}
		verdict, delay := c.verdict(callErr, attempt)
		told := endFailed(ctx, l, verdict, callErr)
		report(c, Attempt{N: attempt, Waited: waited, Took: took, Verdict: verdict, Err: callErr})
		last = &Error{Verdict: verdict, Attempts: attempt, Err: callErr}
		if verdict.Kind == classify.Canceled && ctx.Err() != nil {
			return zero, ctx.Err()
		}
		if !verdict.Retryable() {
			return zero, last
		}
		// Fail paused every process for a 429, whether or not this one
		// retries: the provider's limit is the fleet's.
		paused := verdict.Kind == classify.RateLimited && told
		if g != nil && failing(verdict) {
			// A failing deployment leaves the group for its cooldown, and
			// the next attempt goes to another at once. A group that never
			// cools down says so with an error: then back off.
			paused = g.Cooldown(ctx, p, 0) == nil
		}
		if attempt > c.retries {
			last.exhausted = true
			return zero, last
		}
		if paused {
			// The next Acquire waits the pause out, with jitter.
			continue
		}
		if c.budget > 0 && time.Since(began)+delay > c.budget {
			last.exhausted = true
			return zero, last
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return zero, err
		}
	}
}

// runOnce runs the call with the lease kept alive. On success it settles
// the reported usage; a failed call's lease is left for endFailed, which
// needs the classifier's verdict. A lease that cannot be ended because Redis
// fails is not an error for the caller, whose call is done: the lease
// keeps ending itself in the background until Redis answers (or its TTL
// ends, keeping its reservation).
func runOnce[T any](ctx context.Context, l *pacer.Lease, call func(context.Context) (T, error), usage func(T) int64) (T, error, time.Duration) {
	stop := l.KeepAlive(ctx)
	start := time.Now()
	v, err := call(ctx)
	took := time.Since(start)
	stop()
	if err != nil {
		return v, err, took
	}
	used := l.Info().Tokens
	if usage != nil {
		if n := usage(v); n >= 0 {
			used = n
		}
	}
	endCtx, cancel := endContext(ctx)
	defer cancel()
	_ = l.Settle(endCtx, used)
	return v, nil, took
}

// endFailed ends a failed call's lease by the one rule (pacer.Lease.Fail,
// which also pauses or stops the budget as v says), never waiting on Redis
// long. It says whether all of it landed.
func endFailed(ctx context.Context, l *pacer.Lease, v classify.Verdict, err error) bool {
	endCtx, cancel := endContext(ctx)
	defer cancel()
	return l.Fail(endCtx, v, err) == nil
}

// verdict classifies a failed attempt n and returns the delay before the
// next. A 429 that names no delay gets Run's own, in the verdict too, so
// that the pause Fail sets waits as long as Run would.
func (c config) verdict(err error, n int) (classify.Verdict, time.Duration) {
	v := c.classifier(err)
	d := c.delay(n, v)
	if v.Kind == classify.RateLimited && v.RetryAfter <= 0 {
		v.RetryAfter = d
	}
	return v, d
}

// endContext bounds the end of a lease: the call is over whatever ctx says
// now, so the lease is ended regardless, but never waiting on Redis long.
func endContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

// delay is how long to wait before attempt n+1.
func (c config) delay(n int, v classify.Verdict) time.Duration {
	if v.Kind == classify.RateLimited {
		if v.RetryAfter > 0 {
			return v.RetryAfter
		}
		return c.rateDelay
	}
	d := c.base << min(n-1, 30)
	if d <= 0 || d > c.max {
		d = c.max
	}
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	return max(d, v.RetryAfter)
}

func report(c config, a Attempt) {
	if c.onAttempt != nil {
		c.onAttempt(a)
	}
}

// giveUp returns the last call's error marked exhausted, joined with why no
// further attempt could start.
func giveUp(last *Error, why error) error {
	if last == nil {
		return why
	}
	last.exhausted = true
	return fmt.Errorf("%w (then: %w)", last, why)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryRun is Run's and RunGroup's one attempt WithNoWait (see run).
func tryRun[T any](ctx context.Context, acquire acquirer, g *pacer.Group, r pacer.Request, call func(context.Context, *pacer.Pacer) (T, error), usage func(T) int64, opts []Option) (T, error) {
	var zero T
	c := newConfig(opts)
	l, p, err := acquire(ctx, r)
	if err != nil {
		return zero, err
	}
	v, callErr, took := runOnce(ctx, l, func(ctx context.Context) (T, error) { return call(ctx, p) }, usage)
	if callErr == nil {
		report(c, Attempt{N: 1, Took: took})
		return v, nil
	}
	verdict, _ := c.verdict(callErr, 1)
	endFailed(ctx, l, verdict, callErr)
	report(c, Attempt{N: 1, Took: took, Verdict: verdict, Err: callErr})
	if g != nil && failing(verdict) {
		_ = g.Cooldown(ctx, p, 0)
	}
	return zero, &Error{Verdict: verdict, Attempts: 1, Err: callErr}
}

// failing says whether a verdict shows the deployment failing rather than
// the call: overloaded, or a transient failure (a 5xx, a broken
// connection).
func failing(v classify.Verdict) bool {
	return v.Kind == classify.Overloaded || v.Kind == classify.Transient
}

// invalidf reports a bad argument to the package's functions, as pacer
// does: it matches pacer.ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: retry.%s", pacer.ErrInvalid, fmt.Sprintf(format, args...))
}
