package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/retry"
	"github.com/redis/go-redis/v9"
)

// RunGroup answers a deployment's failure on that deployment and retries
// on another at once: a 502 cools a down for every process, a 429 pauses
// b's budget; the third attempt goes to c. The 429 asks for a minute and
// a backoff would be 10 s or more: waiting for either shows far past any
// stall of a loaded machine.
func TestRunGroupRoutesAroundFailures(t *testing.T) {
	eachPath(t, func(t *testing.T, b redistest.Backend, client func() redis.UniversalClient) {
		stopClock(b)
		ctx := context.Background()
		name := redistest.Name(t)
		cfg := pacer.Config{Limits: pacer.Limits{RPD: 100}}
		ps := deployments(t, client, name, cfg, cfg, cfg)
		g := newGroup(t, pacer.FillInOrder, ps...)
		o := b.Client(t)
		other := deployments(t, func() redis.UniversalClient { return o }, name, cfg, cfg, cfg) // another process
		letter := map[*pacer.Pacer]string{ps[0]: "a", ps[1]: "b", ps[2]: "c"}
		var tried []string
		start := time.Now()
		got, err := retry.RunGroup(ctx, g, pacer.Request{Tokens: 10}, func(ctx context.Context, p *pacer.Pacer) (string, error) {
			d := letter[p]
			tried = append(tried, d)
			switch d {
			case "a":
				return "", statusErr(http.StatusBadGateway)
			case "b":
				return "", statusErr(http.StatusTooManyRequests)
			}
			return "answer from " + d, nil
		}, nil, retry.WithRetries(3), retry.WithBackoff(20*time.Second, 20*time.Second),
			retry.WithClassifier(func(err error) classify.Verdict {
				v := classify.FromError(err)
				if v.Kind == classify.RateLimited {
					v.RetryAfter = time.Minute
				}
				return v
			}))
		if err != nil || got != "answer from c" {
			t.Fatalf("RunGroup() = %q, %v; want the answer from c", got, err)
		}
		if fmt.Sprint(tried) != "[a b c]" {
			t.Errorf("attempts on %v; want [a b c]", tried)
		}
		if took := time.Since(start); took > 8*time.Second {
			t.Errorf("RunGroup took %v; want no backoff between deployments, nor b's pause", took)
		}
		for i, want := range []bool{true, true, false} {
			if paused := snap(t, other[i]).Paused > 0; paused != want {
				t.Errorf("deployment %d paused = %v for another process; want %v", i, paused, want)
			}
		}
	})
}

// A group that never cools down (a negative Cooldown) says so: Cooldown
// refuses with ErrInvalid, and RunGroup backs off and retries, here on
// the same deployment, which nothing paused.
func TestRunGroupBacksOffWithoutCooldown(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	name := redistest.Name(t)
	cfg := pacer.Config{Limits: pacer.Limits{RPD: 100}}
	c := b.Client(t)
	ps := deployments(t, func() redis.UniversalClient { return c }, name, cfg, cfg)
	g, err := pacer.NewGroup(pacer.GroupConfig{Deployments: []pacer.Deployment{{Pacer: ps[0]}, {Pacer: ps[1]}}, Cooldown: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Cooldown(ctx, ps[0], 0); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("Cooldown(d 0) on a group that never cools down = %v; want ErrInvalid", err)
	}
	var tried []string
	letter := map[*pacer.Pacer]string{ps[0]: "a", ps[1]: "b"}
	start := time.Now()
	got, err := retry.RunGroup(ctx, g, pacer.Request{Tokens: 10}, func(ctx context.Context, p *pacer.Pacer) (string, error) {
		tried = append(tried, letter[p])
		if len(tried) == 1 {
			return "", statusErr(http.StatusBadGateway)
		}
		return "answer from " + letter[p], nil
	}, nil, retry.WithRetries(3), retry.WithBackoff(200*time.Millisecond, time.Second))
	if err != nil || got != "answer from a" || fmt.Sprint(tried) != "[a a]" {
		t.Fatalf("RunGroup() = %q, %v after attempts on %v; want the answer from a, at the second attempt", got, err, tried)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("RunGroup took %v; want a backoff of at least 100ms", took)
	}
	if s := snap(t, ps[0]); s.Paused != 0 {
		t.Errorf("deployment a paused for %v; want no cooldown", s.Paused)
	}
}
