// Package pacertest holds the helpers that the black-box tests of package
// pacer and of the packages built on it (retry) share: Pacers on a test
// backend, snapshots, what a test knows of Redis's clock, and a client of
// the simulated provider. A test package cannot import another's, so
// they live here, once.
package pacertest

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// NewPacers returns n Pacers on one budget, each with its own client: n
// processes as far as Redis can tell. An empty cfg.Name is the test's.
func NewPacers(t *testing.T, b redistest.Backend, n int, cfg pacer.Config) []*pacer.Pacer {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = redistest.Name(t)
	}
	ps := make([]*pacer.Pacer, n)
	for i := range ps {
		p, err := pacer.New(b.Client(t), cfg)
		if err != nil {
			t.Fatalf("New(%+v) = %v", cfg, err)
		}
		ps[i] = p
	}
	return ps
}

// NewPacer is NewPacers for one.
func NewPacer(t *testing.T, b redistest.Backend, cfg pacer.Config) *pacer.Pacer {
	t.Helper()
	return NewPacers(t, b, 1, cfg)[0]
}

// Snap is p's Snapshot, failing the test if it cannot be read.
func Snap(t *testing.T, p *pacer.Pacer) pacer.Snapshot {
	t.Helper()
	s, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() = %v", err)
	}
	return s
}

// Near says whether got is within tol of want.
func Near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// Refill is what a test knows of how far Redis's clock ran while it
// worked, and so how much its buckets refilled: not at all on miniredis,
// whose clock StopClock stops, and on a real Redis at most the time since
// StopClock was called.
type Refill struct {
	start   time.Time
	stopped bool
}

// StopClock stops miniredis's clock (SetTime) for the rest of the test;
// on a real Redis it notes when the test began. Only for tests that never
// wait for Redis's clock to move: on a stopped clock a wait never ends.
func StopClock(b redistest.Backend) Refill {
	if b.Mini != nil {
		b.Mini.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		return Refill{stopped: true}
	}
	return Refill{start: time.Now()}
}

// RunningClock is Refill for a test that needs Redis's clock to run, on
// miniredis too.
func RunningClock() Refill { return Refill{start: time.Now()} }

// Since is at most how long Redis's clock ran since the test began.
func (r Refill) Since() time.Duration {
	if r.stopped {
		return 0
	}
	return Elapsed(r.start)
}

// Elapsed is at most how long Redis's clock ran since start. Redis reads
// the wall clock, which a clock sync may step ahead of the monotonic one
// time.Since reads (a few ms seen under load): the larger of the two.
func Elapsed(start time.Time) time.Duration {
	now := time.Now()
	return max(now.Sub(start), now.Round(0).Sub(start.Round(0)))
}

// Level checks a bucket's level against what the test left in it, want:
// never below, and above by at most perSecond times Since(). LevelEps
// absorbs the rounding of charges to whole microseconds.
func (r Refill) Level(t *testing.T, what string, got, want, perSecond float64) {
	t.Helper()
	hi := want + perSecond*r.Since().Seconds()
	if got < want-LevelEps || got > hi+LevelEps {
		t.Errorf("%s level = %v; want %v (up to %.3f with what refilled since the test began)", what, got, want, hi)
	}
}

// LevelEps is Level's tolerance.
const LevelEps = 0.01

// TryAcquire is p.TryAcquire with "no room" as a wait: a lease, or nil and
// the time until room, or an error.
func TryAcquire(p *pacer.Pacer, ctx context.Context, r pacer.Request) (*pacer.Lease, time.Duration, error) {
	l, err := p.TryAcquire(ctx, r)
	if errors.Is(err, pacer.ErrWaitTimeout) {
		return nil, RetryAfter(err), nil
	}
	return l, 0, err
}

// RetryAfter is pacer.RetryAfter for an error that must carry a wait; one
// that carries none reads as -1, which no test's bound admits.
func RetryAfter(err error) time.Duration {
	if d, ok := pacer.RetryAfter(err); ok {
		return d
	}
	return -1
}

// StartProvider starts a simulated provider for the test, and a client of
// it.
func StartProvider(t *testing.T, cfg fakeprovider.Config) (*fakeprovider.Provider, ChatClient) {
	t.Helper()
	fp, err := fakeprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	return fp, ChatClient{url: srv.URL, anthropic: cfg.Style == fakeprovider.Anthropic, hc: srv.Client()}
}

// ChatClient calls the simulated provider the way an SDK would: errors
// carry the response, so classify reads them.
type ChatClient struct {
	url       string
	anthropic bool
	hc        *http.Client
}

// Usage is what the provider reported a call used.
type Usage struct{ Prompt, Output int64 }

// Total is the prompt and output tokens together.
func (u Usage) Total() int64 { return u.Prompt + u.Output }

// Chat sends one call: prompt tokens and the output tokens the fake
// provider should report, max output tokens as max_tokens.
func (c ChatClient) Chat(ctx context.Context, prompt, output, maxTokens int64) (Usage, error) {
	style := fakeprovider.OpenAI
	if c.anthropic {
		style = fakeprovider.Anthropic
	}
	u, err := fakeprovider.Do(ctx, c.hc, c.url, fakeprovider.Call{Style: style, Prompt: prompt, Output: output, MaxTokens: maxTokens})
	return Usage{Prompt: u.PromptTokens, Output: u.OutputTokens}, err
}
