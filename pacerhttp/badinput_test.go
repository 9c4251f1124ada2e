package pacerhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// Bodies the provider refuses, or cannot even read, never panic the
// transport, and every lease they take ends exactly once.
func TestMalformedBodiesEndEveryLeaseOnce(t *testing.T) {
	b := redistest.Mini(t)
	r := newRig(t, b, wide, fakeprovider.Config{})
	p, ev := r.pacer()
	hc := r.http(p)
	bodies := []string{
		"", "{not json", "[]", "null", `"a string"`, "{", `{"model":5}`, `{"messages":"hello"}`,
		`{"model":"gpt-4o","messages":[{"role":"user","content":{"odd":true}}]}`,
		`{"model":"gpt-4o","max_tokens":-5,"messages":[]}`, `{"model":"gpt-4o","n":-1,"max_tokens":9e999}`,
		`{"input":[[1,2],"x",{"y":1}]}`, `{"contents":{"parts":7}}`, `{"stream":"yes"}`,
		strings.Repeat("[", 20_000), "{\"model\":\"\xff\xfe\"}",
	}
	paths := []string{
		"/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings", "/v1/messages",
		"/v1beta/models/gemini-2.0-flash:generateContent", "/v1beta/models/x:streamGenerateContent?alt=sse",
	}
	for _, path := range paths {
		for _, body := range bodies {
			status, _, err := r.post(hc, path, body)
			if err != nil || status == http.StatusOK {
				t.Errorf("POST %s %.40q = %d, %v; want the provider's refusal", path, body, status, err)
			}
		}
	}
	if n := ev.balanced(t); n != len(paths)*len(bodies) {
		t.Errorf("%d leases; want one per request, %d", n, len(paths)*len(bodies))
	}
}

// A body over WithMaxBody passes through unread with the default
// reservation, and reaches the server byte for byte.
func TestHugeBodyPassesThrough(t *testing.T) {
	b := redistest.Mini(t)
	r := newRig(t, b, wide, fakeprovider.Config{})
	p, ev := r.pacer()
	hc := r.http(p, pacerhttp.WithMaxBody(1024), pacerhttp.WithDefaultTokens(5000))
	body := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"` +
		strings.Repeat("all work and no play ", 4000) + `"}]}`
	status, data, err := r.post(hc, "/v1/chat/completions", body)
	if err != nil || status != http.StatusOK {
		t.Fatalf("huge body = %d, %v: %.200s", status, err, data)
	}
	if in := r.rec.arrivals(); len(in) != 1 || !bytes.Equal(in[0].body, []byte(body)) {
		t.Fatalf("the server received %d requests; want the one body, byte for byte", len(in))
	}
	if got := admittedTokens(t, ev, 1); got != 5000 {
		t.Errorf("reserved %d; want WithDefaultTokens' 5000", got)
	}
	if end := ev.ended(t, 1)[0]; end.End != pacer.Settled {
		t.Errorf("lease ended %v; want settled with the answer's usage", end.End)
	}
	ev.balanced(t)
}

// serve answers every request with status, content type and body.
func serve(status int, contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
}

// An answer the transport cannot read usage from reaches the caller
// unchanged, and its lease keeps the whole reservation.
func TestUnreadableAnswersKeepTheReservation(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body, request string
	}{
		{"non-JSON 200", "text/html", "<html><body>gateway says hi</body></html>",
			`{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"truncated JSON", "application/json", `{"usage":{"prompt_tokens":5,"total_tokens":`,
			`{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"garbage SSE", "text/event-stream", "data: {\"usage\":\nevent\x00: \xff\r\r\ndata: [DONE\n\n:::\ndata:{\"usage\":{\"total_tokens\":\"x\"}}\n\n",
			`{"model":"gpt-4o-mini","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigServing(t, redistest.Mini(t), wide, serve(http.StatusOK, tc.contentType, tc.body))
			p, ev := r.pacer()
			status, data, err := r.post(r.http(p), "/v1/chat/completions", tc.request)
			if err != nil || status != http.StatusOK || string(data) != tc.body {
				t.Fatalf("answer %d %q, %v; want 200 and the server's bytes unchanged", status, data, err)
			}
			end := ev.ended(t, 1)[0]
			// A whole 200 answer without usage: settled at its reservation.
			if end.End != pacer.Settled || end.Used != end.Tokens {
				t.Errorf("lease ended %v using %d of %d; want settled at the reservation, kept whole", end.End, end.Used, end.Tokens)
			}
			ev.balanced(t)
		})
	}
}

// A body the caller stops reading and never closes does not hold its
// lease forever: the transport stops renewing it, it expires, and no
// goroutine of the transport is left behind. Closing it at last ends the
// lease, once.
func TestUnclosedBodyLetsTheLeaseExpire(t *testing.T) {
	b := redistest.Mini(t)
	answer := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`
	r := newRigServing(t, b, pacer.Limits{RPM: 1000, Concurrency: 1}, serve(http.StatusOK, "application/json", answer))
	r.cfg.LeaseTTL = 300 * time.Millisecond
	p, ev := r.pacer()
	hc := r.http(p)
	ctx := context.Background()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.server.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the abandoned call still holds its slot", func() bool {
		s, err := p.Snapshot(ctx)
		return err == nil && s.InFlight == 0
	})
	waitFor(t, "a goroutine of the transport is still running", func() bool { return transportGoroutines() == 0 })
	// The slot is free: the next call does not hang.
	status, data, err := r.post(hc, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":10,"messages":[]}`)
	if err != nil || string(data) != answer {
		t.Fatalf("the next call = %d %q, %v", status, data, err)
	}
	resp.Body.Close()
	ends := ev.ended(t, 2)
	var expired int
	for _, e := range ends {
		if e.End == pacer.Expired {
			expired++
		}
	}
	if expired != 1 {
		t.Errorf("ends %+v; want the abandoned lease expired, the other settled", ends)
	}
	ev.balanced(t)
}

// A call whose answer is slow to come keeps its lease alive while it
// waits, however long past the lease TTL: its slot is not given away,
// and it settles its usage. A TTL of 3 s leaves 2 s for renewals late on
// a loaded machine (a 1.5 s TTL lapsed once in a doubled CI load); the
// backends wait side by side.
func TestSlowAnswerKeepsItsLease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel()
		r := newRig(t, b, pacer.Limits{RPM: 1000, Concurrency: 1}, fakeprovider.Config{Latency: 7 * time.Second})
		r.cfg.LeaseTTL = 3 * time.Second
		p, ev := r.pacer()
		c := r.openai(p)
		reply, err := c.Chat.Completions.New(context.Background(), chatParams(10))
		if err != nil {
			t.Fatal(err)
		}
		settled(t, ev, 1, reply.Usage.TotalTokens, "a call answered after more than two lease TTLs")
		ev.balanced(t)
	})
}
