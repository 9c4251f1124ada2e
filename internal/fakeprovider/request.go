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
	// PromptTokensHeader sets the real prompt token count. Without it the
	// provider estimates one token per four bytes of message text,
	// rounded up.
	PromptTokensHeader = "X-Fake-Prompt-Tokens"
	// OutputTokensHeader sets how many tokens the answer uses. Without it
	// the answer uses all of max_tokens; above max_tokens it is cut to
	// max_tokens and the answer reports finish_reason "length"
	// (stop_reason "max_tokens").
	OutputTokensHeader = "X-Fake-Output-Tokens"
)

const (
	openAIPath    = "/v1/chat/completions"
	anthropicPath = "/v1/messages"
	maxBodyBytes  = 8 << 20
	// defaultMaxTokens is charged when an OpenAI request sets no limit.
	// OpenAI would then reserve up to the model's context; a small fixed
	// figure keeps the simulator predictable. Anthropic requires the field.
	defaultMaxTokens = 16
	// maxCount bounds every token count a request can set, so that
	// prompt + max_tokens cannot overflow.
	maxCount = 1 << 40
)

// call is a parsed, valid request.
type call struct {
	model        string
	prompt       int64 // real prompt tokens
	maxTokens    int64
	output       int64 // real output tokens, <= maxTokens
	truncated    bool  // output was cut at maxTokens
	stream       bool
	includeUsage bool // OpenAI stream_options.include_usage
}

// charge is what admission costs, before any output exists.
func (c call) charge() int64 { return c.prompt + c.maxTokens }

// usage is what the call really used.
func (c call) usage() Usage { return Usage{PromptTokens: c.prompt, OutputTokens: c.output} }

// wireRequest holds the fields read from both request styles.
type wireRequest struct {
	Model               string          `json:"model"`
	Messages            []wireMessage   `json:"messages"`
	System              json.RawMessage `json:"system"` // Anthropic
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"` // OpenAI
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// parseCall checks the route and decodes the body of r.
func parseCall(w http.ResponseWriter, r *http.Request, style Style) (call, *apiError) {
	if apiErr := checkRoute(r, style); apiErr != nil {
		return call{}, apiErr
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return call{}, invalidRequest("", "could not read the request body: "+err.Error())
	}
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return call{}, invalidRequest("", "We could not parse the JSON body of your request: "+err.Error())
	}
	if req.Model == "" {
		return call{}, invalidRequest("model", "you must provide a model parameter")
	}
	if len(req.Messages) == 0 {
		return call{}, invalidRequest("messages", "messages: at least one message is required")
	}
	c := call{model: req.Model, stream: req.Stream}
	if style == OpenAI && req.Stream && req.StreamOptions != nil {
		c.includeUsage = req.StreamOptions.IncludeUsage
	}
	var apiErr *apiError
	if c.maxTokens, apiErr = pickMaxTokens(style, req); apiErr != nil {
		return call{}, apiErr
	}
	prompt, set, apiErr := headerCount(r, PromptTokensHeader)
	if apiErr == nil && !set {
		prompt, apiErr = estimatePrompt(req)
	}
	if apiErr != nil {
		return call{}, apiErr
	}
	c.prompt = prompt
	output, set, apiErr := headerCount(r, OutputTokensHeader)
	if apiErr != nil {
		return call{}, apiErr
	}
	c.output = c.maxTokens
	if set {
		c.output, c.truncated = min(output, c.maxTokens), output > c.maxTokens
	}
	return c, nil
}

// checkRoute accepts only POST to the endpoint of the style.
func checkRoute(r *http.Request, style Style) *apiError {
	path := openAIPath
	if style == Anthropic {
		path = anthropicPath
	}
	if r.URL.Path != path {
		return notFound(style, r.Method, r.URL.Path)
	}
	if r.Method != http.MethodPost {
		return methodNotAllowed(style, r.Method, r.URL.Path)
	}
	return nil
}

// pickMaxTokens returns the output limit of the request.
func pickMaxTokens(style Style, req wireRequest) (int64, *apiError) {
	param, v := "max_tokens", req.MaxTokens
	if style == OpenAI && req.MaxCompletionTokens != nil {
		// The newer OpenAI name wins, as it does for the real API's
		// reasoning models that reject max_tokens.
		param, v = "max_completion_tokens", req.MaxCompletionTokens
	}
	switch {
	case v == nil && style == Anthropic:
		return 0, invalidRequest(param, "max_tokens: Field required")
	case v == nil:
		return defaultMaxTokens, nil
	case *v < 1:
		return 0, belowMinimum(style, param, *v)
	case *v > maxCount:
		return 0, invalidRequest(param, fmt.Sprintf("%s: %d is too large", param, *v))
	}
	return *v, nil
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

// estimatePrompt counts one token per four bytes of text, rounded up: the
// usual rule of thumb for English, and good enough for a simulator.
func estimatePrompt(req wireRequest) (int64, *apiError) {
	var size int64
	parts := []json.RawMessage{req.System}
	for _, m := range req.Messages {
		parts = append(parts, m.Content)
	}
	for i, raw := range parts {
		text, err := contentText(raw)
		if err != nil {
			param := "system"
			if i > 0 {
				param = fmt.Sprintf("messages[%d].content", i-1)
			}
			return 0, invalidRequest(param, param+": must be a string or an array of text parts")
		}
		size += int64(len(text))
	}
	return ceilDiv(size, 4), nil
}

// contentText returns the text of a content field, which both APIs accept
// as a string or as an array of parts with a "text" field.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	for _, p := range parts {
		s += p.Text
	}
	return s, nil
}
