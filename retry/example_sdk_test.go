package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/retry"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
)

// Run paces a real openai-go call. The SDK's own retries are off: they
// would retry a 429 inside one lease, where no other process hears of it.
func ExampleRun_openai() {
	// A stand-in for the provider. In production, drop WithBaseURL.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini",`+
			`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello!"}}],`+
			`"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`)
	}))
	defer provider.Close()
	client := openai.NewClient(
		openaioption.WithBaseURL(provider.URL),
		openaioption.WithAPIKey("sk-test"),
		openaioption.WithMaxRetries(0), // Run retries, and pauses every process on a 429
	)

	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: exact output
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	p, _ := pacer.New(rdb, pacer.Config{Name: "openai:gpt-4o-mini", Limits: pacer.Limits{RPM: 500, TPM: 200_000}})

	ctx := context.Background()
	reply, err := retry.Run(ctx, p, pacer.Request{Tokens: 300}, // prompt estimate + max output tokens
		func(ctx context.Context) (*openai.ChatCompletion, error) {
			return client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:    openai.ChatModelGPT4oMini,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
			})
		},
		func(r *openai.ChatCompletion) int64 { return r.Usage.TotalTokens },
		retry.WithRetries(3))
	if err != nil {
		fmt.Println("failed:", err)
		return
	}
	s, _ := p.Snapshot(ctx)
	fmt.Println(reply.Choices[0].Message.Content)
	fmt.Printf("settled %d tokens: TPM %.0f of %d\n", reply.Usage.TotalTokens, s.Rate("tpm").Level, s.Rate("tpm").Capacity)
	// Output:
	// Hello!
	// settled 12 tokens: TPM 199988 of 200000
}

// Run paces a real anthropic-sdk-go call, with the SDK's retries off for
// the same reason.
func ExampleRun_anthropic() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",`+
			`"content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn","stop_sequence":null,`+
			`"usage":{"input_tokens":9,"output_tokens":3}}`)
	}))
	defer provider.Close()
	client := anthropic.NewClient(
		anthropicoption.WithBaseURL(provider.URL),
		anthropicoption.WithAPIKey("sk-ant-test"),
		anthropicoption.WithMaxRetries(0), // Run retries, and pauses every process on a 429
	)

	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	p, _ := pacer.New(rdb, pacer.Config{Name: "anthropic:claude", Limits: pacer.Limits{RPM: 50, TPM: 40_000}})

	ctx := context.Background()
	reply, err := retry.Run(ctx, p, pacer.Request{Tokens: 300},
		func(ctx context.Context) (*anthropic.Message, error) {
			return client.Messages.New(ctx, anthropic.MessageNewParams{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 256,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
			})
		},
		func(m *anthropic.Message) int64 { return m.Usage.InputTokens + m.Usage.OutputTokens },
		retry.WithRetries(3))
	if err != nil {
		fmt.Println("failed:", err)
		return
	}
	s, _ := p.Snapshot(ctx)
	fmt.Println(reply.Content[0].Text)
	fmt.Printf("settled %d tokens: TPM %.0f of %d\n", reply.Usage.InputTokens+reply.Usage.OutputTokens, s.Rate("tpm").Level, s.Rate("tpm").Capacity)
	// Output:
	// Hello!
	// settled 12 tokens: TPM 39988 of 40000
}
