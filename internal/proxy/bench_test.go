package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
)

// BenchmarkCall measures one non-streamed chat call through the proxy
// (on miniredis, and on the real Redis when LLMPACER_REDIS_ADDR names one)
// beside a bare httputil.ReverseProxy to the same
// simulated provider, in the same run:
//
//	go test -run '^$' -bench BenchmarkCall -benchtime 2000x ./internal/proxy/
func BenchmarkCall(b *testing.B) {
	prov, err := fakeprovider.New(fakeprovider.Config{RequestLimit: 10_000_000, TokenLimit: 100_000_000})
	if err != nil {
		b.Fatal(err)
	}
	up := httptest.NewServer(prov)
	defer up.Close()
	target, _ := url.Parse(up.URL)
	bare := httptest.NewServer(http.StripPrefix("/openai", httputil.NewSingleHostReverseProxy(target)))
	defer bare.Close()
	backends := []redistest.Backend{redistest.Mini(b)}
	if os.Getenv("LLMPACER_REDIS_ADDR") != "" {
		backends = append(backends, redistest.Real(b))
	}
	body := `{"model":"gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":"hello"}]}`
	cases := []struct{ name, base string }{{"bare", bare.URL}}
	for _, be := range backends {
		cases = append(cases, struct{ name, base string }{"proxy-" + be.Kind, startProxy(b, be, redistest.Name(b), up.URL).srv.URL})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("POST", c.base+"/openai/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+secret)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
