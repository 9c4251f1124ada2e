package pacerhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// fuzzPaths are the paced paths a fuzzed request goes to.
var fuzzPaths = []string{
	"/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings", "/v1/messages",
	"/openai/deployments/d/chat/completions?api-version=1",
	"/v1beta/models/gemini-2.0-flash:generateContent", "/v1beta/models/g:streamGenerateContent?alt=sse",
}

// fuzzStatuses are the statuses a fuzzed answer comes with; 1xx, 204 and
// 304 carry no body, so they are left out.
var fuzzStatuses = []int{200, 200, 200, 201, 400, 401, 403, 404, 408, 409, 413, 429, 500, 502, 503, 529}

// fuzzAnswer is what the fuzz server answers next.
type fuzzAnswer struct {
	mu     sync.Mutex
	status int
	ctype  string
	header string // a value for the rate-limit and retry headers
	body   []byte
}

func (a *fuzzAnswer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	a.mu.Lock()
	status, ctype, header, body := a.status, a.ctype, a.header, a.body
	a.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", ctype)
	if header != "" {
		for _, k := range []string{"retry-after", "retry-after-ms", "x-ratelimit-remaining-tokens",
			"x-ratelimit-remaining-requests", "x-ratelimit-reset-tokens", "anthropic-ratelimit-tokens-remaining"} {
			h.Set(k, header)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// headerValue keeps the bytes of s a header value may hold.
func headerValue(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b = append(b, c)
		}
	}
	return string(bytes.TrimSpace(b))
}

// FuzzTransport sends random bodies through the transport to a server
// answering random bytes with a random status. Whatever they hold, the
// transport does not panic, the caller gets the answer's bytes unchanged,
// and every lease admitted ends exactly once, within 5 s.
func FuzzTransport(f *testing.F) {
	f.Add([]byte(`{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`), uint8(0), uint8(0),
		[]byte(`{"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`), "", false)
	f.Add([]byte(`{"model":"gpt-4o-mini","stream":true,"messages":[]}`), uint8(0), uint8(0),
		[]byte("data: {\"choices\":[],\"usage\":{\"total_tokens\":9}}\n\ndata: [DONE]\n\n"), "", true)
	f.Add([]byte(`{"model":"claude","max_tokens":5,"stream":true,"messages":[]}`), uint8(4), uint8(0),
		[]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"+
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n"), "", true)
	f.Add([]byte(`{"contents":[]}`), uint8(7), uint8(0),
		[]byte("data: {\"usageMetadata\":{\"promptTokenCount\":2}}\n\n"), "", true)
	f.Add([]byte(`{not json`), uint8(1), uint8(11),
		[]byte(`{"error":{"type":"requests","code":"rate_limit_exceeded","message":"slow down"}}`), "1.5", false)
	f.Add([]byte(`{"model":"x"}`), uint8(2), uint8(11),
		[]byte(`{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`), "", false)
	f.Add([]byte(`{"input":"abc"}`), uint8(3), uint8(12), []byte("<html>bad gateway"), "7m3s", false)
	f.Add([]byte{}, uint8(5), uint8(15), []byte{0xff, 0x00, '{'}, "-1", true)

	b := redistest.Mini(f)
	rdb := b.Client(f)
	answer := &fuzzAnswer{}
	srv := httptest.NewServer(answer)
	f.Cleanup(srv.Close)
	var n atomic.Int64

	f.Fuzz(func(t *testing.T, body []byte, path, status uint8, ans []byte, header string, stream bool) {
		ev := &events{}
		// A budget of its own: a pause or stop from one input must not
		// hold up the next.
		p, err := pacer.New(rdb, pacer.Config{Name: "fuzz:" + strconv.FormatInt(n.Add(1), 10),
			Limits: pacer.Limits{RPM: 1_000_000, TPM: 1 << 40}, Observe: ev.observe})
		if err != nil {
			t.Fatal(err)
		}
		ctype := "application/json"
		if stream {
			ctype = "text/event-stream"
		}
		answer.mu.Lock()
		answer.status, answer.ctype, answer.header = fuzzStatuses[int(status)%len(fuzzStatuses)], ctype, headerValue(header)
		answer.body = ans
		answer.mu.Unlock()

		hc := &http.Client{Transport: pacerhttp.NewTransport(p, nil, pacerhttp.WithMaxBody(4096))}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+fuzzPaths[int(path)%len(fuzzPaths)], bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("request = %v", err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, ans) {
			t.Fatalf("the caller read %q, %v; want the server's %q", got, err, ans)
		}
		if a := len(ev.of(pacer.Admitted)); a != 1 {
			t.Fatalf("%d leases admitted; want 1", a)
		}
		ev.balanced(t)
	})
}
