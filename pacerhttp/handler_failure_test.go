package pacerhttp_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// errorLog collects what WithErrorLog is told.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) option() pacerhttp.HandlerOption {
	return pacerhttp.WithErrorLog(func(_ *http.Request, err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.errs = append(l.errs, err)
	})
}

func (l *errorLog) last() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs[len(l.errs)-1]
}

// Every failure that is not for want of room gets a status that says its
// kind, a body without its details, and the error in the log; the
// protected handler never runs, and nothing stays charged.
func TestHandlerFailures(t *testing.T) {
	ctx := context.Background()
	deny := errors.New("no session")
	cases := []struct {
		name   string
		cfg    pacer.Config
		before func(*pacer.Pacer, redistest.Backend)
		opts   []pacerhttp.HandlerOption
		nilP   bool

		status      int
		body        string
		retryAfter  string
		logIs       error // the logged error matches it; nil: nothing logged
		problemType string
	}{
		{name: "redis down", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}}, opts: []pacerhttp.HandlerOption{budgetOnly},
			before: func(_ *pacer.Pacer, b redistest.Backend) { b.Mini.Close() },
			status: 503, body: "the rate limiter is unavailable", retryAfter: "1", logIs: errAny},
		{name: "tenant in a budget without tenants", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}},
			status: 500, body: "the rate limiter refused its input", logIs: pacer.ErrInvalid},
		{name: "larger than a bucket", cfg: pacer.Config{Limits: pacer.Limits{TPM: 1000}},
			opts:   []pacerhttp.HandlerOption{budgetOnly, pacerhttp.WithCost(func(*http.Request) (pacer.Request, error) { return pacer.Request{Tokens: 5000}, nil })},
			status: 413, body: "larger than the budget can ever admit", logIs: pacer.ErrTooLarge},
		{name: "stopped by an operator", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}}, opts: []pacerhttp.HandlerOption{budgetOnly},
			before: func(p *pacer.Pacer, _ redistest.Backend) { p.Stop(ctx, 30*time.Second) },
			status: 503, retryAfter: "30", problemType: "#temporary-reduced-capacity"},
		{name: "quota stop", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}, QuotaProbe: 20 * time.Second}, opts: []pacerhttp.HandlerOption{budgetOnly},
			before: func(p *pacer.Pacer, _ redistest.Backend) { stopQuota(t, p) },
			status: 503, retryAfter: "20", problemType: "#temporary-reduced-capacity"},
		{name: "paused after the provider's 429", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}}, opts: []pacerhttp.HandlerOption{budgetOnly},
			before: func(p *pacer.Pacer, _ redistest.Backend) { p.Pause(ctx, 8*time.Second) },
			status: 503, retryAfter: "8", problemType: "#temporary-reduced-capacity"},
		{name: "tenant function fails", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}},
			opts:   []pacerhttp.HandlerOption{pacerhttp.WithTenantFunc(func(*http.Request) (string, error) { return "", deny })},
			status: 403, body: "names no tenant", logIs: deny},
		{name: "cost function fails", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}},
			opts:   []pacerhttp.HandlerOption{budgetOnly, pacerhttp.WithCost(tokensHeader)},
			status: 400, body: "cannot be priced", logIs: errAny},
		{name: "negative latency budget", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}},
			opts:   []pacerhttp.HandlerOption{budgetOnly, pacerhttp.WithWaitingRoom(-time.Second)},
			status: 500, body: "misconfigured", logIs: pacer.ErrInvalid},
		{name: "nil tenant function", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}},
			opts:   []pacerhttp.HandlerOption{pacerhttp.WithTenantFunc(nil)},
			status: 500, body: "misconfigured", logIs: pacer.ErrInvalid},
		{name: "nil pacer", cfg: pacer.Config{Limits: pacer.Limits{RPM: 10}}, nilP: true,
			status: 500, body: "misconfigured", logIs: pacer.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := redistest.Mini(t)
			newClock(b)
			tc.cfg.Name = redistest.Name(t)
			p, err := pacer.New(b.Client(t), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })
			var el errorLog
			hp := p
			if tc.nilP {
				hp = nil
			}
			srv := httptest.NewServer(authenticate(pacerhttp.NewHandler(h, hp, append(tc.opts, el.option())...)))
			defer srv.Close()
			if tc.before != nil {
				tc.before(p, b)
			}
			resp, body := get(t, ctx, srv.URL, 3, -1)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("answer = %d %q; want %d with %q", resp.StatusCode, body, tc.status, tc.body)
			}
			if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After = %q; want %q", got, tc.retryAfter)
			}
			if tc.problemType != "" && (!strings.Contains(body, tc.problemType) || resp.Header.Get("Content-Type") != "application/problem+json") {
				t.Errorf("body %s (%s); want problem type %s", body, resp.Header.Get("Content-Type"), tc.problemType)
			}
			if rl := resp.Header.Get("RateLimit"); rl != "" {
				t.Errorf("RateLimit = %q; a stopped budget or a failure states no policy", rl)
			}
			switch got := el.last(); {
			case tc.logIs == nil && got != nil:
				t.Errorf("logged %v; want nothing", got)
			case tc.logIs == errAny && got == nil, tc.logIs != nil && tc.logIs != errAny && !errors.Is(got, tc.logIs):
				t.Errorf("logged %v; want %v", got, tc.logIs)
			}
			if got := el.last(); got != nil && strings.Contains(body, got.Error()) {
				t.Errorf("body %q carries the error's details", body)
			}
			if ran {
				t.Error("the protected handler ran")
			}
		})
	}
}

