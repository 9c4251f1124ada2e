package pacer_test

import (
	"context"
	"testing"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// Except routes among the other deployments, in the group's order and by
// its path, and leaves the group as it was; without any left it is nil.
func TestGroupExcept(t *testing.T) {
	t.Parallel()
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		ctx := context.Background()
		ps := deployments(t, b.Client(t), redistest.Name(t),
			pacer.Config{Limits: pacer.Limits{RPD: 10}}, pacer.Config{Limits: pacer.Limits{RPD: 10}}, pacer.Config{Limits: pacer.Limits{RPD: 10}})
		g := newGroup(t, pacer.FillInOrder, split, ps...)
		for _, c := range []struct {
			except []*pacer.Pacer
			want   *pacer.Pacer
		}{
			{[]*pacer.Pacer{ps[0]}, ps[1]},
			{[]*pacer.Pacer{ps[1]}, ps[0]},
			{[]*pacer.Pacer{ps[0], ps[1]}, ps[2]},
		} {
			sub := g.Except(c.except...)
			if sub == nil || len(sub.Deployments()) != 3-len(c.except) || pacer.OneTrip(sub) != pacer.OneTrip(g) {
				t.Fatalf("Except(%d deployments) = %v; want the %d others, routed as the group", len(c.except), sub, 3-len(c.except))
			}
			l, p, err := sub.TryAcquire(ctx, pacer.Request{Tokens: 1})
			if err != nil || p != c.want {
				t.Fatalf("Except(...).TryAcquire() = %v, %v; want %s", p.Config().Name, err, c.want.Config().Name)
			}
			_ = l.Settle(ctx, 1)
		}
		if _, p, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1}); err != nil || p != ps[0] {
			t.Errorf("the group after Except: TryAcquire() = %v, %v; want the first deployment", p, err)
		}
		if sub := g.Except(ps...); sub != nil {
			t.Errorf("Except(every deployment) = %v; want nil", sub)
		}
	})
}
