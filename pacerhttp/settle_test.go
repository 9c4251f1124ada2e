package pacerhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// wide is a budget no test call comes near.
var wide = pacer.Limits{RPM: 1000, TPM: 1_000_000}

// settled checks that the n-th lease (from 1) ended settled with want
// tokens, and that want is not 0.
func settled(t *testing.T, ev *events, n int, want int64, what string) {
	t.Helper()
	end := ev.ended(t, n)[n-1]
	if end.End != pacer.Settled || end.Used != want || want == 0 {
		t.Errorf("%s: lease ended %v using %d; want settled with the answer's %d", what, end.End, end.Used, want)
	}
}

// admittedTokens returns the reservation of the n-th lease (from 1).
func admittedTokens(t *testing.T, ev *events, n int) int64 {
	t.Helper()
	a := ev.of(pacer.Admitted)
	if len(a) < n {
		t.Fatalf("%d leases admitted; want at least %d", len(a), n)
	}
	return a[n-1].Tokens
}

func responseParams(maxTokens int64) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           openai.ChatModelGPT4oMini,
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello to the fleet")},
		MaxOutputTokens: openai.Int(maxTokens),
	}
}

// The Responses API, JSON and streamed, settles its usage exactly; a
// stream cut at max_output_tokens ends with response.incomplete, which
// carries the usage too.
func TestResponsesSettlesUsage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, wide, fakeprovider.Config{})
		p, ev := r.pacer()
		c := r.openai(p)
		ctx := context.Background()
		resp, err := c.Responses.New(ctx, responseParams(40))
		if err != nil {
			t.Fatalf("Responses.New = %v", err)
		}
		if got := admittedTokens(t, ev, 1); got <= 40 || got > 80 {
			t.Errorf("reserved %d; want the prompt estimate plus max_output_tokens 40", got)
		}
		settled(t, ev, 1, resp.Usage.TotalTokens, "JSON")

		for i, tc := range []struct {
			name, end string
			opts      []ooption.RequestOption
		}{
			{"completed", "response.completed", nil},
			{"incomplete", "response.incomplete", []ooption.RequestOption{ooption.WithHeader(fakeprovider.OutputTokensHeader, "100")}},
		} {
			stream := c.Responses.NewStreaming(ctx, responseParams(30), tc.opts...)
			var last responses.ResponseStreamEventUnion
			for stream.Next() {
				last = stream.Current()
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("%s stream: %v", tc.name, err)
			}
			stream.Close()
			if last.Type != tc.end || last.Response.Usage.OutputTokens != 30 {
				t.Fatalf("%s stream ended with %q, output %d; want %s with 30", tc.name, last.Type, last.Response.Usage.OutputTokens, tc.end)
			}
			settled(t, ev, 2+i, last.Response.Usage.TotalTokens, tc.name+" stream")
		}
	})
}

func completionParams(maxTokens int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModelGPT3_5TurboInstruct,
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(maxTokens),
	}
}

// Legacy completions, JSON and streamed (the transport asks for the
// stream's usage), settle exactly.
func TestCompletionsSettlesUsage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, wide, fakeprovider.Config{})
		p, ev := r.pacer()
		c := r.openai(p)
		ctx := context.Background()
		got, err := c.Completions.New(ctx, completionParams(20))
		if err != nil {
			t.Fatalf("Completions.New = %v", err)
		}
		settled(t, ev, 1, got.Usage.TotalTokens, "JSON")

		stream := c.Completions.NewStreaming(ctx, completionParams(20))
		var total int64
		for stream.Next() {
			if u := stream.Current().Usage; u.TotalTokens != 0 {
				total = u.TotalTokens
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		stream.Close()
		settled(t, ev, 2, total, "stream")
	})
}

// Embeddings have no output: the reservation is the input's estimate
// alone, and the lease settles the answer's usage.
func TestEmbeddingsReserveTheInputOnly(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, wide, fakeprovider.Config{})
		p, ev := r.pacer()
		c := r.openai(p)
		got, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model: openai.EmbeddingModelTextEmbedding3Small,
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("The fleet shares one budget")},
		})
		if err != nil {
			t.Fatalf("Embeddings.New = %v", err)
		}
		if tokens := admittedTokens(t, ev, 1); tokens <= 0 || tokens > 20 {
			t.Errorf("reserved %d for a 6-word input; want its estimate alone, no output", tokens)
		}
		settled(t, ev, 1, got.Usage.TotalTokens, "embeddings")
	})
}

