package fakeprovider

import (
	"context"
	"net/http/httptest"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicClient is an anthropic-sdk-go client for the server, with no
// retries, that sends the token headers of tk.
func anthropicClient(srv *httptest.Server, tk tokens) *anthropic.Client {
	opts := []aoption.RequestOption{aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("test"),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(srv.Client())}
	for name, vs := range tk.header() {
		opts = append(opts, aoption.WithHeader(name, vs[0]))
	}
	c := anthropic.NewClient(opts...)
	return &c
}

func messageParams(maxTokens int64) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: maxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	}
}

// anthropicSeen reads Anthropic's usage in the provider's terms: its
// input_tokens leave out the cached tokens, which the prompt includes.
func anthropicSeen(u anthropic.Usage) usageSeen {
	return usageSeen{Prompt: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		Output: u.OutputTokens, CacheRead: u.CacheReadInputTokens, CacheCreation: u.CacheCreationInputTokens}
}

func TestAnthropicSDKMessages(t *testing.T) {
	ctx := context.Background()
	tk := tokens{prompt: 100, output: 6, cacheRead: 60, cacheWrite: 25}
	t.Run("json", func(t *testing.T) {
		p, srv := startServer(t, Config{Style: Anthropic, TokenLimit: 1000})
		msg, err := anthropicClient(srv, tk).Messages.New(ctx, messageParams(9))
		if err != nil {
			t.Fatalf("Messages.New() error = %v", err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != wantText(6) || msg.StopReason != "end_turn" {
			t.Errorf("message = %+v, want %q end_turn", msg.Content, wantText(6))
		}
		if msg.Usage.InputTokens != 15 {
			t.Errorf("input_tokens = %d, want 100 - 60 read - 25 written = 15", msg.Usage.InputTokens)
		}
		checkUsage(t, p, Messages, anthropicSeen(msg.Usage))
	})
	t.Run("stream", func(t *testing.T) {
		p, srv := startServer(t, Config{Style: Anthropic, TokenLimit: 1000})
		s := anthropicClient(srv, tk).Messages.NewStreaming(ctx, messageParams(9))
		var acc anthropic.Message
		var start anthropic.Usage
		var deltaOutput []int64
		for s.Next() {
			ev := s.Current()
			if err := acc.Accumulate(ev); err != nil {
				t.Fatalf("Accumulate(%s) error = %v", ev.Type, err)
			}
			switch ev.Type {
			case "message_start":
				start = ev.AsMessageStart().Message.Usage
			case "message_delta":
				deltaOutput = append(deltaOutput, ev.AsMessageDelta().Usage.OutputTokens)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("stream Err() = %v", err)
		}
		_ = s.Close()
		if start.InputTokens != 15 || start.CacheReadInputTokens != 60 || start.CacheCreationInputTokens != 25 {
			t.Errorf("message_start usage = %+v, want 15 input, 60 read, 25 written", start)
		}
		if len(deltaOutput) != 1 || deltaOutput[0] != 6 {
			t.Errorf("message_delta output_tokens = %v, want the cumulative [6]", deltaOutput)
		}
		if acc.Content[0].Text != wantText(6) {
			t.Errorf("streamed text = %q, want %q", acc.Content[0].Text, wantText(6))
		}
		checkUsage(t, p, Messages, anthropicSeen(acc.Usage))
	})
}
