// Package fakeprovider is a simulated LLM provider that speaks HTTP.
//
// A Provider imitates one provider (Config.Style) and serves all of its
// endpoints, routed by path, in wire formats the official SDKs decode:
//
//   - OpenAI: POST /v1/chat/completions, /v1/responses, /v1/completions
//     and /v1/embeddings, and GET /v1/models. Azure OpenAI's paths reach
//     the same endpoints: /openai/deployments/{deployment}/{op} and
//     /openai/{op} with ?api-version=, and /openai/v1/{op}.
//   - Anthropic: POST /v1/messages and GET /v1/models.
//   - Gemini: POST /v1beta/models/{model}:generateContent and
//     :streamGenerateContent?alt=sse, and GET /v1beta/models.
//
// Every call but the models list can stream, except embeddings. A chat or
// legacy completions stream carries the usage only when
// stream_options.include_usage asks for it, in one last chunk with empty
// choices, as OpenAI's does. The other streams end with their usage:
// response.completed, message_delta, the last Gemini chunk.
//
// The provider enforces a token limit and a request limit per window the
// way the real services do: an admitted call is charged at once, a call
// that does not fit gets a 429 whose retry delay says exactly when it
// would fit, and a call that can never fit gets the "Request too large"
// 429. Anthropic's separate input- and output-token limits are optional.
// Every OpenAI and Anthropic answer carries the provider's rate-limit
// headers, which count the calls of every client. Gemini sends none, as
// the real API does; its 429 is RESOURCE_EXHAUSTED with a QuotaFailure
// and a RetryInfo. The models list is never limited or charged.
//
// Admission charges prompt tokens plus the output cap times the number
// of choices, before any output exists. The cap is max_completion_tokens
// or max_tokens (chat), max_tokens (completions, Anthropic),
// max_output_tokens (responses) or generationConfig.maxOutputTokens
// (Gemini); the choices are n or candidateCount. Embeddings have no
// output. OpenAI's rate-limit guide says the same of its own limiter: the
// cap counts when the request is made, so a large one can be refused even
// if the answer would be short. By default the unused part is not
// refunded; with Config.Refund it goes back when the call ends, as
// Anthropic and Azure OpenAI document. The response reports the real
// usage, which is what the quota (Config.QuotaTokens) and Stats count.
//
// Test-only request headers set the real token counts of a call:
// PromptTokensHeader overrides the estimate of one token per four bytes
// of input text; OutputTokensHeader sets the output of each choice (cut
// at the cap, as a real model's is; the default is the cap);
// CacheReadTokensHeader, CacheCreationTokensHeader and
// ReasoningTokensHeader fill the usage details each provider reports.
//
// Faults are set at run time: Fail answers the next calls with an error
// status, StopQuota answers every call with the provider's quota error
// until ResumeQuota, and CutStreams closes the next streams abruptly
// mid-answer. Stats counts per endpoint every request that reached the
// server, so a test can assert that none did.
//
// The limiter runs on the wall clock unless a test swaps the unexported
// clock seam. To run a storm faster, scale Config.Window down together with
// the limits instead of faking time.
//
// Out of scope: tools, images, audio, per-model limits, Gemini's JSON-array
// stream (without alt=sse), and any tokenizer. The answer text is filler;
// only its token counts mean anything.
package fakeprovider
