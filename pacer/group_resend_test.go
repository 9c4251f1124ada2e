package pacer_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A route that go-redis resends, its first reply lost, is admitted once:
// the first run admits the call on the second deployment (the first is
// full), the first frees a slot before the resend, and the resend answers
// with the second's admission (code 2) instead of taking the first's free
// slot. go-redis itself resends the script: the proxy hangs its reply past
// the client's ReadTimeout, and the dial of the retry's new connection
// lets replies through again.
func TestGroupRouteResentByTheRedisClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		if b.Kind == "cluster" {
			t.Skip("the proxy fronts one node; the standalone lanes cover it")
		}
		redistest.QuietRedisLog(t)
		ctx := context.Background()
		rs := newResender(t, b)
		rdb := rs.rdb
		name := redistest.Name(t)
		cfg := pacer.Config{Limits: pacer.Limits{RPM: 1000, Concurrency: 1}}
		ps := deployments(t, rdb, name, cfg, cfg, cfg)
		direct := deployments(t, b.Client(t), name, cfg, cfg, cfg)
		g := newGroup(t, pacer.FillInOrder, false, ps...)
		if !pacer.OneTrip(g) {
			t.Fatal("a group with one HashTag on one server routes in one trip")
		}
		// A first route loads route.lua and the definitions, and its
		// cancel settle.lua, so that the route under test runs at its
		// first EVALSHA rather than failing with NOSCRIPT.
		warm, _, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		// The first deployment is full: another client holds its slot.
		other, err := direct[0].Acquire(ctx, pacer.Request{Tokens: 1})
		if err != nil {
			t.Fatal(err)
		}
		// The route's retry frees the first deployment's slot before the
		// resend runs.
		var freed error
		rs.hang(func() { freed = other.Cancel(ctx) })
		l, p, err := g.Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: time.Second})
		rs.resent(t, "route")
		if freed != nil {
			t.Fatalf("Cancel() of the first deployment's lease = %v", freed)
		}
		if err != nil {
			t.Fatalf("Acquire() resent by go-redis = %v; want the first run's admission", err)
		}
		if p != ps[1] {
			t.Errorf("Acquire() admitted on %q; want %q, where the first run admitted it", p.Config().Name, ps[1].Config().Name)
		}
		var held []string
		for _, d := range direct {
			if err := b.Client(t).ZScore(ctx, pacer.Keys(d)[1], l.Info().ID).Err(); err == nil {
				held = append(held, d.Config().Name)
			} else if err != redis.Nil {
				t.Fatal(err)
			}
		}
		if len(held) != 1 || held[0] != ps[1].Config().Name {
			t.Errorf("lease %s is held on %v; want on %q alone", l.Info().ID, held, ps[1].Config().Name)
		}
		if got := snap(t, direct[0]).InFlight; got != 0 {
			t.Errorf("first deployment's InFlight = %d; want 0: the resend took its freed slot", got)
		}
		if err := l.Fail(ctx, serverError, nil); err != nil {
			t.Errorf("Release() = %v", err)
		}
	})
}

// A route whose first run queued the call for a slot on the deployment
// whose room comes first, resent by go-redis, goes on waiting there: the
// second deployment's slot, freed before the resend, is not taken, and
// the call is admitted on the first when its holder's lease expires, with
// nothing left in either queue. Tried again from scratch, it would be
// admitted on the second while its entry in the first's queue admitted it
// there too.
func TestGroupRouteResentAfterItQueued(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		if b.Kind == "cluster" {
			t.Skip("the proxy fronts one node; the standalone lanes cover it")
		}
		redistest.QuietRedisLog(t)
		ctx := context.Background()
		rs := newResender(t, b)
		rdb := rs.rdb
		name := redistest.Name(t)
		short := pacer.Config{Limits: pacer.Limits{Concurrency: 1}, LeaseTTL: 700 * time.Millisecond}
		long := pacer.Config{Limits: pacer.Limits{Concurrency: 1}}
		ps := deployments(t, rdb, name, short, long)
		direct := deployments(t, b.Client(t), name, short, long)
		g := newGroup(t, pacer.FillInOrder, false, ps...)
		warm, _, err := g.TryAcquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		// Both full; the first's slot frees first (its lease TTL is short),
		// so the route queues the call there.
		if _, err := direct[0].Acquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		}
		other, err := direct[1].Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		var freed error
		rs.hang(func() { freed = other.Cancel(ctx) }) // the second's slot, free for the resend
		l, p, err := g.Acquire(ctx, pacer.Request{MaxWait: 5 * time.Second})
		rs.resent(t, "route")
		if freed != nil {
			t.Fatalf("Cancel() of the second deployment's lease = %v", freed)
		}
		if err != nil {
			t.Fatalf("Acquire() resent by go-redis = %v; want a lease", err)
		}
		defer l.Cancel(ctx)
		if p != ps[0] {
			t.Errorf("Acquire() admitted on %q; want %q, where the first run queued it", p.Config().Name, ps[0].Config().Name)
		}
		for _, d := range direct {
			if n, err := b.Client(t).ZCard(ctx, pacer.Keys(d)[2]).Result(); err != nil || n != 1 {
				t.Errorf("%s's slot queue holds %d members (%v); want only its sentinel", d.Config().Name, n, err)
			}
		}
	})
}
