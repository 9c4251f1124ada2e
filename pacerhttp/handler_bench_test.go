package pacerhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// BenchmarkHandler is one request through NewHandler, served by a handler
// that writes nothing, on an in-process miniredis: admitted (TryAcquire,
// then Release), refused with RateLimit headers (TryAcquire, then one
// snapshot), and refused to a fallback (TryAcquire alone); beside the
// pacer's own TryAcquire and Release, and the bare handler. Requests are
// served through httptest.NewRecorder, so no network is timed.
//
//	go test -run '^$' -bench Handler -benchtime 1s -count 5 ./pacerhttp
func BenchmarkHandler(b *testing.B) {
	nothing := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	serve := func(b *testing.B, h http.Handler, want int) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat", nil))
		if w.Code != want {
			b.Fatalf("status %d; want %d", w.Code, want)
		}
	}
	noTenant := pacerhttp.WithTenantFunc(func(*http.Request) (string, error) { return "", nil })
	// spent returns a budget with no room left for a minute.
	spent := func(b *testing.B) (*pacer.Pacer, *scriptCount) {
		mr := redistest.Mini(b)
		rdb := mr.Client(b)
		sc := &scriptCount{}
		rdb.AddHook(sc)
		p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(b), Limits: pacer.Limits{RPM: 1}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.TryAcquire(context.Background(), pacer.Request{}); err != nil {
			b.Fatal(err)
		}
		return p, sc
	}
	b.Run("bare", func(b *testing.B) {
		measure(b, nil, func() { serve(b, nothing, http.StatusOK) })
	})
	b.Run("pacer-only", func(b *testing.B) {
		p, sc := benchPacer(b)
		ctx := context.Background()
		measure(b, sc, func() {
			l, err := p.TryAcquire(ctx, pacer.Request{})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Fail(ctx, classify.Verdict{}, nil); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("admitted", func(b *testing.B) {
		p, sc := benchPacer(b)
		h := pacerhttp.NewHandler(nothing, p, noTenant)
		serve(b, h, http.StatusOK) // load the scripts first
		measure(b, sc, func() { serve(b, h, http.StatusOK) })
	})
	b.Run("refused-429", func(b *testing.B) {
		p, sc := spent(b)
		h := pacerhttp.NewHandler(nothing, p, noTenant)
		measure(b, sc, func() { serve(b, h, http.StatusTooManyRequests) })
	})
	b.Run("refused-fallback", func(b *testing.B) {
		p, sc := spent(b)
		h := pacerhttp.NewHandler(nothing, p, noTenant,
			pacerhttp.WithFallback(func(w http.ResponseWriter, _ *http.Request, _ pacerhttp.Refusal) { w.WriteHeader(http.StatusAccepted) }))
		measure(b, sc, func() { serve(b, h, http.StatusAccepted) })
	})
}
