package fakeprovider

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Mode selects the algorithm that enforces a limit.
type Mode int

const (
	// TokenBucket refills continuously at limit/Window and holds at most
	// limit, so a full bucket allows a burst of one whole window's budget.
	// It is the default and the way OpenAI describes its own limits.
	TokenBucket Mode = iota
	// SlidingWindow is strict: the units admitted within any trailing
	// Window never exceed the limit, because each admission only leaves
	// the count one Window after it was made.
	SlidingWindow
)

// String returns the name of the mode, as used in Go code.
func (m Mode) String() string {
	switch m {
	case TokenBucket:
		return "TokenBucket"
	case SlidingWindow:
		return "SlidingWindow"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Style selects which provider is simulated: its endpoints, its request
// and response bodies, its error bodies and its rate-limit headers. One
// Provider serves every endpoint of its style, routed by path.
type Style int

const (
	// OpenAI serves chat completions, responses, legacy completions,
	// embeddings and the models list, under OpenAI's /v1/ paths and Azure
	// OpenAI's /openai/ paths, with x-ratelimit-* headers. It is the
	// default.
	OpenAI Style = iota
	// Anthropic serves POST /v1/messages and GET /v1/models with
	// anthropic-ratelimit-* headers.
	Anthropic
	// Gemini serves generateContent and streamGenerateContent under
	// /v1beta/models/ and answers a rate limit with Google's
	// RESOURCE_EXHAUSTED error. Like the real Gemini API it sends no
	// rate-limit headers.
	Gemini
)

// String returns the name of the style, as used in Go code.
func (s Style) String() string {
	switch s {
	case OpenAI:
		return "OpenAI"
	case Anthropic:
		return "Anthropic"
	case Gemini:
		return "Gemini"
	}
	return fmt.Sprintf("Style(%d)", int(s))
}

// Usage is the real token count of one admitted call.
type Usage struct {
	// PromptTokens is the number of input tokens.
	PromptTokens int64
	// OutputTokens is the number of generated tokens.
	OutputTokens int64
}

// Config describes a simulated provider. The zero value is an OpenAI-style
// provider with no limits, no quota and no latency.
type Config struct {
	// TokenLimit is the number of tokens admitted per Window, counting
	// prompt plus max_tokens of each call. 0 means no token limit.
	TokenLimit int64
	// RequestLimit is the number of calls admitted per Window.
	// 0 means no request limit.
	RequestLimit int64
	// InputTokenLimit is the number of prompt tokens admitted per
	// Window, not counting those read from the prompt cache: Anthropic's
	// input-tokens limit (ITPM). 0 means none.
	InputTokenLimit int64
	// OutputTokenLimit is the number of output tokens admitted per
	// Window, charged as max_tokens × n at admission: Anthropic's
	// output-tokens limit (OTPM). With Refund the unused part goes back
	// when the call ends, as Anthropic documents. 0 means none.
	OutputTokenLimit int64
	// Window is the period both limits refer to. 0 means one minute,
	// the period of the TPM and RPM limits real providers publish.
	Window time.Duration
	// Mode is the algorithm of both limits. The zero value is TokenBucket.
	Mode Mode
	// Style is the provider to imitate. The zero value is OpenAI.
	Style Style
	// Latency is how long an admitted call takes before its answer is
	// written. Refused calls answer at once, as real providers do.
	Latency time.Duration
	// LatencyFunc, if set, replaces Latency with a duration per call.
	// It runs outside the provider's lock, so it may block.
	LatencyFunc func(Usage) time.Duration
	// QuotaTokens is the total credit in tokens of real usage. Once this
	// many tokens have been used, every call answers 429
	// insufficient_quota (OpenAI), 400 "credit balance is too low"
	// (Anthropic) or a per-day 429 RESOURCE_EXHAUSTED (Gemini), and it
	// never clears. 0 means no quota. StopQuota does the same on demand.
	QuotaTokens int64
	// Refund makes the token limit correct its count when a call ends:
	// the part of max_tokens the answer did not use goes back, as
	// Anthropic documents for its output-token limits and Azure OpenAI
	// for its reservations. The false default keeps the whole charge, as
	// OpenAI documents for its own limiter. A call whose client gave up
	// before the answer keeps its whole charge either way.
	Refund bool
	// FaultWait is the retry-after of a 429 that Fail injects. 0 means
	// one second. A test whose next step must land inside the pause the
	// 429 starts, on a loaded machine, asks for more.
	FaultWait time.Duration

	// now is the clock seam; nil means time.Now. Tests set it.
	now func() time.Time
}

// normalize fills in defaults and rejects what the limiter cannot honour.
func (c Config) normalize() (Config, error) {
	switch {
	case c.TokenLimit < 0:
		return c, fmt.Errorf("fakeprovider: TokenLimit %d is negative", c.TokenLimit)
	case c.RequestLimit < 0:
		return c, fmt.Errorf("fakeprovider: RequestLimit %d is negative", c.RequestLimit)
	case c.InputTokenLimit < 0 || c.OutputTokenLimit < 0:
		return c, fmt.Errorf("fakeprovider: InputTokenLimit %d or OutputTokenLimit %d is negative", c.InputTokenLimit, c.OutputTokenLimit)
	case c.Window < 0:
		return c, fmt.Errorf("fakeprovider: Window %v is negative", c.Window)
	case c.Latency < 0:
		return c, fmt.Errorf("fakeprovider: Latency %v is negative", c.Latency)
	case c.FaultWait < 0:
		return c, fmt.Errorf("fakeprovider: FaultWait %v is negative", c.FaultWait)
	case c.QuotaTokens < 0:
		return c, fmt.Errorf("fakeprovider: QuotaTokens %d is negative", c.QuotaTokens)
	case c.Mode != TokenBucket && c.Mode != SlidingWindow:
		return c, fmt.Errorf("fakeprovider: unknown %v", c.Mode)
	case c.Style != OpenAI && c.Style != Anthropic && c.Style != Gemini:
		return c, fmt.Errorf("fakeprovider: unknown %v", c.Style)
	}
	if c.FaultWait == 0 {
		c.FaultWait = time.Second
	}
	if c.Window == 0 {
		c.Window = time.Minute
	}
	// The token bucket counts in token-nanoseconds so that refill and
	// retry delays are exact integers; limit × window must fit in int64.
	if max(c.TokenLimit, c.RequestLimit, c.InputTokenLimit, c.OutputTokenLimit) > math.MaxInt64/int64(c.Window) {
		return c, errors.New("fakeprovider: limit × Window overflows int64 nanoseconds; scale both down")
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}
