package pacer_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
)

// startProvider starts a simulated provider for the test, and a client of
// it.
func startProvider(t *testing.T, cfg fakeprovider.Config) (*fakeprovider.Provider, chatClient) {
	t.Helper()
	fp, err := fakeprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	return fp, chatClient{url: srv.URL, anthropic: cfg.Style == fakeprovider.Anthropic, hc: srv.Client()}
}

// chatClient calls the simulated provider the way an SDK would: errors carry
// the response, so classify reads them.
type chatClient struct {
	url       string
	anthropic bool
	hc        *http.Client
}

type usage struct{ Prompt, Output int64 }

func (u usage) Total() int64 { return u.Prompt + u.Output }

// chat sends one call: prompt tokens and the output tokens the fake
// provider should report, max output tokens as max_tokens.
func (c chatClient) chat(ctx context.Context, prompt, output, maxTokens int64) (usage, error) {
	style := fakeprovider.OpenAI
	if c.anthropic {
		style = fakeprovider.Anthropic
	}
	u, err := fakeprovider.Do(ctx, c.hc, c.url, fakeprovider.Call{Style: style, Prompt: prompt, Output: output, MaxTokens: maxTokens})
	return usage{Prompt: u.PromptTokens, Output: u.OutputTokens}, err
}
