// Package classify tells what kind of failure an LLM provider call produced,
// so that a process sharing a rate-limit budget knows whether to pause the
// budget, back off, or give up.
//
// Every provider says "slow down", "you are out of money" and "we are busy"
// differently. OpenAI sends insufficient_quota as a 429, just like a rate
// limit; Anthropic sends a low credit balance as a 400 invalid_request_error
// and overload as a 529; Gemini puts a per-day quota and a per-minute rate
// limit under the same 429 RESOURCE_EXHAUSTED; Bedrock reports throttling in
// an x-amzn-errortype header. Retrying the wrong one either burns the shared
// budget on calls that cannot succeed or gives up on calls that would have.
//
// FromHTTP reads a status, headers and body; FromError reads an error, and
// finds the response inside the official Go SDKs' error types through small
// interfaces, without importing any SDK. Both return a Verdict: a Kind
// (RateLimited, QuotaExhausted, Overloaded, Transient, Permanent, Canceled or
// OK), how long the provider asked to wait, which limit tripped, and the
// provider's code and message. Verdict.Retryable is the one bit most callers
// need.
//
// ParseHeaders reads the providers' rate-limit headers (OpenAI's
// x-ratelimit-*, Anthropic's anthropic-ratelimit-*) into a RateLimits, so a
// caller can see how much budget the provider believes is left even on
// success. ParseRetryAfter reads the Retry-After family on its own.
//
// The rules, in short:
//
//   - A quota or billing signal anywhere (code, 402, a message such as
//     "credit balance is too low", a Gemini PerDay quota id) is
//     QuotaExhausted and is never retried, whatever the status.
//   - Otherwise the provider's error code decides, then the status: 429 is
//     RateLimited; 503 and 529 are Overloaded; 408, 409 and other 5xx are
//     Transient; other 4xx are Permanent.
//   - The caller's own context ending is Canceled and never retried.
//   - Contradictory delays resolve to the longest valid one, capped at
//     MaxRetryAfter; a retry-after that is only retry-after-ms rounded up to
//     whole seconds is no contradiction, and the precise value wins.
//   - Input is hostile by default: at most MaxBodyBytes of a body are read,
//     truncated JSON still yields its leading fields, and nothing panics.
//
// A transport or wrapper that wants its errors classified fully can give
// them an HTTPResponse() *http.Response method and a RawJSON() string method
// returning the body.
//
// Out of scope: retrying, sleeping and pausing the budget (package pacer
// does that with a Verdict), and provider SDKs. This package imports only
// the standard library; its tests check FromError against the SDKs' real
// errors. FromError never reads a body from the network, which may block or
// be consumed already. It reads a body only where openai-go and
// anthropic-sdk-go have put it in memory. Classification is a best guess
// from what providers document and send today; it is not a contract they
// have made.
package classify
