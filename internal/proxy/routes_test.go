package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// seenRequest is what the provider received.
type seenRequest struct {
	path, query string
	header      http.Header
}

// recording serves h and notes each request it receives.
type recording struct {
	mu   sync.Mutex
	seen []seenRequest
	h    http.Handler
}

func (rec *recording) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.seen = append(rec.seen, seenRequest{r.URL.Path, r.URL.RawQuery, r.Header.Clone()})
	rec.mu.Unlock()
	rec.h.ServeHTTP(w, r)
}

func (rec *recording) all() []seenRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seenRequest(nil), rec.seen...)
}

// TestAzureThroughProxy sends openai-go's JSON and streamed chat calls to
// an Azure OpenAI deployment through /azure/, the key as Azure's api-key:
// the provider gets the deployment's path, api-version and key, and the
// budget is the key's and the deployment's, its limits learned from the
// headers.
func TestAzureThroughProxy(t *testing.T) {
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	prov, err := fakeprovider.New(fakeprovider.Config{RequestLimit: 100, TokenLimit: 50_000})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recording{h: prov}
	up := httptestServer(t, rec)
	r := startProxy(t, b, prefix, up, func(c *proxy.Config) { c.Azure = up })
	c := openai.NewClient(option.WithBaseURL(r.srv.URL+"/azure/openai/deployments/my-gpt/"),
		option.WithQuery("api-version", "2024-10-21"), option.WithHeader("api-key", secret),
		option.WithHeaderDel("authorization"), option.WithMaxRetries(0))
	ctx := context.Background()
	if _, err := c.Chat.Completions.New(ctx, chatParams()); err != nil {
		t.Fatalf("chat through /azure/: %v", err)
	}
	s := c.Chat.Completions.NewStreaming(ctx, chatParams())
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" {
		t.Fatalf("stream through /azure/: %v, %+v", err, acc.Choices)
	}
	for _, sr := range rec.all() {
		if sr.path != "/openai/deployments/my-gpt/chat/completions" || sr.query != "api-version=2024-10-21" || sr.header.Get("Api-Key") != secret {
			t.Errorf("the provider got %s?%s with api-key %q; want the deployment's path, api-version and the key", sr.path, sr.query, sr.header.Get("Api-Key"))
		}
	}
	if got := open(t, b, prefix, "azure", "my-gpt").Config().Limits; got != (pacer.Limits{RPM: 100, TPM: 50_000}) {
		t.Errorf("the deployment's budget: stored limits %v, want the headers' rpm=100 tpm=50000", got)
	}
	if strings.Contains(r.log.String(), secret) {
		t.Errorf("the key shows in the log")
	}
}

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hello gemini"}]}],"generationConfig":{"maxOutputTokens":10}}`

