package fakeprovider

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The tests in sdk_*_test.go call the provider through the real SDK
// clients, so that the wire format is checked by the code that will read
// it, not by a copy of its types.

// startServer serves a provider on a fake clock that never moves, so the
// limits and their headers are exact. The server closes when the test
// ends, and with it the client's idle connections.
func startServer(t *testing.T, cfg Config) (*Provider, *httptest.Server) {
	t.Helper()
	p := newTestProvider(t, cfg, newClock())
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

// tokens are the test-only token headers of one call; zero fields are
// not sent.
type tokens struct {
	prompt, output, cacheRead, cacheWrite, reasoning int64
}

// header returns the headers as name, value pairs.
func (tk tokens) header() http.Header {
	h := http.Header{}
	for _, f := range []struct {
		name string
		n    int64
	}{{PromptTokensHeader, tk.prompt}, {OutputTokensHeader, tk.output}, {CacheReadTokensHeader, tk.cacheRead},
		{CacheCreationTokensHeader, tk.cacheWrite}, {ReasoningTokensHeader, tk.reasoning}} {
		if f.n > 0 {
			h.Set(f.name, strconv.FormatInt(f.n, 10))
		}
	}
	return h
}

// openaiOptions are the headers as openai-go request options.
func (tk tokens) openaiOptions() []option.RequestOption {
	var opts []option.RequestOption
	for name, vs := range tk.header() {
		opts = append(opts, option.WithHeader(name, vs[0]))
	}
	return opts
}

// openaiClient is an openai-go client for the server at base (a path
// such as "/v1/" or an Azure deployment's), with no retries.
func openaiClient(srv *httptest.Server, base string, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{option.WithBaseURL(srv.URL + base),
		option.WithAPIKey("test"), option.WithMaxRetries(0), option.WithHTTPClient(srv.Client())}, opts...)...)
	return &c
}

// wantText is the text of an answer of n visible tokens.
func wantText(n int64) string { return strings.Join(answerWords(n), "") }

// endpointStats returns the provider's counters for ep.
func endpointStats(p *Provider, ep Endpoint) EndpointStats { return p.Stats().Endpoints[ep] }
