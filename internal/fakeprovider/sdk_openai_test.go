package fakeprovider

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// usageSeen is the usage an SDK decoded, in the provider's terms.
type usageSeen struct {
	Prompt, Output, CacheRead, CacheCreation, Reasoning int64
}

// seenByProvider is what the provider counted for ep, in the same terms.
func seenByProvider(p *Provider, ep Endpoint) usageSeen {
	es := endpointStats(p, ep)
	return usageSeen{es.PromptTokens, es.OutputTokens, es.CacheReadTokens, es.CacheCreationTokens, es.ReasoningTokens}
}

// checkUsage compares the usage the SDK decoded with the provider's count.
func checkUsage(t *testing.T, p *Provider, ep Endpoint, got usageSeen) {
	t.Helper()
	if diff := cmp.Diff(seenByProvider(p, ep), got); diff != "" {
		t.Errorf("%s: SDK usage differs from the provider's Stats (-provider +sdk):\n%s", ep, diff)
	}
}

func chatParams(maxTokens, n int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:               openai.ChatModelGPT4oMini,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		MaxCompletionTokens: openai.Int(maxTokens),
		N:                   openai.Int(n),
	}
}

func TestOpenAISDKChat(t *testing.T) {
	ctx := context.Background()
	tk := tokens{prompt: 20, output: 7, cacheRead: 5, reasoning: 2}
	p, srv := startServer(t, Config{TokenLimit: 1000})
	client := openaiClient(srv, "/v1/", tk.openaiOptions()...)
	resp, err := client.Chat.Completions.New(ctx, chatParams(10, 2))
	if err != nil {
		t.Fatalf("Chat.Completions.New() error = %v", err)
	}
	if len(resp.Choices) != 2 || resp.Choices[1].Message.Content != wantText(5) || resp.Choices[1].FinishReason != "stop" {
		t.Errorf("choices = %+v, want 2 of %q, stop", resp.Choices, wantText(5))
	}
	u := resp.Usage
	checkUsage(t, p, ChatCompletions, usageSeen{Prompt: u.PromptTokens, Output: u.CompletionTokens,
		CacheRead: u.PromptTokensDetails.CachedTokens, Reasoning: u.CompletionTokensDetails.ReasoningTokens})
	if u.CompletionTokens != 14 || u.TotalTokens != 34 || u.CompletionTokensDetails.ReasoningTokens != 4 {
		t.Errorf("usage = %+v, want 14 output (2 choices × 7), 34 total, 4 reasoning", u)
	}
	if got := p.Stats().TokensAdmitted; got != 20+10*2 {
		t.Errorf("TokensAdmitted = %d, want prompt + max_completion_tokens × n = 40", got)
	}
}

// TestOpenAISDKChatStreamUsage checks stream_options.include_usage as
// OpenAI documents it: with it, one extra chunk before [DONE] has empty
// choices and the usage, and every other chunk has "usage": null; without
// it no chunk has a usage field.
func TestOpenAISDKChatStreamUsage(t *testing.T) {
	for _, include := range []bool{false, true} {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		client := openaiClient(srv, "/v1/", tokens{prompt: 9, output: 4}.openaiOptions()...)
		params := chatParams(6, 1)
		if include {
			params.StreamOptions.IncludeUsage = openai.Bool(true)
		}
		s := client.Chat.Completions.NewStreaming(context.Background(), params)
		var text string
		var usageChunks, nullUsage int
		var u openai.CompletionUsage
		for s.Next() {
			c := s.Current()
			switch raw := c.JSON.Usage.Raw(); raw {
			case "":
			case "null":
				nullUsage++
			default:
				usageChunks++
				u = c.Usage
				if len(c.Choices) != 0 {
					t.Errorf("usage chunk has choices %+v, want none", c.Choices)
				}
			}
			for _, ch := range c.Choices {
				text += ch.Delta.Content
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("include_usage=%v: stream Err() = %v", include, err)
		}
		_ = s.Close()
		if text != wantText(4) {
			t.Errorf("include_usage=%v: text = %q, want %q", include, text, wantText(4))
		}
		if !include {
			if usageChunks+nullUsage != 0 {
				t.Errorf("without include_usage: %d chunks carry usage, %d null; want no usage field at all", usageChunks, nullUsage)
			}
			continue
		}
		if usageChunks != 1 || nullUsage == 0 {
			t.Errorf("with include_usage: %d usage chunks, %d null; want 1 and the rest null", usageChunks, nullUsage)
		}
		checkUsage(t, p, ChatCompletions, usageSeen{Prompt: u.PromptTokens, Output: u.CompletionTokens})
	}
}

func responseParams(maxTokens int64) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           openai.ChatModelGPT4oMini,
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")},
		MaxOutputTokens: openai.Int(maxTokens),
	}
}

// responsesSeen reads a Responses API usage in the provider's terms.
func responsesSeen(u responses.ResponseUsage) usageSeen {
	return usageSeen{Prompt: u.InputTokens, Output: u.OutputTokens,
		CacheRead: u.InputTokensDetails.CachedTokens, Reasoning: u.OutputTokensDetails.ReasoningTokens}
}