// TestGeminiThroughProxy sends Gemini's REST calls through /gemini/, in
// its documented wire format: generateContent with the key as ?key=, and
// streamGenerateContent?alt=sse with x-goog-api-key. The key reaches the
// provider only in its header, never in the URL; the budget is the key's
// and the path's model; a paused budget answers 429 in Gemini's error
// shape with Retry-After, sending nothing.
func TestGeminiThroughProxy(t *testing.T) {
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	prov, err := fakeprovider.New(fakeprovider.Config{Style: fakeprovider.Gemini, RequestLimit: 100, TokenLimit: 50_000})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recording{h: prov}
	up := httptestServer(t, rec)
	r := startProxy(t, b, prefix, up, maxWait(50*time.Millisecond), func(c *proxy.Config) { c.Gemini = up })
	const model = "gemini-2.5-flash"
	status, _, body := send(t, r, "POST", "/gemini/v1beta/models/"+model+":generateContent?key="+secret, geminiBody,
		"Content-Type", "application/json")
	var answer struct {
		Candidates []struct {
			Content struct {
				Parts []struct{ Text string }
			}
		}
		UsageMetadata struct{ TotalTokenCount int64 }
	}
	if err := json.Unmarshal([]byte(body), &answer); status != 200 || err != nil || len(answer.Candidates) != 1 || answer.UsageMetadata.TotalTokenCount == 0 {
		t.Fatalf("generateContent = %d %s, want a candidate and usage", status, body)
	}
	status, h, body := send(t, r, "POST", "/gemini/v1beta/models/"+model+":streamGenerateContent?alt=sse", geminiBody,
		"Content-Type", "application/json", "x-goog-api-key", secret)
	events := 0
	for sc := bufio.NewScanner(strings.NewReader(body)); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: {") {
			events++
		}
	}
	if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") || events == 0 {
		t.Fatalf("streamGenerateContent = %d %s, want server-sent events", status, body)
	}
	seen := rec.all()
	for _, sr := range seen {
		if strings.Contains(sr.query, secret) || sr.header.Get("X-Goog-Api-Key") != secret {
			t.Errorf("the provider got %s?%s with x-goog-api-key %q; want the key in the header only", sr.path, sr.query, sr.header.Get("X-Goog-Api-Key"))
		}
	}
	if len(seen) != 2 || seen[1].query != "alt=sse" {
		t.Errorf("the provider got %d calls, the stream's query %q; want 2, alt=sse kept", len(seen), seen[len(seen)-1].query)
	}

	// Gemini states no limits in headers: the budget is the key's and the
	// model's, and an operator's pause holds it for every replica.
	pc, err := pacer.New(b.Client(t), pacer.Config{Name: proxy.BudgetName("gemini", secret, model), KeyPrefix: prefix, Limits: pacer.Limits{Concurrency: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Pause(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	status, h, body = send(t, r, "POST", "/gemini/v1beta/models/"+model+":generateContent", geminiBody, "x-goog-api-key", secret)
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); status != 429 || err != nil || e.Error.Code != 429 || e.Error.Status != "RESOURCE_EXHAUSTED" || h.Get("Retry-After") == "" {
		t.Errorf("a call on the paused budget = %d %s, want Gemini's 429 RESOURCE_EXHAUSTED with Retry-After", status, body)
	}
	if len(rec.all()) != 2 {
		t.Errorf("the provider got the call the budget held back")
	}
	if strings.Contains(r.log.String(), secret) {
		t.Errorf("the key shows in the log")
	}
}

// TestAzureRouteNeedsItsEndpoint checks that /azure/ without -azure is a
// 404 that says which flag to give.
func TestAzureRouteNeedsItsEndpoint(t *testing.T) {
	_, up := upstream(t, fakeprovider.Config{})
	r := startProxy(t, redistest.Mini(t), redistest.Name(t), up.URL)
	status, _, body := send(t, r, "POST", "/azure/openai/deployments/x/chat/completions", `{}`)
	if status != http.StatusNotFound || !strings.Contains(body, "-azure") {
		t.Errorf("/azure/ without -azure = %d %s, want 404 naming -azure", status, body)
	}
}

// TestGeminiHeldKeyAndNamedLimits names a Gemini model's limits in the
// configuration file, whose key the proxy holds: a client's proxy key is
// replaced by the held key in x-goog-api-key, and the third call in the
// minute meets the file's rpm of 2 in the proxy, not at the provider.
func TestGeminiHeldKeyAndNamedLimits(t *testing.T) {
	f, err := loadFile(t, `{"keys": [{"provider": "gemini", "key_env": "HELD",
		"clients": [{"key_env": "TEAM_A", "tenant": "team-a"}],
		"models": {"gemini-2.5-flash": {"rpm": 2}}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := fakeprovider.New(fakeprovider.Config{Style: fakeprovider.Gemini, RequestLimit: 100, TokenLimit: 50_000})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recording{h: prov}
	up := httptestServer(t, rec)
	r := startProxy(t, redistest.Mini(t), redistest.Name(t), up, maxWait(50*time.Millisecond),
		func(c *proxy.Config) { c.Gemini, c.File = up, f })
	var got []int
	for range 3 {
		status, _, _ := send(t, r, "POST", "/gemini/v1beta/models/gemini-2.5-flash:generateContent?key=pk-team-a", geminiBody)
		got = append(got, status)
	}
	if got[0] != 200 || got[1] != 200 || got[2] != 429 {
		t.Errorf("three calls = %v, want 200 200 429 (the file's rpm of 2)", got)
	}
	seen := rec.all()
	if len(seen) != 2 || seen[0].header.Get("X-Goog-Api-Key") != heldKey || strings.Contains(seen[0].query, "pk-team-a") {
		t.Errorf("the provider got %d calls, the first with x-goog-api-key %q, query %q; want 2, the held key, no proxy key",
			len(seen), seen[0].header.Get("X-Goog-Api-Key"), seen[0].query)
	}
}
