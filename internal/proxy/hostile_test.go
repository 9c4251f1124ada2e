package proxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestHostilePaths checks that a path with a ".." segment, plain or
// percent-encoded, is refused 400 and never reaches the provider, while
// its neighbours pass.
func TestHostilePaths(t *testing.T) {
	b := redistest.Mini(t)
	prov, up := upstream(t, fakeprovider.Config{})
	r := startProxy(t, b, redistest.Name(t), up.URL)
	for _, path := range []string{
		"/openai/../x",
		"/openai/v1/../../admin",
		"/openai/%2e%2e/x",
		"/openai/v1/%2E%2E/%2e%2e/chat/completions",
		"/openai/v1/..%2fx",
		"/openai/v1/.%2e/models",
		"/openai/v1/%252e%252e/models",
		"/anthropic/..%5cv1/messages",
		"/anthropic/v1/%2e%2e",
	} {
		for _, method := range []string{"GET", "POST"} {
			status, h, body := send(t, r, method, path, `{"model":"gpt-4o-mini"}`, "Authorization", "Bearer "+secret)
			if status != http.StatusBadRequest || h.Get("X-Llmpacer-Refused") == "" || !strings.Contains(body, `the path has a \"..\" segment`) {
				t.Errorf("%s %s = %d %s, want the proxy's 400 naming the .. segment", method, path, status, body)
			}
		}
	}
	if st := prov.Stats(); st.Calls != 0 {
		t.Errorf("the provider saw %d calls, want 0", st.Calls)
	}
	// Dots that are no segment of their own pass.
	if status, _, body := send(t, r, "GET", "/openai/v1/models?x=..", "", "Authorization", "Bearer "+secret); status != http.StatusOK {
		t.Errorf("GET /openai/v1/models?x=.. = %d %s, want 200", status, body)
	}
}

// TestBodies checks that a model call's body over the limit is answered
// 413 and a malformed one 400, each in the provider's shape with a message
// that says what to do, and neither reaches the provider.
func TestBodies(t *testing.T) {
	b := redistest.Mini(t)
	prov, up := upstream(t, fakeprovider.Config{})
	r := startProxy(t, b, redistest.Name(t), up.URL, func(c *proxy.Config) { c.MaxBody = 1024 })
	huge := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"huge openai", "/openai/v1/chat/completions", huge, 413, "-max-body"},
		{"huge anthropic", "/anthropic/v1/messages", huge, 413, "request_too_large"},
		{"not json", "/openai/v1/chat/completions", `{"model": "gpt-4o-`, 400, "not a JSON object"},
		{"an array", "/anthropic/v1/messages", `[1,2]`, 400, "not a JSON object"},
		{"no model", "/openai/v1/chat/completions", `{"messages":[]}`, 400, `no \"model\"`},
		{"model not a string", "/openai/v1/chat/completions", `{"model":7}`, 400, "not a JSON object"},
		{"model with braces", "/openai/v1/chat/completions", `{"model":"a{b}"}`, 400, "cannot name a budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := send(t, r, "POST", tc.path, tc.body, "Authorization", "Bearer "+secret, "Content-Type", "application/json")
			if status != tc.status || h.Get("Content-Type") != "application/json" || !strings.Contains(body, tc.want) {
				t.Errorf("= %d %s, want %d with %q", status, body, tc.status, tc.want)
			}
		})
	}
	if st := prov.Stats(); st.Calls != 0 {
		t.Errorf("the provider saw %d calls, want 0", st.Calls)
	}
}

// TestKeyNeverLeaks makes answered, refused and failed calls with a key
// and checks that it shows in no log line, no metric and no Redis key.
func TestKeyNeverLeaks(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		prefix := redistest.Name(t)
		prov, up := upstream(t, fakeprovider.Config{RequestLimit: 2, TokenLimit: 100_000})
		r := startProxy(t, b, prefix, up.URL, maxWait(20*time.Millisecond))
		for range 3 { // the third is refused by the budget
			_ = chat(r)
		}
		send(t, r, "POST", "/anthropic/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", secret)
		send(t, r, "GET", "/openai/v1/models", "", "Authorization", "Bearer "+secret)
		prov.StopQuota()
		_ = chat(r)
		_, _, metrics := send(t, r, "GET", "/metrics", "")
		if !strings.Contains(metrics, proxy.KeyDigest(secret)) {
			t.Errorf("/metrics names no budget by the key's digest:\n%s", metrics)
		}
		keys := redisKeys(t, b, prefix)
		if len(keys) == 0 {
			t.Fatal("no Redis keys under the prefix")
		}
		for where, text := range map[string]string{"the log": r.log.String(), "/metrics": metrics, "Redis key names": strings.Join(keys, "\n")} {
			for _, part := range []string{secret, secret[8:24]} {
				if strings.Contains(text, part) {
					t.Errorf("%s holds the key (%q)", where, part)
				}
			}
		}
	})
}

// redisKeys lists the keys under prefix, on every master of a cluster.
func redisKeys(t *testing.T, b redistest.Backend, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	var mu sync.Mutex // ForEachMaster scans the masters at once
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := b.Client(t).(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestHealthAndReadiness checks that /healthz answers while the process
// serves and /readyz only while Redis answers.
func TestHealthAndReadiness(t *testing.T) {
	m := miniredis.RunT(t)
	b := redistest.Backend{Kind: "miniredis", Mini: m, Addrs: []string{m.Addr()}}
	redistest.QuietRedisLog(t)
	_, up := upstream(t, fakeprovider.Config{})
	// No retries: go-redis would retry the dead server for seconds.
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	r := startProxy(t, b, redistest.Name(t), up.URL, func(c *proxy.Config) { c.Redis = rdb })
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		if status, _, _ := send(t, r, "GET", path, ""); status != want {
			t.Errorf("GET %s = %d, want %d", path, status, want)
		}
	}
	m.Close()
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503} {
		if status, _, _ := send(t, r, "GET", path, ""); status != want {
			t.Errorf("with Redis down, GET %s = %d, want %d", path, status, want)
		}
	}
	// A model call then gets a 429 in the provider's shape, never sent.
	status, h, body := send(t, r, "POST", "/openai/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, "Authorization", "Bearer "+secret)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(body, "rate_limit_exceeded") {
		t.Errorf("a model call with Redis down = %d %s, want 429 with Retry-After", status, body)
	}
}

// TestShutdownLetsStreamsFinish starts a streamed call, shuts the proxy
// down while the provider is still answering, and checks the stream
// arrives whole while new connections are refused.
func TestShutdownLetsStreamsFinish(t *testing.T) {
	b := redistest.Mini(t)
	prov, up := upstream(t, fakeprovider.Config{Latency: 300 * time.Millisecond})
	px, err := proxy.New(proxy.Config{Redis: b.Client(t), OpenAI: up.URL, KeyPrefix: redistest.Name(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- px.Serve(ctx, ln, 5*time.Second) }()

	base := "http://" + ln.Addr().String()
	got := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/openai/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		got <- string(body)
	}()
	for prov.Stats().Calls == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if body := <-got; !strings.Contains(body, "data: [DONE]") {
		t.Errorf("the stream in flight at shutdown = %q, want it whole, to data: [DONE]", body)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v, want nil after a graceful shutdown", err)
	}
	if resp, err := http.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("after shutdown GET /healthz = %d, want the connection refused", resp.StatusCode)
	}
}
