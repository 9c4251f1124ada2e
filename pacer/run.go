package pacer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	// ErrNotYet: TryRun found no room now; hand the job back to its queue
	// and try again after the *NotYetError's RetryAfter.
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

// NotYetError is TryRun's answer when the budget has no room now: the call
// was not sent and nothing was charged.
type NotYetError struct {
	// RetryAfter is how long until the call could be admitted.
	RetryAfter time.Duration
}

func (e *NotYetError) Error() string {
	return "pacer: no room yet; retry after " + e.RetryAfter.Round(time.Millisecond).String()
}

// Is makes errors.Is(err, ErrNotYet) hold.
func (e *NotYetError) Is(target error) bool { return target == ErrNotYet }

// Attempt describes one try of a call, for the OnAttempt option.
type Attempt struct {
	N       int           // 1 for the first try
	Waited  time.Duration // in Acquire before this try
	Took    time.Duration // the call itself
	Verdict classify.Verdict
	Err     error // nil on success
}

// RunOption changes how Run retries.
type RunOption func(*runConfig)

type runConfig struct {
	retries    int
	base, max  time.Duration
	budget     time.Duration
	classifier func(error) classify.Verdict
	onAttempt  func(Attempt)
	rateDelay  time.Duration
}

// Default retry settings.
const (
	DefaultRetries     = 3
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultBackoffMax  = 30 * time.Second
	// DefaultRateLimitDelay is the pause after a 429 that names no delay.
	DefaultRateLimitDelay = time.Second
)

// Retries sets how many times Run retries after the first attempt
// (default 3). Run's retries are LLM calls; the Redis client's own retries
// (go-redis MaxRetries) are separate and never count here.
func Retries(n int) RunOption { return func(c *runConfig) { c.retries = max(n, 0) } }

// Backoff sets the capped exponential backoff for Overloaded and Transient
// failures: attempt n sleeps a random time in [d/2, d], d = min(max,
// base·2^(n-1)), or longer if the provider named a delay.
func Backoff(base, max time.Duration) RunOption {
	return func(c *runConfig) {
		if base > 0 {
			c.base = base
		}
		if max > 0 {
			c.max = max
		}
	}
}

// LatencyBudget bounds the time Run may spend before starting an attempt:
// waiting for the budget and backing off. Once an attempt could not start
// within d of Run's start, Run returns the last error (or ErrWaitTimeout)
// instead of waiting on. The call itself is bounded by ctx, not by d.
func LatencyBudget(d time.Duration) RunOption { return func(c *runConfig) { c.budget = d } }

// WithClassifier replaces classify.FromError for deciding what a call's
// error means.
func WithClassifier(f func(error) classify.Verdict) RunOption {
	return func(c *runConfig) {
		if f != nil {
			c.classifier = f
		}
	}
}

// OnAttempt calls f after every attempt, successful or not.
func OnAttempt(f func(Attempt)) RunOption { return func(c *runConfig) { c.onAttempt = f } }

