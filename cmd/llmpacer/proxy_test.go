package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// syncBuf is a buffer the proxy's goroutines write its log to while the
// test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProxyCommand runs `llmpacer proxy` in-process with the Redis from
// the environment, as the other verbs take it, sends an openai-go call
// through it, and stops it as SIGTERM would.
func TestProxyCommand(t *testing.T) {
	b := redistest.Mini(t)
	prov, err := fakeprovider.New(fakeprovider.Config{RequestLimit: 10, TokenLimit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(prov)
	defer up.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stderr syncBuf
	env := envOf(b)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"proxy", "-listen", "127.0.0.1:0", "-openai", up.URL, "-prefix", redistest.Name(t), "-max-wait", "1s"},
			func(k string) string { return env[k] }, io.Discard, &stderr)
	}()
	addr := listening(t, &stderr)
	c := openai.NewClient(option.WithBaseURL("http://"+addr+"/openai/v1"), option.WithAPIKey("sk-cmd-test"), option.WithMaxRetries(0))
	if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}); err != nil {
		t.Fatalf("a call through the proxy: %v", err)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /readyz = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	stop()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit %d after the signal, want 0; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not stop within 10 s of the signal")
	}
	if strings.Contains(stderr.String(), "sk-cmd-test") {
		t.Errorf("the log holds the key:\n%s", stderr.String())
	}
}

// listening waits for the proxy's "listening" log line and returns its
// address.
func listening(t *testing.T, log *syncBuf) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(log.String(), "\n") {
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" {
				return l.Addr
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no listening line within 10 s; stderr:\n%s", log.String())
	return ""
}

func TestProxyUsage(t *testing.T) {
	env := map[string]string{envURL: "redis://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "extra"}, "takes no arguments"},
		{[]string{"proxy", "-max-wait", "0s"}, "-max-wait"},
		{[]string{"proxy", "-max-body", "0"}, "-max-body"},
		{[]string{"proxy", "-openai", "ftp://example.com"}, "-openai"},
		{[]string{"proxy", "-anthropic", "https://u:p@example.com"}, "without query or credentials"},
		{[]string{"proxy", "-redis", "redis://u:secret@127.0.0.1:1"}, "carries credentials"},
		{[]string{"proxy", "-prefix", "a{b"}, "-prefix"},
		{[]string{"proxy", "-nosuchflag"}, "llmpacer proxy -h"},
		{[]string{"-json", "proxy"}, "proxy takes its own flags after it"},
		{[]string{"proxy", "-config", "/nonexistent/proxy.json"}, "-config"},
	} {
		r := runWith(t, env, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("llmpacer %q: exit %d, %q; want exit 2 saying %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if r := runWith(t, env, "proxy", "-h"); r.code != exitOK || !strings.Contains(r.stderr, "-max-wait") {
		t.Errorf("llmpacer proxy -h: exit %d, %q", r.code, r.stderr)
	}
}
