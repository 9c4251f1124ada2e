package pacer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// chatClient is the smallest OpenAI- or Anthropic-style client the tests
// need: it posts a chat request and returns the usage, or an error that
// carries the response the way the official SDKs' errors do.
type chatClient struct {
	url       string
	anthropic bool
	hc        *http.Client
}

type usage struct{ Prompt, Output int64 }

func (u usage) Total() int64 { return u.Prompt + u.Output }

// apiError carries the response like openai-go's and anthropic-sdk-go's
// errors: classify reads it through HTTPResponse and RawJSON.
type apiError struct {
	resp *http.Response
	body []byte
}

func (e *apiError) Error() string                { return fmt.Sprintf("%d %s", e.resp.StatusCode, e.body) }
func (e *apiError) HTTPResponse() *http.Response { return e.resp }
func (e *apiError) RawJSON() string              { return string(e.body) }

// chat sends one call: prompt tokens and the output tokens the fake
// provider should report, max output tokens as max_tokens.
func (c chatClient) chat(ctx context.Context, prompt, output, maxTokens int64) (usage, error) {
	path := "/v1/chat/completions"
	if c.anthropic {
		path = "/v1/messages"
	}
	body, _ := json.Marshal(map[string]any{
		"model":      "gpt-4o-mini",
		"max_tokens": maxTokens,
		"messages":   []map[string]string{{"role": "user", "content": "hello"}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(body))
	if err != nil {
		return usage{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Fake-Prompt-Tokens", strconv.FormatInt(prompt, 10))
	req.Header.Set("X-Fake-Output-Tokens", strconv.FormatInt(output, 10))
	hc := c.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return usage{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return usage{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return usage{}, &apiError{resp: resp, body: data}
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
		return usage{}, err
	}
	u := out.Usage
	return usage{Prompt: u.PromptTokens + u.InputTokens, Output: u.CompletionTokens + u.OutputTokens}, nil
}