func TestOpenAISDKResponses(t *testing.T) {
	ctx := context.Background()
	tk := tokens{prompt: 30, output: 8, cacheRead: 10, reasoning: 3}
	t.Run("json", func(t *testing.T) {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		resp, err := openaiClient(srv, "/v1/", tk.openaiOptions()...).Responses.New(ctx, responseParams(12))
		if err != nil {
			t.Fatalf("Responses.New() error = %v", err)
		}
		if resp.OutputText() != wantText(5) || resp.Status != "completed" {
			t.Errorf("output %q status %q, want %q completed", resp.OutputText(), resp.Status, wantText(5))
		}
		checkUsage(t, p, Responses, responsesSeen(resp.Usage))
		if resp.Usage.TotalTokens != 38 {
			t.Errorf("total_tokens = %d, want 38", resp.Usage.TotalTokens)
		}
		if got := p.Stats().TokensAdmitted; got != 30+12 {
			t.Errorf("TokensAdmitted = %d, want prompt + max_output_tokens = 42", got)
		}
	})
	t.Run("stream", func(t *testing.T) {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		s := openaiClient(srv, "/v1/", tk.openaiOptions()...).Responses.NewStreaming(ctx, responseParams(12))
		var text string
		var types []string
		var final responses.Response
		for s.Next() {
			ev := s.Current()
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				text += ev.Delta
			case "response.completed":
				final = ev.AsResponseCompleted().Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("stream Err() = %v", err)
		}
		_ = s.Close()
		if text != wantText(5) || final.OutputText() != text {
			t.Errorf("deltas %q, final text %q; want %q both", text, final.OutputText(), wantText(5))
		}
		if types[0] != "response.created" || types[len(types)-1] != "response.completed" {
			t.Errorf("event types = %v, want response.created ... response.completed", types)
		}
		checkUsage(t, p, Responses, responsesSeen(final.Usage))
	})
	t.Run("incomplete", func(t *testing.T) {
		_, srv := startServer(t, Config{})
		resp, err := openaiClient(srv, "/v1/", tokens{output: 50}.openaiOptions()...).Responses.New(ctx, responseParams(4))
		if err != nil {
			t.Fatalf("Responses.New() error = %v", err)
		}
		if resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" || resp.Usage.OutputTokens != 4 {
			t.Errorf("status %q reason %q output %d, want incomplete max_output_tokens 4",
				resp.Status, resp.IncompleteDetails.Reason, resp.Usage.OutputTokens)
		}
	})
}

func completionParams(maxTokens, n int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModelGPT3_5TurboInstruct,
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon a time")},
		MaxTokens: openai.Int(maxTokens),
		N:         openai.Int(n),
	}
}

func TestOpenAISDKCompletions(t *testing.T) {
	ctx := context.Background()
	t.Run("json", func(t *testing.T) {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		resp, err := openaiClient(srv, "/v1/").Completions.New(ctx, completionParams(5, 3))
		if err != nil {
			t.Fatalf("Completions.New() error = %v", err)
		}
		if len(resp.Choices) != 3 || resp.Choices[2].Text != wantText(5) || resp.Choices[2].Index != 2 {
			t.Errorf("choices = %+v, want 3 of %q", resp.Choices, wantText(5))
		}
		// 16 bytes of prompt is 4 tokens.
		checkUsage(t, p, Completions, usageSeen{Prompt: resp.Usage.PromptTokens, Output: resp.Usage.CompletionTokens})
		if resp.Usage.PromptTokens != 4 || p.Stats().TokensAdmitted != 4+5*3 {
			t.Errorf("prompt %d admitted %d, want 4 and 19", resp.Usage.PromptTokens, p.Stats().TokensAdmitted)
		}
	})
	t.Run("stream", func(t *testing.T) {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		params := completionParams(3, 1)
		params.StreamOptions.IncludeUsage = openai.Bool(true)
		s := openaiClient(srv, "/v1/").Completions.NewStreaming(ctx, params)
		var text string
		var u openai.CompletionUsage
		for s.Next() {
			c := s.Current()
			for _, ch := range c.Choices {
				text += ch.Text
			}
			if c.JSON.Usage.Valid() {
				u = c.Usage
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("stream Err() = %v", err)
		}
		_ = s.Close()
		if text != wantText(3) {
			t.Errorf("text = %q, want %q", text, wantText(3))
		}
		checkUsage(t, p, Completions, usageSeen{Prompt: u.PromptTokens, Output: u.CompletionTokens})
	})
}

func TestOpenAISDKEmbeddings(t *testing.T) {
	for _, format := range []openai.EmbeddingNewParamsEncodingFormat{"", "float", "base64"} {
		p, srv := startServer(t, Config{TokenLimit: 1000})
		resp, err := openaiClient(srv, "/v1/").Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model:          openai.EmbeddingModelTextEmbedding3Small,
			Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"abcd", "efghijkl"}},
			Dimensions:     openai.Int(5),
			EncodingFormat: format,
		})
		if err != nil {
			t.Fatalf("encoding %q: Embeddings.New() error = %v", format, err)
		}
		if len(resp.Data) != 2 || len(resp.Data[1].Embedding) != 5 || resp.Data[1].Index != 1 || resp.Data[1].Embedding[0] == 0 {
			t.Errorf("encoding %q: data = %+v, want 2 vectors of 5 numbers", format, resp.Data)
		}
		// One token per four bytes: 1 + 2.
		checkUsage(t, p, Embeddings, usageSeen{Prompt: resp.Usage.PromptTokens})
		if resp.Usage.PromptTokens != 3 || resp.Usage.TotalTokens != 3 || p.Stats().TokensAdmitted != 3 {
			t.Errorf("encoding %q: usage %+v admitted %d, want 3 prompt, 3 total, 3 admitted (no output)",
				format, resp.Usage, p.Stats().TokensAdmitted)
		}
	}
}
