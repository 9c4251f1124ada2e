package proxy_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// secret is the provider key the tests' clients send: it must never show
// in a log, a metric or a Redis key.
const secret = "sk-test-Zq8SECRETkeyNeverLogged41"

// logBuf is a log sink safe for the proxy's goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// upstream starts a simulated provider.
func upstream(t *testing.T, cfg fakeprovider.Config) (*fakeprovider.Provider, *httptest.Server) {
	t.Helper()
	p, err := fakeprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

// replica is one proxy, its own Redis client and its log.
type replica struct {
	px  *proxy.Proxy
	srv *httptest.Server
	log *logBuf
}

// startProxy starts a proxy replica on b with its own Redis client, its
// budgets under prefix, both providers sent to up.
func startProxy(t testing.TB, b redistest.Backend, prefix, up string, change ...func(*proxy.Config)) replica {
	t.Helper()
	lb := &logBuf{}
	cfg := proxy.Config{
		Redis: b.Client(t), OpenAI: up, Anthropic: up, KeyPrefix: prefix, MaxWait: 2 * time.Second,
		Log: slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range change {
		f(&cfg)
	}
	px, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(px)
	t.Cleanup(srv.Close)
	return replica{px: px, srv: srv, log: lb}
}

func maxWait(d time.Duration) func(*proxy.Config) { return func(c *proxy.Config) { c.MaxWait = d } }

func openaiClient(r replica) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(r.srv.URL+"/openai/v1/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	return &c
}

func anthropicClient(r replica) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithBaseURL(r.srv.URL+"/anthropic/"), aoption.WithAPIKey(secret), aoption.WithMaxRetries(0))
	return &c
}

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:               openai.ChatModelGPT4oMini,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		MaxCompletionTokens: openai.Int(8),
	}
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 8,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	}
}

// chat makes one chat completion through r.
func chat(r replica) error {
	_, err := openaiClient(r).Chat.Completions.New(context.Background(), chatParams())
	return err
}

// send makes a raw request through r and returns its status, headers and body.
func send(t *testing.T, r replica, method, path, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// open opens the budget of key and model as stored in Redis.
func open(t *testing.T, b redistest.Backend, prefix, provider, model string) *pacer.Pacer {
	t.Helper()
	p, err := pacer.Open(context.Background(), b.Client(t), prefix, proxy.BudgetName(provider, secret, model))
	if err != nil {
		t.Fatalf("pacer.Open(the budget of the key and %s) = %v; want the definition learned from the headers", model, err)
	}
	return p
}

// concurrently runs f n times at once and returns the errors.
func concurrently(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// httptestServer serves h for the test and returns its URL.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