// Azure OpenAI deployment paths are paced like OpenAI's: chat JSON and
// stream, and embeddings, each settled exactly.
func TestAzureDeploymentSettlesUsage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, wide, fakeprovider.Config{})
		p, ev := r.pacer()
		c := r.openaiAt(p, "/openai/deployments/my-gpt/",
			[]ooption.RequestOption{ooption.WithQuery("api-version", "2024-10-21"), ooption.WithHeader("api-key", "test")})
		ctx := context.Background()
		reply, err := c.Chat.Completions.New(ctx, chatParams(30))
		if err != nil {
			t.Fatalf("chat = %v", err)
		}
		settled(t, ev, 1, reply.Usage.TotalTokens, "chat")

		stream := c.Chat.Completions.NewStreaming(ctx, chatParams(30))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		stream.Close()
		settled(t, ev, 2, acc.Usage.TotalTokens, "chat stream")

		emb, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "my-embeddings",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("abcd efgh")}})
		if err != nil {
			t.Fatalf("embeddings = %v", err)
		}
		settled(t, ev, 3, emb.Usage.TotalTokens, "embeddings")
		if s := r.provider.Stats(); s.Calls != 3 || s.OK != 3 {
			t.Errorf("provider: %d calls, %d OK; want 3 and 3 on the deployment paths", s.Calls, s.OK)
		}
	})
}

// Anthropic's usage counts the cache reads and writes beside input and
// output: JSON and stream settle all four.
func TestAnthropicSettlesCacheTokens(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, wide, fakeprovider.Config{Style: fakeprovider.Anthropic})
		p, ev := r.pacer()
		c := r.anthropic(p)
		params := anthropic.MessageNewParams{
			Model:     anthropic.ModelClaudeSonnet4_5,
			MaxTokens: 40,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello to the fleet"))},
		}
		cache := []aoption.RequestOption{
			aoption.WithHeader(fakeprovider.PromptTokensHeader, "500"),
			aoption.WithHeader(fakeprovider.CacheReadTokensHeader, "300"),
			aoption.WithHeader(fakeprovider.CacheCreationTokensHeader, "120"),
		}
		total := func(u anthropic.Usage) int64 {
			return u.InputTokens + u.OutputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		}
		msg, err := c.Messages.New(context.Background(), params, cache...)
		if err != nil {
			t.Fatalf("Messages.New = %v", err)
		}
		if msg.Usage.CacheReadInputTokens != 300 || msg.Usage.CacheCreationInputTokens != 120 {
			t.Fatalf("usage %+v; want the cache tokens the headers set", msg.Usage)
		}
		settled(t, ev, 1, total(msg.Usage), "JSON")

		stream := c.Messages.NewStreaming(context.Background(), params, cache...)
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		stream.Close()
		if acc.Usage.CacheReadInputTokens != 300 || acc.Usage.OutputTokens != 40 {
			t.Fatalf("streamed usage %+v; want 300 cache reads and 40 output", acc.Usage)
		}
		settled(t, ev, 2, total(acc.Usage), "stream")
	})
}

// geminiUsage is the part of a Gemini answer the test reads.
type geminiUsage struct {
	UsageMetadata struct {
		TotalTokenCount int64 `json:"totalTokenCount"`
	} `json:"usageMetadata"`
}

// Gemini over plain net/http: generateContent's usageMetadata, and the
// last usage of an SSE stream, are settled exactly.
func TestGeminiSettlesUsage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, wide, fakeprovider.Config{Style: fakeprovider.Gemini})
		p, ev := r.pacer()
		hc := r.http(p)
		const body = `{"contents":[{"role":"user","parts":[{"text":"Say hello to the fleet"}]}],"generationConfig":{"maxOutputTokens":25}}`
		status, data, err := r.post(hc, "/v1beta/models/gemini-2.0-flash:generateContent", body)
		if err != nil || status != http.StatusOK {
			t.Fatalf("generateContent = %d, %v: %s", status, err, data)
		}
		var g geminiUsage
		if err := json.Unmarshal(data, &g); err != nil {
			t.Fatal(err)
		}
		if got := admittedTokens(t, ev, 1); got <= 25 || got > 60 {
			t.Errorf("reserved %d; want the prompt estimate plus maxOutputTokens 25", got)
		}
		settled(t, ev, 1, g.UsageMetadata.TotalTokenCount, "JSON")

		status, data, err = r.post(hc, "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", body)
		if err != nil || status != http.StatusOK {
			t.Fatalf("streamGenerateContent = %d, %v: %s", status, err, data)
		}
		var last int64
		chunks := 0
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				if err := json.Unmarshal(d, &g); err != nil {
					t.Fatalf("chunk %s: %v", d, err)
				}
				last, chunks = g.UsageMetadata.TotalTokenCount, chunks+1
			}
		}
		if chunks < 2 {
			t.Fatalf("the stream held %d chunks; want several", chunks)
		}
		settled(t, ev, 2, last, "SSE")
	})
}

// An unknown model name still gets an estimate (not the default
// reservation), and settles exactly.
func TestUnknownModelSettles(t *testing.T) {
	b := redistest.Mini(t)
	r := newRig(t, b, wide, fakeprovider.Config{})
	p, ev := r.pacer()
	c := r.openai(p)
	params := chatParams(30)
	params.Model = "acme-unreleased-model-" + strconv.Itoa(7)
	reply, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatalf("chat = %v", err)
	}
	if got := admittedTokens(t, ev, 1); got == pacerhttp.DefaultTokens || got <= 30 || got > 80 {
		t.Errorf("reserved %d; want an estimate of the prompt plus 30", got)
	}
	settled(t, ev, 1, reply.Usage.TotalTokens, "unknown model")
	ev.balanced(t)
}
