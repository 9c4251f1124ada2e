package retry_test

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
	"github.com/redis/go-redis/v9"
)

// The helpers of pacer's black-box tests that Run's tests use, written
// again here: a test package cannot import another's.

// newPacers returns n Pacers on one budget, each with its own client: n
// processes as far as Redis can tell.
func newPacers(t *testing.T, b redistest.Backend, n int, cfg pacer.Config) []*pacer.Pacer {
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

func newPacer(t *testing.T, b redistest.Backend, cfg pacer.Config) *pacer.Pacer {
	return newPacers(t, b, 1, cfg)[0]
}

func snap(t *testing.T, p *pacer.Pacer) pacer.Snapshot {
	t.Helper()
	s, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() = %v", err)
	}
	return s
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// refill is what a test knows of how far Redis's clock ran while it worked,
// and so how much its buckets refilled: not at all on miniredis, whose clock
// stopClock stops, and on a real Redis at most the time since stopClock was
// called.
type refill struct {
	start   time.Time
	stopped bool
}

// stopClock stops miniredis's clock (SetTime) for the rest of the test;
// on a real Redis it notes when the test began. Only for tests that never
// wait for Redis's clock to move: on a stopped clock a wait never ends.
func stopClock(b redistest.Backend) refill {
	if b.Mini != nil {
		b.Mini.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		return refill{stopped: true}
	}
	return refill{start: time.Now()}
}

// runningClock is refill for a test that needs Redis's clock to run, on
// miniredis too.
func runningClock() refill { return refill{start: time.Now()} }

// since is at most how long Redis's clock ran since the test began.
func (r refill) since() time.Duration {
	if r.stopped {
		return 0
	}
	return time.Since(r.start)
}

// level checks a bucket's level against what the test left in it, want:
// never below, and above by at most perSecond times since(). levelEps
// absorbs the rounding of charges to whole microseconds.
func (r refill) level(t *testing.T, what string, got, want, perSecond float64) {
	t.Helper()
	hi := want + perSecond*r.since().Seconds()
	if got < want-levelEps || got > hi+levelEps {
		t.Errorf("%s level = %v; want %v (up to %.3f with what refilled since the test began)", what, got, want, hi)
	}
}

const levelEps = 0.01

// tryAcquire is TryAcquire with "no room" as a wait: a lease, or nil and
// the time until room, or an error.
func tryAcquire(p *pacer.Pacer, ctx context.Context, r pacer.Request) (*pacer.Lease, time.Duration, error) {
	l, err := p.TryAcquire(ctx, r)
	if errors.Is(err, pacer.ErrNotYet) {
		return nil, retryAfter(err), nil
	}
	return l, 0, err
}

// retryAfter is pacer.RetryAfter for an error that must carry a wait; one
// that carries none reads as -1, which no test's bound admits.
func retryAfter(err error) time.Duration {
	if d, ok := pacer.RetryAfter(err); ok {
		return d
	}
	return -1
}

// startProvider starts a simulated provider for the test, and a client of
// it.
func startProvider(t *testing.T, cfg fakeprovider.Config) (*fakeprovider.Provider, chatClient) {
	t.Helper()
	fp, err := fakeprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	return fp, chatClient{url: srv.URL, anthropic: cfg.Style == fakeprovider.Anthropic, hc: srv.Client()}
}

// chatClient calls the simulated provider the way an SDK would: errors carry
// the response, so classify reads them.
type chatClient struct {
	url       string
	anthropic bool
	hc        *http.Client
}

type usage struct{ Prompt, Output int64 }

func (u usage) Total() int64 { return u.Prompt + u.Output }

// chat sends one call: prompt tokens and the output tokens the fake
// provider should report, max output tokens as max_tokens.
func (c chatClient) chat(ctx context.Context, prompt, output, maxTokens int64) (usage, error) {
	style := fakeprovider.OpenAI
	if c.anthropic {
		style = fakeprovider.Anthropic
	}
	u, err := fakeprovider.Do(ctx, c.hc, c.url, fakeprovider.Call{Style: style, Prompt: prompt, Output: output, MaxTokens: maxTokens})
	return usage{Prompt: u.PromptTokens, Output: u.OutputTokens}, err
}

// deployments returns one Pacer per Config, each named after the test and
// its index, all with one HashTag: a group's budgets. client gives each
// its Redis client: one client for all routes a call in one script call;
// a client each makes the group ask each deployment in turn.
func deployments(t *testing.T, client func() redis.UniversalClient, name string, cfgs ...pacer.Config) []*pacer.Pacer {
	t.Helper()
	ps := make([]*pacer.Pacer, len(cfgs))
	for i, cfg := range cfgs {
		cfg.Name = name + "-" + string(rune('a'+i))
		cfg.HashTag = name
		p, err := pacer.New(client(), cfg)
		if err != nil {
			t.Fatalf("New(%+v) = %v", cfg, err)
		}
		ps[i] = p
	}
	return ps
}

func newGroup(t *testing.T, policy pacer.Policy, ps ...*pacer.Pacer) *pacer.Group {
	t.Helper()
	var ds []pacer.Deployment
	for _, p := range ps {
		ds = append(ds, pacer.Deployment{Pacer: p})
	}
	g, err := pacer.NewGroup(pacer.GroupConfig{Deployments: ds, Policy: policy})
	if err != nil {
		t.Fatalf("NewGroup() = %v", err)
	}
	return g
}

// eachPath runs f with the clients of a group that routes in one script
// call (one client), and of one that asks each deployment in turn (a
// client each).
func eachPath(t *testing.T, f func(t *testing.T, b redistest.Backend, client func() redis.UniversalClient)) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Run("one-trip", func(t *testing.T) {
			c := b.Client(t)
			f(t, b, func() redis.UniversalClient { return c })
		})
		t.Run("each", func(t *testing.T) {
			f(t, b, func() redis.UniversalClient { return b.Client(t) })
		})
	})
}

// statusErr is an error with an HTTP status, as an SDK's.
type statusErr int

func (e statusErr) Error() string   { return "status " + http.StatusText(int(e)) }
func (e statusErr) StatusCode() int { return int(e) }
