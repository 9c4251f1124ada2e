// Package fakeprovider is a simulated LLM provider that speaks HTTP.
//
// A Provider answers POST /v1/chat/completions in the OpenAI style or
// POST /v1/messages in the Anthropic style, and enforces a token limit and a
// request limit per window the way the real services do: an admitted call is
// charged at once, a call that does not fit gets a 429 whose retry-after says
// exactly when it would fit, and a call that can never fit gets the
// "Request too large" 429. Every answer carries the provider's rate-limit
// headers. Its counters (Stats) are the ground truth for the storm benchmark,
// and its 429s, quota errors and injected faults (Fail) are real enough to
// test a retry wrapper against.
//
// Admission charges prompt tokens plus max_tokens, before any output exists.
// OpenAI's rate-limit guide says the same thing about its own limiter:
// max_tokens counts toward the limit when the request is made, so a large
// max_tokens can be refused even if the answer would be short. By default
// the unused part is not refunded; with Config.Refund it goes back to the
// token limit when the call ends, as Anthropic and Azure OpenAI document
// for theirs. The response reports the real usage, which is what the quota
// (Config.QuotaTokens) and Stats.TokensUsed count.
//
// Two headers, for tests only, tell the provider the real token counts of a
// call: PromptTokensHeader overrides the estimate of one token per four
// bytes of message text, and OutputTokensHeader sets how many tokens the
// answer uses (capped at max_tokens, as a real model is; the default is
// max_tokens).
//
// The limiter runs on the wall clock unless a test swaps the unexported
// clock seam. To run a storm faster, scale Config.Window down together with
// the limits instead of faking time.
//
// Out of scope: tools, images, embeddings, per-model limits, and any
// tokenizer. The answer text is filler; only its token counts mean anything.
package fakeprovider