func newRunConfig(opts []RunOption) runConfig {
	c := runConfig{retries: DefaultRetries, base: DefaultBackoffBase, max: DefaultBackoffMax,
		classifier: classify.FromError, rateDelay: DefaultRateLimitDelay}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Run paces one LLM call on the shared budget and retries it as the
// provider's answer says:
//
//  1. it acquires a lease for r (tokens and priority);
//  2. it runs call with ctx, keeping the lease alive while the call runs;
//  3. on success it settles the tokens usage reports (usage may be nil, or
//     return a negative count, when the real usage is unknown: the whole
//     reservation is then kept);
//  4. on a failure it asks the classifier, and ends the lease as the
//     verdict says: a call the provider refused outright (429, 529, quota,
//     another 4xx) gets its tokens back but stays counted as a request;
//     anything else (5xx, timeouts) keeps the whole reservation, since the
//     provider may have processed it. Then:
//     RateLimited pauses the shared budget for the provider's retry delay,
//     so every process slows down, then retries after it (with jitter);
//     Overloaded and Transient retry with capped exponential backoff;
//     QuotaExhausted and Permanent return at once, as do ctx's errors.
//
// The error is a *RunError (errors.Is ErrQuotaExhausted, ErrPermanent,
// ErrRateLimited, ErrRetriesExhausted as it applies), or an error from
// Acquire (ErrTooLarge, ErrWaitTimeout, ErrInvalid, ctx's error).
func Run[T any](ctx context.Context, p *Pacer, r Request, call func(context.Context) (T, error), usage func(T) int64, opts ...RunOption) (T, error) {
	var zero T
	if call == nil {
		return zero, invalidf("Run: call is nil")
	}
	c := newRunConfig(opts)
	began := time.Now()
	var last *RunError
	for attempt := 1; ; attempt++ {
		req := r
		if c.budget > 0 {
			left := c.budget - time.Since(began)
			if left <= 0 {
				return zero, giveUp(last, ErrWaitTimeout)
			}
			if req.MaxWait == 0 || req.MaxWait > left {
				req.MaxWait = left
			}
		}
		l, err := p.Acquire(ctx, req)
		if err != nil {
			if last != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				return zero, giveUp(last, err)
			}
			return zero, err
		}
		v, callErr, took := runOnce(ctx, l, call, usage)
		if callErr == nil {
			report(c, Attempt{N: attempt, Waited: l.Waited(), Took: took})
			return v, nil
		}
		verdict := c.classifier(callErr)
		endFailed(ctx, l, verdict)
		report(c, Attempt{N: attempt, Waited: l.Waited(), Took: took, Verdict: verdict, Err: callErr})
		last = &RunError{Verdict: verdict, Attempts: attempt, Err: callErr}
		if verdict.Kind == classify.Canceled && ctx.Err() != nil {
			return zero, ctx.Err()
		}
		if !verdict.Retryable() {
			return zero, last
		}
		delay := c.delay(attempt, verdict)
		paused := false
		if verdict.Kind == classify.RateLimited {
			// The provider's limit is the fleet's: hold back every process,
			// whether or not this one retries.
			paused = p.Pause(ctx, delay) == nil
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
// fails is not an error for the caller, whose call is done: it expires
// after its TTL, keeping its reservation.
func runOnce[T any](ctx context.Context, l *Lease, call func(context.Context) (T, error), usage func(T) int64) (T, error, time.Duration) {
	stop := l.AutoKeepAlive(ctx)
	start := time.Now()
	v, err := call(ctx)
	took := time.Since(start)
	stop()
	if err != nil {
		return v, err, took
	}
	used := l.Tokens()
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

// endFailed ends a failed call's lease as the verdict says. A call the
// provider refused outright (rate limited, out of quota, overloaded, or a
// 4xx) generated nothing: its tokens go back but its request stays counted,
// as providers count refused requests. Anything else (a 5xx, a timeout, a
// reset connection) may have been processed and billed: the whole
// reservation stays charged.
func endFailed(ctx context.Context, l *Lease, v classify.Verdict) {
	endCtx, cancel := endContext(ctx)
	defer cancel()
	switch {
	case v.Kind == classify.RateLimited, v.Kind == classify.QuotaExhausted, v.Kind == classify.Overloaded,
		v.Kind == classify.Permanent && v.Status >= 400 && v.Status < 500:
		_ = l.Reject(endCtx)
	default:
		_ = l.Release(endCtx)
	}
}

// endContext bounds the end of a lease: the call is over whatever ctx says
// now, so the lease is ended regardless, but never waiting on Redis long.
func endContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

// delay is how long to wait before attempt n+1.
func (c runConfig) delay(n int, v classify.Verdict) time.Duration {
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

func report(c runConfig, a Attempt) {
	if c.onAttempt != nil {
		c.onAttempt(a)
	}
}

// giveUp returns the last call's error marked exhausted, joined with why no
// further attempt could start.
func giveUp(last *RunError, why error) error {
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

// TryRun is Run's form for job queues: it sends the call only if the budget
// has room now, and never retries or sleeps. If there is no room it returns
// a *NotYetError (errors.Is ErrNotYet) with the time until there will be,
// having charged nothing: hand the job back to the queue with that delay.
// A call answered RateLimited pauses the shared budget and comes back as a
// *RunError whose Verdict.RetryAfter says when to try again; other failures
// are *RunErrors as for Run.
func TryRun[T any](ctx context.Context, p *Pacer, r Request, call func(context.Context) (T, error), usage func(T) int64, opts ...RunOption) (T, error) {
	var zero T
	if call == nil {
		return zero, invalidf("TryRun: call is nil")
	}
	c := newRunConfig(opts)
	l, wait, err := p.TryAcquire(ctx, r)
	if err != nil {
		return zero, err
	}
	if l == nil {
		return zero, &NotYetError{RetryAfter: wait}
	}
	v, callErr, took := runOnce(ctx, l, call, usage)
	if callErr == nil {
		report(c, Attempt{N: 1, Took: took})
		return v, nil
	}
	verdict := c.classifier(callErr)
	endFailed(ctx, l, verdict)
	report(c, Attempt{N: 1, Took: took, Verdict: verdict, Err: callErr})
	if verdict.Kind == classify.RateLimited {
		d := c.delay(1, verdict)
		verdict.RetryAfter = d
		_ = p.Pause(ctx, d)
	}
	return zero, &RunError{Verdict: verdict, Attempts: 1, Err: callErr}
}
