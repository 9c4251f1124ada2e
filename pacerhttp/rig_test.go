package pacerhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// events records what a Pacer's Observe sees.
type events struct {
	mu sync.Mutex
	ev []pacer.Event
}

func (e *events) observe(ev pacer.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
}

// of returns the events of kind k so far.
func (e *events) of(k pacer.EventKind) []pacer.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []pacer.Event
	for _, ev := range e.ev {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// ended waits up to 5 s for n leases to have ended, and returns their
// events: a lease ends as the SDK reads or closes the answer, or in the
// background when Redis failed.
func (e *events) ended(t *testing.T, n int) []pacer.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := e.of(pacer.Ended)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d leases ended within 5 s; want %d", len(got), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// balanced waits up to 5 s for every admitted lease to have ended, and
// fails the test if more leases ended than were admitted. It returns the
// number of leases.
func (e *events) balanced(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		admitted, ended := len(e.of(pacer.Admitted)), len(e.of(pacer.Ended))
		if ended > admitted {
			t.Fatalf("%d leases ended, %d admitted: a lease ended twice", ended, admitted)
		}
		if ended == admitted {
			return admitted
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d admitted leases ended within 5 s", ended, admitted)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// arrival is one request as the server received it.
type arrival struct {
	at   time.Time
	path string
	body []byte
}

// recorder records every request before its handler serves it.
type recorder struct {
	h  http.Handler
	mu sync.Mutex
	in []arrival
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	rec.mu.Lock()
	rec.in = append(rec.in, arrival{at: at, path: req.URL.Path, body: body})
	rec.mu.Unlock()
	rec.h.ServeHTTP(w, req)
}

// arrivals returns the requests received so far.
func (rec *recorder) arrivals() []arrival {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]arrival(nil), rec.in...)
}

// rig is one budget, a simulated provider and the Pacers that share them.
type rig struct {
	t        *testing.T
	b        redistest.Backend
	cfg      pacer.Config
	provider *fakeprovider.Provider
	rec      *recorder
	server   *httptest.Server
}

func newRig(t *testing.T, b redistest.Backend, limits pacer.Limits, pcfg fakeprovider.Config) *rig {
	t.Helper()
	prov, err := fakeprovider.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	return newRigServing(t, b, limits, prov)
}

// newRigServing is newRig with any handler in the provider's place; the
// rig's provider is then whatever h is, or nil.
func newRigServing(t *testing.T, b redistest.Backend, limits pacer.Limits, h http.Handler) *rig {
	t.Helper()
	rec := &recorder{h: h}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	prov, _ := h.(*fakeprovider.Provider)
	return &rig{t: t, b: b, cfg: pacer.Config{Name: redistest.Name(t), Limits: limits}, provider: prov, rec: rec, server: srv}
}

// pacer returns a new Pacer of the rig's budget (a process of the fleet)
// and what it observes.
func (r *rig) pacer() (*pacer.Pacer, *events) {
	r.t.Helper()
	ev := &events{}
	cfg := r.cfg
	cfg.Observe = ev.observe
	p, err := pacer.New(r.b.Client(r.t), cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return p, ev
}

// http returns a plain HTTP client paced by p.
func (r *rig) http(p *pacer.Pacer, opts ...pacerhttp.Option) *http.Client {
	return &http.Client{Transport: pacerhttp.NewTransport(p, nil, opts...)}
}

// openai returns an openai-go client of the rig's server paced by p, with
// the SDK's default retries.
func (r *rig) openai(p *pacer.Pacer, opts ...pacerhttp.Option) openai.Client {
	return r.openaiAt(p, "/v1/", nil, opts...)
}

// openaiAt is openai with a base path (an Azure deployment's, say) and
// request options of its own.
func (r *rig) openaiAt(p *pacer.Pacer, base string, ropts []ooption.RequestOption, opts ...pacerhttp.Option) openai.Client {
	return openai.NewClient(append([]ooption.RequestOption{
		ooption.WithBaseURL(r.server.URL + base), ooption.WithAPIKey("sk-test"),
		ooption.WithHTTPClient(r.http(p, opts...)),
	}, ropts...)...)
}

// anthropic returns an anthropic-sdk-go client of the rig's server paced
// by p, with the SDK's default retries.
func (r *rig) anthropic(p *pacer.Pacer, opts ...pacerhttp.Option) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithBaseURL(r.server.URL), aoption.WithAPIKey("sk-ant-test"),
		aoption.WithHTTPClient(r.http(p, opts...)),
	)
}

// post sends body to path on the rig's server with hc and returns the
// status and the whole answer.
func (r *rig) post(hc *http.Client, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, r.server.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// waitFor polls cond every 5 ms for up to 5 s, and fails the test with
// what if it never holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// transportGoroutines counts the goroutines running code of package
// pacerhttp (background lease ends, header syncs) and the keep-alive loops
// of its leases (Lease.KeepAlive's, in package concurrency).
func transportGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if (bytes.Contains(g, []byte("llmpacer/pacerhttp.")) || bytes.Contains(g, []byte("llmpacer/concurrency.KeepAlive"))) && !bytes.Contains(g, []byte("pacerhttp_test.")) {
			count++
		}
	}
	return count
}
