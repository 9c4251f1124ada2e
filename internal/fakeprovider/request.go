package fakeprovider

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Test-only request headers that tell the provider the real token counts of
// a call, so that a test can make the client's estimate differ from the
// truth on purpose.
const (
	// PromptTokensHeader sets the real prompt token count, cached tokens
	// included. Without it the provider estimates one token per four
	// bytes of input text, rounded up.
	PromptTokensHeader = "X-Fake-Prompt-Tokens"
	// OutputTokensHeader sets how many tokens each choice of the answer
	// uses. Without it the answer uses all of its output cap; above the
	// cap it is cut to the cap and the answer says so (finish_reason
	// "length", stop_reason "max_tokens", status "incomplete", finishReason
	// "MAX_TOKENS"). Embeddings have no output and ignore it.
	OutputTokensHeader = "X-Fake-Output-Tokens"
	// CacheReadTokensHeader sets how many of the prompt tokens were read
	// from the prompt cache: Anthropic's cache_read_input_tokens, OpenAI's
	// cached_tokens, Gemini's cachedContentTokenCount. Anthropic reports
	// input_tokens without them, the others include them in the prompt.
	CacheReadTokensHeader = "X-Fake-Cache-Read-Tokens"
	// CacheCreationTokensHeader sets how many of the prompt tokens were
	// written to the cache: Anthropic's cache_creation_input_tokens. The
	// other styles do not report it.
	CacheCreationTokensHeader = "X-Fake-Cache-Creation-Tokens"
	// ReasoningTokensHeader sets how many of each choice's output tokens
	// were spent reasoning (cut to the output): OpenAI's reasoning_tokens,
	// Gemini's thoughtsTokenCount. They are part of the output tokens.
	ReasoningTokensHeader = "X-Fake-Reasoning-Tokens"
)

const (
	openAIPath    = "/v1/chat/completions"
	anthropicPath = "/v1/messages"
	maxBodyBytes  = 8 << 20
	// defaultMaxTokens is charged when a request sets no output cap.
	// OpenAI would then reserve up to the model's context; a small fixed
	// figure keeps the simulator predictable. Anthropic requires the field.
	defaultMaxTokens = 16
	// maxCount bounds every token count a request can set, so that
	// prompt + max_tokens × n cannot overflow.
	maxCount = 1 << 40
	// maxChoices bounds n and candidateCount, as OpenAI does.
	maxChoices = 128
)

// call is a parsed, valid request.
type call struct {
	route
	prompt       int64 // real prompt tokens, cached ones included
	maxTokens    int64 // output cap of one choice
	n            int64 // choices (n, candidateCount), at least 1
	output       int64 // real output tokens of one choice, <= maxTokens
	truncated    bool  // output was cut at maxTokens
	stream       bool
	includeUsage bool  // stream_options.include_usage
	cacheRead    int64 // of prompt, read from the prompt cache
	cacheWrite   int64 // of prompt, written to it (Anthropic)
	reasoning    int64 // of output, per choice
	inputs       int   // embeddings: one vector per input
	dimensions   int   // embeddings: length of each vector
	base64       bool  // embeddings: encoding_format "base64"
}

// charge is what admission costs, before any output exists.
func (c call) charge() int64 { return c.prompt + c.maxTokens*c.n }

// outputTotal is the output of all choices together.
func (c call) outputTotal() int64 { return c.output * c.n }

// usage is what the call really used.
func (c call) usage() Usage { return Usage{PromptTokens: c.prompt, OutputTokens: c.outputTotal()} }

// parseCall decodes the body of r, a request for the paced route rt.
func parseCall(w http.ResponseWriter, r *http.Request, style Style, rt route) (call, *apiError) {
	c := call{route: rt}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return c, invalidRequest("", "could not read the request body: "+err.Error())
	}
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return c, invalidRequest("", "We could not parse the JSON body of your request: "+err.Error())
	}
	if apiErr := req.fill(&c, style); apiErr != nil {
		return c, apiErr
	}
	if apiErr := c.readHeaders(r, req); apiErr != nil {
		return c, apiErr
	}
	if c.cacheRead+c.cacheWrite > c.prompt {
		return c, invalidRequest("", fmt.Sprintf("headers %s + %s: %d cached tokens exceed the %d prompt tokens",
			CacheReadTokensHeader, CacheCreationTokensHeader, c.cacheRead+c.cacheWrite, c.prompt))
	}
	return c, nil
}

// readHeaders applies the test-only token headers to c, whose output cap is
// already known, and estimates the prompt of req if they do not set it.
func (c *call) readHeaders(r *http.Request, req wireRequest) *apiError {
	var counts [5]int64
	var set [5]bool
	for i, name := range []string{PromptTokensHeader, OutputTokensHeader, CacheReadTokensHeader,
		CacheCreationTokensHeader, ReasoningTokensHeader} {
		var apiErr *apiError
		if counts[i], set[i], apiErr = headerCount(r, name); apiErr != nil {
			return apiErr
		}
	}
	c.prompt = counts[0]
	if !set[0] {
		var apiErr *apiError
		if c.prompt, apiErr = req.estimatePrompt(c.ep); apiErr != nil {
			return apiErr
		}
	}
	c.output = c.maxTokens
	if set[1] {
		c.output, c.truncated = min(counts[1], c.maxTokens), counts[1] > c.maxTokens
	}
	c.cacheRead, c.cacheWrite = counts[2], counts[3]
	c.reasoning = min(counts[4], c.output)
	return nil
}

// headerCount reads a non-negative token count from a test header and
// reports whether the header was set.
func headerCount(r *http.Request, name string) (n int64, set bool, apiErr *apiError) {
	s := r.Header.Get(name)
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxCount {
		return 0, false, invalidRequest("", fmt.Sprintf("header %s: %q is not a token count", name, s))
	}
	return n, true, nil
}

// pickCount validates an optional positive request field, such as an
// output cap or a number of choices: nil gives def.
func pickCount(style Style, param string, v *int64, def, most int64) (int64, *apiError) {
	switch {
	case v == nil:
		return def, nil
	case *v < 1:
		return 0, belowMinimum(style, param, *v)
	case *v > most:
		return 0, invalidRequest(param, fmt.Sprintf("%s: %d is too large", param, *v))
	}
	return *v, nil
}
