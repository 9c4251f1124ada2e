package pacerhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
)

// One SDK client serves two deployments. The first answers 429 with
// Retry-After: 2; the transport sends the call on to the second at once,
// before the SDK sees the 429, and the first stays paused for its 2 s.
func ExampleNewGroupTransport() {
	// Stand-ins for two regions of Azure OpenAI.
	var eastCalls atomic.Int64
	east := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		eastCalls.Add(1)
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"code":"429","message":"Rate limit is exceeded. Try again in 2 seconds."}}`)
	}))
	defer east.Close()
	west := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-4o",`+
			`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello from west!"}}],`+
			`"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`)
	}))
	defer west.Close()

	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	eastBudget, _ := pacer.New(rdb, pacer.Config{Name: "gpt-4o-east", HashTag: "gpt-4o", Limits: pacer.Limits{RPM: 100}})
	westBudget, _ := pacer.New(rdb, pacer.Config{Name: "gpt-4o-west", HashTag: "gpt-4o", Limits: pacer.Limits{RPM: 100}})
	g, _ := pacer.NewGroup(pacer.GroupConfig{Deployments: []pacer.Deployment{{Pacer: eastBudget}, {Pacer: westBudget}}})

	// The SDK is configured for east; west's URL and key are the target's.
	rt := pacerhttp.NewGroupTransport(g, map[string]pacerhttp.Target{
		"gpt-4o-west": {URL: west.URL, Header: http.Header{"Api-Key": {"key-west"}}},
	}, nil)
	client := openai.NewClient(ooption.WithHTTPClient(&http.Client{Transport: rt}),
		ooption.WithBaseURL(east.URL), ooption.WithHeader("api-key", "key-east"))
	ctx := context.Background()
	reply, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4o,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	})
	if err != nil {
		fmt.Println("failed:", err)
		return
	}
	s, _ := eastBudget.Snapshot(ctx)
	fmt.Println(reply.Choices[0].Message.Content)
	fmt.Println("requests to east:", eastCalls.Load())
	fmt.Println("east paused:", s.Paused > 0)
	// Output:
	// Hello from west!
	// requests to east: 1
	// east paused: true
}
