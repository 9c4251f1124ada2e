package pacerhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
)

// budget returns a Pacer on an in-process miniredis whose clock stands
// still, so that the examples print exact levels. In production, pass your
// Redis client.
func budget(name string, limits pacer.Limits) (*pacer.Pacer, func()) {
	mr, _ := miniredis.Run()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	p, _ := pacer.New(rdb, pacer.Config{Name: name, Limits: limits})
	return p, func() { rdb.Close(); mr.Close() }
}

// Pacing openai-go takes one line: its HTTP client's transport. The SDK's
// retries stay on: each attempt acquires from the shared budget and waits
// out a pause any process set after a 429.
func ExampleNewTransport_openai() {
	// A stand-in for the provider. In production, drop WithBaseURL.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini",`+
			`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello!"}}],`+
			`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	}))
	defer provider.Close()
	p, done := budget("openai:gpt-4o-mini", pacer.Limits{RPM: 500, TPM: 200_000})
	defer done()

	client := openai.NewClient(
		ooption.WithHTTPClient(&http.Client{Transport: pacerhttp.NewTransport(p, nil)}),
		ooption.WithBaseURL(provider.URL), ooption.WithAPIKey("sk-test"),
	)
	ctx := context.Background()
	reply, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:               openai.ChatModelGPT4oMini,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
		MaxCompletionTokens: openai.Int(100),
	})
	if err != nil {
		fmt.Println("failed:", err)
		return
	}
	s, _ := p.Snapshot(ctx)
	fmt.Println(reply.Choices[0].Message.Content)
	fmt.Printf("settled %d tokens: TPM %.0f of %d\n", reply.Usage.TotalTokens, s.Rate("tpm").Level, s.Rate("tpm").Capacity)
	// Output:
	// Hello!
	// settled 15 tokens: TPM 199985 of 200000
}

// anthropic-sdk-go the same way. A streamed answer passes through byte for
// byte as it arrives; the lease settles input + output tokens (cache reads
// and writes included) when the stream ends.
func ExampleNewTransport_anthropic() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":20,"output_tokens":1}}}`+"\n\n"+
			"event: content_block_start\ndata: "+`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n"+
			"event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello!"}}`+"\n\n"+
			"event: content_block_stop\ndata: "+`{"type":"content_block_stop","index":0}`+"\n\n"+
			"event: message_delta\ndata: "+`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}`+"\n\n"+
			"event: message_stop\ndata: "+`{"type":"message_stop"}`+"\n\n")
	}))
	defer provider.Close()
	p, done := budget("anthropic:claude-sonnet-4-5", pacer.Limits{RPM: 50, TPM: 30_000})
	defer done()

	client := anthropic.NewClient(
		aoption.WithHTTPClient(&http.Client{Transport: pacerhttp.NewTransport(p, nil)}),
		aoption.WithBaseURL(provider.URL), aoption.WithAPIKey("sk-ant-test"),
	)
	ctx := context.Background()
	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet4_5,
		MaxTokens: 200,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	})
	var text strings.Builder
	for stream.Next() {
		if d, ok := stream.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			text.WriteString(d.Delta.Text)
		}
	}
	stream.Close()
	s, _ := p.Snapshot(ctx)
	fmt.Println(text.String())
	fmt.Printf("TPM %.0f of %d\n", s.Rate("tpm").Level, s.Rate("tpm").Capacity)
	// Output:
	// Hello!
	// TPM 29976 of 30000
}

// Any client on net/http: a plain POST to a chat endpoint is paced too,
// with the priority its context carries. Other requests pass through.
func ExampleNewTransport_http() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}`)
	}))
	defer provider.Close()
	p, done := budget("openai:gpt-4o-mini", pacer.Limits{TPM: 10_000})
	defer done()
	hc := &http.Client{Transport: pacerhttp.NewTransport(p, nil)}

	ctx := pacerhttp.ContextWithPriority(context.Background(), pacer.Batch)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, provider.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"ping"}]}`))
	resp, err := hc.Do(req)
	if err != nil {
		fmt.Println("failed:", err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s, _ := p.Snapshot(ctx)
	fmt.Println(resp.StatusCode, len(body) > 0)
	fmt.Printf("TPM %.0f of %d\n", s.Rate("tpm").Level, s.Rate("tpm").Capacity)
	// Output:
	// 200 true
	// TPM 9990 of 10000
}
