package fakeprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Call is one chat request to a Provider, as tests and the storm send it.
type Call struct {
	Style     Style // which route and answer format: OpenAI or Anthropic chat, not Gemini
	Prompt    int64 // the prompt tokens the provider should count
	Output    int64 // the output tokens it should report (at most MaxTokens)
	MaxTokens int64
	Header    http.Header // extra request headers, if any
}

// APIError is a non-200 answer. It carries the response the way the
// official SDKs' errors do (HTTPResponse, RawJSON), so classify.FromError
// reads it as it reads theirs.
type APIError struct {
	Response *http.Response // the body is already read into Body
	Body     []byte
}

// Error reports the status and the body.
func (e *APIError) Error() string { return fmt.Sprintf("%d %s", e.Response.StatusCode, e.Body) }

// HTTPResponse returns the answer, headers included.
func (e *APIError) HTTPResponse() *http.Response { return e.Response }

// RawJSON returns the answer's body.
func (e *APIError) RawJSON() string { return string(e.Body) }

// Do sends c to the provider at baseURL with hc and returns the usage the
// answer reports, or an *APIError for any other status.
func Do(ctx context.Context, hc *http.Client, baseURL string, c Call) (Usage, error) {
	path := "/v1/chat/completions"
	if c.Style == Anthropic {
		path = "/v1/messages"
	}
	body, _ := json.Marshal(map[string]any{
		"model":      "gpt-4o-mini",
		"max_tokens": c.MaxTokens,
		"messages":   []map[string]string{{"role": "user", "content": "hello"}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, bytes.NewReader(body))
	if err != nil {
		return Usage{}, err
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(PromptTokensHeader, strconv.FormatInt(c.Prompt, 10))
	req.Header.Set(OutputTokensHeader, strconv.FormatInt(c.Output, 10))
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Usage{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Usage{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Usage{}, &APIError{Response: resp, Body: data}
	}
	var out struct {
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
			InputTokens      int64 `json:"input_tokens"`
			OutputTokens     int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return Usage{}, fmt.Errorf("fakeprovider: decoding the answer: %w", err)
	}
	u := out.Usage
	return Usage{PromptTokens: u.PromptTokens + u.InputTokens, OutputTokens: u.CompletionTokens + u.OutputTokens}, nil
}