// errAny stands for any error in TestHandlerFailures.
var errAny = errors.New("any error")

// A stopped budget goes to the fallback too, which can tell a stop from a
// limit.
func TestHandlerFallbackOnStop(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	var got pacerhttp.Refusal
	p, srv := inbound(t, b, pacer.Config{Limits: pacer.Limits{RPM: 10}}, ok, budgetOnly,
		pacerhttp.WithFallback(func(w http.ResponseWriter, _ *http.Request, why pacerhttp.Refusal) {
			got = why
			io.WriteString(w, "served by the small model")
		}))
	stopQuota(t, p)
	resp, body := get(t, ctx, srv.URL, 0, -1)
	if resp.StatusCode != 200 || body != "served by the small model" {
		t.Errorf("answer = %d %q; want the fallback's", resp.StatusCode, body)
	}
	if !got.Stopped() || got.Limit != "quota" || !errors.Is(got.Err, pacer.ErrQuotaExhausted) || got.Wait <= 0 || got.Wait > time.Minute {
		t.Errorf("Refusal = %+v; want a quota stop, the probe due within a minute", got)
	}
}

// The lease is held while the handler runs and released after: a handler
// that settles gives the unused reservation back; one that does not keeps
// it charged; one that panics still frees its slot.
func TestHandlerLeaseLifetime(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		newClock(b)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l := pacerhttp.LeaseFrom(r.Context())
			if l == nil {
				http.Error(w, "no lease", 500)
				return
			}
			switch r.URL.Path {
			case "/settle":
				if err := l.Settle(r.Context(), 1000); err != nil {
					http.Error(w, err.Error(), 500)
					return
				}
			case "/panic":
				panic(http.ErrAbortHandler) // net/http's quiet abort
			}
			io.WriteString(w, "ok")
		})
		p, srv := inbound(t, b, pacer.Config{Limits: pacer.Limits{TPM: 100_000, Concurrency: 1}}, h, budgetOnly, pacerhttp.WithCost(tokensHeader))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		level := func() float64 { return snap(t, p).Rate("tpm").Level }

		if resp, body := get(t, ctx, srv.URL+"/settle", 0, 6000); resp.StatusCode != 200 {
			t.Fatalf("/settle = %d %s", resp.StatusCode, body)
		}
		if l := level(); l < 99_000-0.5 || l > 99_000+refillSince(b, 100_000.0/60) {
			t.Errorf("after a settle of 1,000 of 6,000: level %.1f; want 99,000", l)
		}
		if resp, body := get(t, ctx, srv.URL+"/keep", 0, 6000); resp.StatusCode != 200 {
			t.Fatalf("/keep = %d %s", resp.StatusCode, body)
		}
		if l := level(); l < 93_000-0.5 || l > 93_000+2*refillSince(b, 100_000.0/60) {
			t.Errorf("after a release of 6,000: level %.1f; want 93,000", l)
		}
		if snap(t, p).InFlight != 0 {
			t.Error("a slot is still held after the handlers returned")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/panic", nil)
		req.Header.Set("Authorization", "Bearer token-0")
		req.Header.Set("X-Tokens", "10")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("/panic answered %d; want the connection aborted", resp.StatusCode)
		}
		waitFor(t, "the panicking handler's slot back", func() bool { return snap(t, p).InFlight == 0 })
		if resp, body := get(t, ctx, srv.URL+"/keep", 0, 10); resp.StatusCode != 200 {
			t.Errorf("after the panic = %d %s; want the slot free", resp.StatusCode, body)
		}
	})
}

// stopQuota stops p's budget as a call answered insufficient_quota does:
// through its lease's Fail, for an hour, probing every Config.QuotaProbe.
func stopQuota(t *testing.T, p *pacer.Pacer) {
	t.Helper()
	ctx := context.Background()
	l, err := p.TryAcquire(ctx, pacer.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fail(ctx, classify.Verdict{Kind: classify.QuotaExhausted, Status: 429, RetryAfter: time.Hour}, nil); err != nil {
		t.Fatal(err)
	}
}
