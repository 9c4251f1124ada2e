package fakeprovider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/classify"
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

// TestAnthropicInputOutputLimits checks Anthropic's separate input- and
// output-token limits through the SDK: their headers, the cache reads the
// input limit does not count, the refund of unused output, and the 429
// that names the output limit.
func TestAnthropicInputOutputLimits(t *testing.T) {
	p, srv := startServer(t, Config{Style: Anthropic, InputTokenLimit: 1000, OutputTokenLimit: 120, Refund: true})
	call := func(tk tokens) (*http.Response, error) {
		var resp *http.Response
		_, err := anthropicClient(srv, tk).Messages.New(context.Background(), messageParams(50), aoption.WithResponseInto(&resp))
		return resp, err
	}
	resp, err := call(tokens{prompt: 100, cacheRead: 40, output: 10})
	if err != nil {
		t.Fatal(err)
	}
	h := resp.Header
	for name, want := range map[string]string{
		"anthropic-ratelimit-input-tokens-limit":      "1000",
		"anthropic-ratelimit-input-tokens-remaining":  "940", // 100 - 40 read from the cache
		"anthropic-ratelimit-output-tokens-limit":     "120",
		"anthropic-ratelimit-output-tokens-remaining": "110", // 50 charged, 40 unused given back
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, err := time.Parse(time.RFC3339, h.Get("anthropic-ratelimit-output-tokens-reset")); err != nil {
		t.Errorf("anthropic-ratelimit-output-tokens-reset = %q, not RFC 3339: %v", h.Get("anthropic-ratelimit-output-tokens-reset"), err)
	}
	for range 2 { // each uses all 50 of its cap: 10 output tokens remain
		if _, err := call(tokens{prompt: 1}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = call(tokens{prompt: 1})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests ||
		!strings.Contains(apiErr.RawJSON(), "output tokens") || apiErr.Response.Header.Get("retry-after") == "" {
		t.Fatalf("fourth call error = %v, want a 429 naming the output-token limit, with retry-after", err)
	}
	if v := classify.FromError(err); v.Kind != classify.RateLimited {
		t.Errorf("classify.FromError() = %v, want RateLimited", v)
	}
	if es := endpointStats(p, Messages); es.OK != 3 || es.RateLimited != 1 {
		t.Errorf("Stats().Endpoints[messages] = %+v, want 3 OK, 1 rate-limited", es)
	}
}
