package retry_test

import (
	"net/http"
	"testing"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

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
