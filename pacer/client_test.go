package pacer_test

import (
	"context"
	"net/http"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
)

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
