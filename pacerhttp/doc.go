// Package pacerhttp paces any LLM SDK built on net/http at its transport:
// every HTTP attempt of a model call reserves its tokens on a shared budget
// (package pacer) before it is sent, and settles what the provider reports
// it used once the answer ends, streams included.
//
//	p, _ := pacer.New(rdb, pacer.Config{Name: "openai:gpt-4o-mini", Limits: pacer.Limits{RPM: 500, TPM: 200_000}})
//	client := openai.NewClient(option.WithHTTPClient(&http.Client{Transport: pacerhttp.NewTransport(p, nil)}))
//
// The transport recognises OpenAI's Chat Completions, Responses, legacy
// Completions and Embeddings (on api.openai.com, Azure OpenAI deployment
// URLs and any compatible server), Anthropic's Messages and Gemini's
// generateContent and streamGenerateContent. Anything else (files, model
// lists, batches) passes through unpaced.
//
// For each model call it:
//
//   - reads the JSON body (at most WithMaxBody bytes; a larger or
//     unreadable body passes through with a default reservation) and hands
//     the SDK an identical, replayable body;
//   - estimates the prompt offline (package estimate) and adds the output
//     cap the body sets (max_completion_tokens, max_tokens,
//     max_output_tokens, maxOutputTokens, times n), or
//     DefaultMaxOutput when it sets none;
//   - acquires a lease with the request's context, so the SDK's own retries
//     are paced too and wait out a pause set by any process: leave them on;
//   - settles the usage the answer reports: the JSON body's usage, or for a
//     stream (passed through byte for byte as it arrives) the usage in its
//     final events. A stream that ends without usage keeps its whole
//     reservation; it never settles 0. OpenAI streams are asked for their
//     usage (stream_options.include_usage) unless WithIncludeUsage(false):
//     the stream then ends with one more chunk, whose choices are empty;
//   - answers failures for the whole fleet: a 429 pauses the budget for the
//     provider's delay (the answer goes back to the SDK unchanged, and its
//     retry waits in Acquire; a group transport first sends the call on to
//     another deployment with room, see NewGroupTransport); an exhausted
//     quota stops the budget in every process (their calls fail at once
//     with an error matching pacer.ErrQuotaExhausted, sending nothing)
//     until one probe (every pacer.Config.QuotaProbe) succeeds. All of it
//     is pacer.Lease.Fail, as in retry.Run, which also ends the failed
//     call's lease: a 429, a 5xx (Anthropic's 529 overloaded included) or
//     a network failure keeps the reservation; an exhausted quota or
//     another 4xx (but a 408, 409 or 425, which may have been processed)
//     gives the tokens back;
//   - follows the provider's rate-limit headers (pacer.Sync), so a caller
//     outside the pacer on the same key is seen within one answer.
//
// An SDK takes the transport's refusal for a connection error and retries
// it. openai-go and anthropic-sdk-go ask again MaxRetries times (twice by
// default), after about 0.5 s and 1 s. So with their defaults a call the
// budget refuses (stopped for quota, or no room within the wait bound)
// fails after about 1.5 s, not at once. Each retry is refused at once and
// sends nothing, unless the budget has room by then: a retry that comes
// after a quota stop's probe interval is that interval's probe.
//
// Priority and wait bound come from the request's context: see
// ContextWithPriority and ContextWithMaxWait.
//
// NewHandler is the other side. It is middleware that puts a budget in
// front of your own users: each request is charged to its tenant, and
// answered 429 with Retry-After and RateLimit headers when there is no
// room, or held in a waiting room up to a latency budget, with a fallback.
// See docs/inbound.md.
package pacerhttp
