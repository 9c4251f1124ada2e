package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
)

// warmPath is answered by the recorder itself, never by the provider: the
// client opens its connections with it before a run (chatClient.warm).
const warmPath = "/storm/warm"

// startProvider serves a new simulated provider on a loopback httptest
// server, behind a recorder. Every row of a scenario gets its own, so that
// one row's spent budget never leaks into the next.
func startProvider(cfg fakeprovider.Config) (*fakeprovider.Provider, *recorder, *httptest.Server, error) {
	fp, err := fakeprovider.New(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	rec := &recorder{next: fp, start: time.Now()}
	return fp, rec, httptest.NewServer(rec), nil
}

// event is one call as the provider answered it.
type event struct {
	at      time.Duration // arrival, since the run started: when the provider decided
	charge  int64         // prompt + max_tokens
	kind    classify.Kind // OK, RateLimited, QuotaExhausted, ...
	outside bool          // sent by the caller that bypasses the budget
}

// recorder sits in front of the provider and notes when each call arrived
// and how it was answered. The provider's Stats are the ground truth for
// the totals; its timeline has one-second buckets, too coarse for a run
// sped up ten times, so the chart is drawn from these events instead, and a
// test checks that both agree.
type recorder struct {
	next http.Handler

	rateLimited atomic.Int64 // 429s for rate limits so far, for the progress line

	mu     sync.Mutex
	start  time.Time
	events []event
}

// reset starts the recorder's clock and forgets what it saw.
func (r *recorder) reset(start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start, r.events = start, nil
	r.rateLimited.Store(0)
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == warmPath {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	r.mu.Lock()
	at := time.Since(r.start)
	r.mu.Unlock()
	charge, _ := strconv.ParseInt(req.Header.Get(chargeHeader), 10, 64)
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	r.next.ServeHTTP(sw, req)
	kind := classify.OK
	if sw.status != http.StatusOK {
		kind = classify.FromHTTP(sw.status, w.Header(), sw.body.Bytes()).Kind
	}
	if kind == classify.RateLimited {
		r.rateLimited.Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{at: at, charge: charge, kind: kind, outside: req.Header.Get(callerHeader) != ""})
}

// snapshot returns a copy of the events seen so far.
func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// statusWriter remembers the status and, for errors, the start of the
// body, so the recorder can tell a rate limit from an exhausted quota
// (OpenAI answers both with 429).
type statusWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status >= 400 && w.body.Len() < classify.MaxBodyBytes {
		w.body.Write(p[:min(len(p), classify.MaxBodyBytes-w.body.Len())])
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes streaming flushes through; the storm does not stream, but
// the provider checks for it.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// bin is one slice of a run's timeline.
type bin struct {
	Tokens      int64 `json:"tokens"`       // charges admitted
	Outside     int64 `json:"outside"`      // of which by the outside caller
	RateLimited int64 `json:"rate_limited"` // 429s for rate limits
}

// timeline sorts events into bins of width w, covering [0, until).
func timeline(events []event, w, until time.Duration) []bin {
	n := int((until + w - 1) / w)
	bins := make([]bin, max(n, 1))
	for _, e := range events {
		i := int(e.at / w)
		if i < 0 || i >= len(bins) {
			continue
		}
		switch e.kind {
		case classify.OK:
			bins[i].Tokens += e.charge
			if e.outside {
				bins[i].Outside += e.charge
			}
		case classify.RateLimited:
			bins[i].RateLimited++
		}
	}
	return bins
}
