// Package retry sends one LLM call on a shared budget of package pacer and
// retries it as the provider's answer says.
//
// Run paces a call on a *pacer.Pacer: it acquires a lease, runs the call
// while keeping the lease alive, settles the tokens the call used, and on a
// failure hands the verdict to pacer.Lease.Fail, which ends the lease and
// tells the whole fleet. A 429 pauses every process for the provider's
// delay before the retry; an overload or a 5xx is retried with capped
// exponential backoff; an exhausted quota stops every process and returns
// at once, and a permanent refusal returns at once. RunGroup does
// the same on a *pacer.Group, and sends a failing deployment's retry to
// another one at once.
//
//	reply, err := retry.Run(ctx, p, pacer.Request{Tokens: 1300}, callModel,
//		func(r Reply) int64 { return r.Usage.TotalTokens },
//		retry.WithRetries(3), retry.WithLatencyBudget(30*time.Second))
//
// A failed call comes back as an *Error, which wraps the call's own error
// and matches ErrRateLimited, ErrPermanent, ErrExhausted or
// pacer.ErrQuotaExhausted as the last verdict says; pacer.RetryAfter reads
// the provider's Retry-After from it.
//
// Turn the SDK's own retries off (openai-go and anthropic-sdk-go take
// option.WithMaxRetries(0)): Run takes a new lease for each attempt, and
// the fleet hears of every 429. For SDKs on net/http, the transport of
// package pacerhttp is the other way: it paces every HTTP attempt and
// makes the SDK's own retries safe.
//
// The package is built on pacer's public API alone. If its policy does
// not fit, write your own loop around pacer.Pacer.Acquire,
// pacer.Lease.Settle and pacer.Lease.Fail, as Run does.
package retry
