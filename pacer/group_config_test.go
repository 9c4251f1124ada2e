package pacer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// Config gives back what NewGroup was given, as a copy; a group made from
// a part of it routes among those deployments in the group's order and by
// its path, and leaves the group as it was.
func TestGroupConfig(t *testing.T) {
	t.Parallel()
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		ctx := context.Background()
		ps := deployments(t, b.Client(t), redistest.Name(t),
			pacer.Config{Limits: pacer.Limits{RPD: 10}}, pacer.Config{Limits: pacer.Limits{RPD: 10}}, pacer.Config{Limits: pacer.Limits{RPD: 10}})
		g := newGroup(t, pacer.FillInOrder, split, ps...)
		cfg := g.Config()
		if len(cfg.Deployments) != 3 || cfg.Deployments[1].Pacer != ps[1] || cfg.Policy != pacer.FillInOrder || cfg.Cooldown != 5*time.Second {
			t.Fatalf("Config() = %+v; want the 3 deployments in order, FillInOrder, the default cooldown", cfg)
		}
		cfg.Deployments[0].Pacer = ps[2]
		if g.Config().Deployments[0].Pacer != ps[0] {
			t.Fatal("changing Config's result changed the group")
		}
		for _, c := range []struct {
			except []*pacer.Pacer
			want   *pacer.Pacer
		}{
			{[]*pacer.Pacer{ps[0]}, ps[1]},
			{[]*pacer.Pacer{ps[1]}, ps[0]},
			{[]*pacer.Pacer{ps[0], ps[1]}, ps[2]},
		} {
			cfg := g.Config()
			cfg.Deployments = slices.DeleteFunc(cfg.Deployments, func(d pacer.Deployment) bool { return slices.Contains(c.except, d.Pacer) })
			sub, err := pacer.NewGroup(cfg)
			if err != nil || !pacer.OneTrip(sub) {
				t.Fatalf("NewGroup(the group's Config but %d deployments) = %v; want a group routed in one trip, as its budgets share a HashTag", len(c.except), err)
			}
			if split {
				pacer.SplitGroup(sub)
			}
			l, p, err := sub.TryAcquire(ctx, pacer.Request{Tokens: 1})
			if err != nil || p != c.want {
				t.Fatalf("the part's TryAcquire() = %v, %v; want %s", p.Config().Name, err, c.want.Config().Name)
			}
			_ = l.Settle(ctx, 1)
		}
		if _, p, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1}); err != nil || p != ps[0] {
			t.Errorf("the group after its parts: TryAcquire() = %v, %v; want the first deployment", p, err)
		}
	})
}
