package retry

import (
	"time"

	"github.com/llmpacer/llmpacer/classify"
)

// Attempt describes one try of a call, for the WithOnAttempt option.
type Attempt struct {
	N       int           // 1 for the first try
	Waited  time.Duration // in Acquire before this try
	Took    time.Duration // the call itself
	Verdict classify.Verdict
	Err     error // nil on success
}

// Option changes how Run and RunGroup call and retry. Every option is a
// With function.
type Option func(*config)

type config struct {
	retries    int
	base, max  time.Duration
	budget     time.Duration
	classifier func(error) classify.Verdict
	onAttempt  func(Attempt)
	rateDelay  time.Duration
	noWait     bool
}

// Run's defaults: WithRetries, WithBackoff, and the pause after a 429
// that names no delay.
const (
	defaultRetries        = 3
	defaultBackoffBase    = 500 * time.Millisecond
	defaultBackoffMax     = 30 * time.Second
	defaultRateLimitDelay = time.Second
)

// WithRetries sets how many times Run retries after the first attempt
// (default 3). Run's retries are LLM calls; the Redis client's own retries
// (go-redis MaxRetries) are separate and never count here.
func WithRetries(n int) Option { return func(c *config) { c.retries = max(n, 0) } }

// WithBackoff sets the capped exponential backoff for Overloaded and Transient
// failures: attempt n sleeps a random time in [d/2, d], d = min(max,
// base·2^(n-1)), or longer if the provider named a delay. The defaults are
// base 500ms and max 30s.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) {
		if base > 0 {
			c.base = base
		}
		if max > 0 {
			c.max = max
		}
	}
}

// WithLatencyBudget bounds the time Run may spend before starting an
// attempt: waiting for the budget and backing off. Once an attempt could
// not start within d of Run's start, Run returns the last error (or
// pacer.ErrWaitTimeout) instead of waiting on. The call itself is bounded
// by ctx, not by d.
func WithLatencyBudget(d time.Duration) Option { return func(c *config) { c.budget = d } }

// WithClassifier replaces classify.FromError for deciding what a call's
// error means.
func WithClassifier(f func(error) classify.Verdict) Option {
	return func(c *config) {
		if f != nil {
			c.classifier = f
		}
	}
}

// WithOnAttempt calls f after every attempt, successful or not.
func WithOnAttempt(f func(Attempt)) Option { return func(c *config) { c.onAttempt = f } }

// WithNoWait makes Run (or RunGroup) a job queue's call: it sends the call
// only if the budget (a deployment) has room now, as pacer's TryAcquire
// admits, and never sleeps, for room or to back off, so it makes one
// attempt whatever WithRetries says. If there is no room it returns a
// *pacer.RefusedError (errors.Is pacer.ErrWaitTimeout, with a Bound of 0)
// with the time until there will be, having charged nothing: hand the job back to the queue
// with that delay. A call answered RateLimited pauses the shared budget
// and comes back as an *Error whose RetryAfter says when to try again;
// other failures are *Errors as without the option.
func WithNoWait() Option { return func(c *config) { c.noWait = true } }

func newConfig(opts []Option) config {
	c := config{retries: defaultRetries, base: defaultBackoffBase, max: defaultBackoffMax,
		classifier: classify.FromError, rateDelay: defaultRateLimitDelay}
	for _, o := range opts {
		o(&c)
	}
	return c
}
