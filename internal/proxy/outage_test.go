package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
)

// TestRedisOutage kills the proxy's redis-server, then makes it hang: a
// model call is then answered 429 with Retry-After in the provider's
// shape, never a 5xx and never sent, so the client's SDK retries it; once
// Redis is back, that retry is served.
func TestRedisOutage(t *testing.T) {
	s := redistest.NewServer(t)
	hang := redistest.NewProxy(t, s.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: hang.Addr()})
	t.Cleanup(func() { rdb.Close() })
	prov, up := upstream(t, fakeprovider.Config{RequestLimit: 100, TokenLimit: 100_000})
	r := startProxy(t, redistest.Backend{Kind: "redis", Addrs: []string{s.Addr}}, redistest.Name(t), up.URL,
		func(c *proxy.Config) { c.Redis = rdb })
	if err := chat(r); err != nil {
		t.Fatal(err)
	}
	refused := func(when string) {
		t.Helper()
		before := prov.Stats().Calls
		err := chat(r)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || !answeredByProxy(err) ||
			apiErr.Response.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: a call = %v; want the proxy's 429 with Retry-After", when, err)
		}
		if v := classify.FromError(err); v.Kind != classify.RateLimited || v.RetryAfter <= 0 {
			t.Errorf("%s: classify.FromError = %+v, want RateLimited with a delay", when, v)
		}
		if got := prov.Stats().Calls; got != before {
			t.Errorf("%s: the provider saw %d calls, want 0", when, got-before)
		}
	}

	s.Kill()
	for range 3 {
		refused("Redis killed")
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503} {
		if status, _, _ := send(t, r, "GET", path, ""); status != want {
			t.Errorf("Redis killed: GET %s = %d, want %d", path, status, want)
		}
	}
	s.Start()
	// The SDK's own retries, told by Retry-After, find Redis back.
	c := openai.NewClient(option.WithBaseURL(r.srv.URL+"/openai/v1/"), option.WithAPIKey(secret), option.WithMaxRetries(10))
	if _, err := c.Chat.Completions.New(context.Background(), chatParams()); err != nil {
		t.Fatalf("Redis back: a call with retries = %v, want it served", err)
	}

	hang.Hang(true)
	refused("Redis hanging")
	hang.Hang(false)
}
