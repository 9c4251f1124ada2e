package classify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/llmpacer/llmpacer/classify"
)

func ExampleFromHTTP() {
	h := http.Header{}
	h.Set("Retry-After", "20")
	h.Set("Retry-After-Ms", "19500")
	h.Set("Openai-Organization", "org-abc")
	body := []byte(`{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM)",` +
		`"type":"requests","param":null,"code":"rate_limit_exceeded"}}`)

	v := classify.FromHTTP(429, h, body)
	fmt.Println(v)
	fmt.Println("retry:", v.Retryable())

	// The same status with a billing code must never be retried.
	quota := []byte(`{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`)
	v = classify.FromHTTP(429, h, quota)
	fmt.Println(v.Kind, "retry:", v.Retryable())
	// Output:
	// rate_limited status=429 provider=openai code=rate_limit_exceeded limit=requests retry_after=19.5s
	// retry: true
	// quota_exhausted retry: false
}

func ExampleParseHeaders() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	// OpenAI: Go-style durations.
	h.Set("X-Ratelimit-Limit-Requests", "500")
	h.Set("X-Ratelimit-Remaining-Requests", "499")
	h.Set("X-Ratelimit-Reset-Requests", "120ms")
	// Anthropic: RFC 3339 instants.
	h.Set("Anthropic-Ratelimit-Input-Tokens-Remaining", "0")
	h.Set("Anthropic-Ratelimit-Input-Tokens-Reset", "2025-06-01T12:00:20Z")

	rl := classify.ParseHeaders(h, now)
	fmt.Println("requests:", rl.Requests.Remaining, "of", rl.Requests.Limit, "reset in", rl.Requests.Reset)
	fmt.Println("input tokens exhausted:", rl.InputTokens.Exhausted(), "reset in", rl.InputTokens.Reset)
	fmt.Println("output tokens known:", rl.OutputTokens.HasRemaining)
	// Output:
	// requests: 499 of 500 reset in 120ms
	// input tokens exhausted: true reset in 20s
	// output tokens known: false
}

func ExampleFromError() {
	// The caller gave up: never retried.
	fmt.Println(classify.FromError(fmt.Errorf("summarize: %w", context.Canceled)).Kind)

	// The connection dropped: retry with backoff.
	reset := &url.Error{Op: "Post", URL: "https://api.anthropic.com/v1/messages", Err: io.ErrUnexpectedEOF}
	v := classify.FromError(reset)
	fmt.Println(v.Kind, v.Provider)

	// No error, no failure.
	fmt.Println(classify.FromError(nil).Kind)
	// Output:
	// canceled
	// transient anthropic
	// ok
}
