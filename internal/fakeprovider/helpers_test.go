package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is the clock seam's test double; time moves only on Advance.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newTestProvider builds a Provider on clk, failing the test on error.
func newTestProvider(t *testing.T, cfg Config, clk *fakeClock) *Provider {
	t.Helper()
	if clk != nil {
		cfg.now = clk.Now
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) error = %v", cfg, err)
	}
	return p
}

// endpoint returns the path the style serves.
func endpoint(style Style) string {
	if style == Anthropic {
		return anthropicPath
	}
	return openAIPath
}

// post sends body to the style's endpoint; hdr is name, value pairs.
func post(p *Provider, style Style, body string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, endpoint(style), strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	return w
}

// chatBody is a minimal valid request of the style.
func chatBody(style Style, maxTokens int64, stream bool) string {
	model := "gpt-4o"
	if style == Anthropic {
		model = "claude-sonnet-4-5"
	}
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello"}],"max_tokens":%d,"stream":%t}`,
		model, maxTokens, stream)
}

// job sends a call that charges exactly maxTokens and uses all of it,
// like the storm's 1,000-token jobs.
func job(p *Provider, style Style, maxTokens int64) *httptest.ResponseRecorder {
	return post(p, style, chatBody(style, maxTokens, false), PromptTokensHeader, "0")
}

// decodeMap decodes a JSON body into generic maps, so tests compare the
// exact wire shape, nulls included.
func decodeMap(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("json.Unmarshal(%s) error = %v", body, err)
	}
	return m
}

// headerInt parses an integer header, failing the test if it is not one.
func headerInt(t *testing.T, h http.Header, name string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(h.Get(name), 10, 64)
	if err != nil {
		t.Fatalf("header %s = %q, not an integer: %v", name, h.Get(name), err)
	}
	return n
}

// openAIUsageMap is a chat completion's usage as decodeMap returns it.
func openAIUsageMap(prompt, completion, cached, reasoning int64) map[string]any {
	return map[string]any{"prompt_tokens": float64(prompt), "completion_tokens": float64(completion),
		"total_tokens":              float64(prompt + completion),
		"prompt_tokens_details":     map[string]any{"cached_tokens": float64(cached)},
		"completion_tokens_details": map[string]any{"reasoning_tokens": float64(reasoning)}}
}
