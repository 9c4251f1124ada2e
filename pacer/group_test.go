package pacer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// deployments returns one Pacer per Config on client c, each named after
// the test and its index, all with one HashTag: a group's budgets.
func deployments(t *testing.T, c redis.UniversalClient, name string, cfgs ...pacer.Config) []*pacer.Pacer {
	t.Helper()
	ps := make([]*pacer.Pacer, len(cfgs))
	for i, cfg := range cfgs {
		cfg.Name = name + "-" + string(rune('a'+i))
		cfg.HashTag = name
		p, err := pacer.New(c, cfg)
		if err != nil {
			t.Fatalf("New(%+v) = %v", cfg, err)
		}
		ps[i] = p
	}
	return ps
}

func newGroup(t *testing.T, policy pacer.Policy, split bool, ps ...*pacer.Pacer) *pacer.Group {
	t.Helper()
	var ds []pacer.Deployment
	for _, p := range ps {
		ds = append(ds, pacer.Deployment{Pacer: p})
	}
	g, err := pacer.NewGroup(pacer.GroupConfig{Deployments: ds, Policy: policy})
	if err != nil {
		t.Fatalf("NewGroup() = %v", err)
	}
	if split {
		pacer.SplitGroup(g)
	}
	return g
}

// eachPath runs f with a group that routes in one script call, and with
// one that asks each deployment in turn.
func eachPath(t *testing.T, f func(t *testing.T, b redistest.Backend, split bool)) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Run("one-trip", func(t *testing.T) { f(t, b, false) })
		t.Run("each", func(t *testing.T) { f(t, b, true) })
	})
}

// FillInOrder fills the first deployment, then the second, then the
// third, and no call waits while one has room; the calls beyond all three
// are refused with the time until the first has room.
func TestGroupFillsInOrder(t *testing.T) {
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		stopClock(b)
		ctx := context.Background()
		ps := deployments(t, b.Client(t), redistest.Name(t),
			pacer.Config{Limits: pacer.Limits{RPD: 5}}, pacer.Config{Limits: pacer.Limits{RPD: 3}}, pacer.Config{Limits: pacer.Limits{RPD: 4}})
		g := newGroup(t, pacer.FillInOrder, split, ps...)
		if !split && !pacer.OneTrip(g) {
			t.Fatalf("a group with one HashTag routes in one trip on %s", b.Kind)
		}
		var got []string
		for i := 0; i < 12; i++ {
			// A full deployment's room comes back in hours: a call that
			// waited for it, not going on to one with room, would get
			// ErrWaitTimeout here at once, however loaded the machine.
			_, p, err := g.Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: time.Second})
			if err != nil {
				t.Fatalf("call %d: Acquire() = %v; want it routed to a deployment with room", i, err)
			}
			got = append(got, p.Config().Name[len(p.Config().Name)-1:])
		}
		want := "[a a a a a b b b c c c c]"
		if s := fmtNames(got); s != want {
			t.Errorf("deployments = %s; want %s", s, want)
		}
		_, _, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1})
		var ny *pacer.RefusedError
		if !errors.Is(err, pacer.ErrWaitTimeout) || !errors.As(err, &ny) || retryAfter(ny) < time.Hour {
			t.Errorf("13th TryAcquire = %v; want ErrWaitTimeout of hours (RPD)", err)
		}
		_, _, err = g.Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: 100 * time.Millisecond})
		if !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Errorf("13th Acquire = %v; want ErrWaitTimeout", err)
		}
		for i, p := range ps {
			if l := snap(t, p).Rate("rpd").Level; l > 0.01 {
				t.Errorf("deployment %d RPD level = %v; want 0", i, l)
			}
		}
	})
}

func fmtNames(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

// 240 goroutines over four Groups (four processes) never admit more on any
// deployment than its own budget: RPD 20, 10 and 5, nothing refilling, and
// a fourth process drawing on the second deployment directly.
func TestGroupNeverOverAdmits(t *testing.T) {
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		stopClock(b)
		name := redistest.Name(t)
		cfgs := []pacer.Config{{Limits: pacer.Limits{RPD: 20}}, {Limits: pacer.Limits{RPD: 10}}, {Limits: pacer.Limits{RPD: 5}}}
		var groups []*pacer.Group
		for i := 0; i < 4; i++ {
			groups = append(groups, newGroup(t, pacer.Spread, split, deployments(t, b.Client(t), name, cfgs...)...))
		}
		outside := deployments(t, b.Client(t), name, cfgs...)[1]
		var mu sync.Mutex
		per := map[string]int{}
		var outsideN atomic.Int64
		var wg sync.WaitGroup
		// 120 calls for 35 admissions: over three times more than fit.
		for i := 0; i < 120; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				if i%8 == 0 {
					if _, err := outside.TryAcquire(ctx, pacer.Request{Tokens: 1}); err == nil {
						outsideN.Add(1)
					}
					return
				}
				_, p, err := groups[i%4].Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: 50 * time.Millisecond})
				switch {
				case err == nil:
					mu.Lock()
					per[p.Config().Name[len(p.Config().Name)-1:]]++
					mu.Unlock()
				case !errors.Is(err, pacer.ErrWaitTimeout):
					t.Errorf("Acquire() = %v", err)
				}
			}()
		}
		wg.Wait()
		if per["a"] != 20 || per["b"]+int(outsideN.Load()) != 10 || per["c"] != 5 {
			t.Errorf("admitted %v and %d outside on b; want a 20, b 10 in all, c 5", per, outsideN.Load())
		}
	})
}

// A deployment paused (a 429), stopped or cooling down in one process is
// passed over by every other: the group's calls go to the next one, at
// once; when all are out, the group waits for the soonest.
func TestGroupSkipsPausedAndStopped(t *testing.T) {
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		stopClock(b)
		ctx := context.Background()
		name := redistest.Name(t)
		cfgs := []pacer.Config{{Limits: pacer.Limits{RPD: 100}}, {Limits: pacer.Limits{RPD: 100}}, {Limits: pacer.Limits{RPD: 100}}}
		other := deployments(t, b.Client(t), name, cfgs...) // another process
		g := newGroup(t, pacer.FillInOrder, split, deployments(t, b.Client(t), name, cfgs...)...)
		where := func() string {
			t.Helper()
			l, p, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1})
			if err != nil {
				return err.Error()
			}
			_ = l.Settle(ctx, 1)
			return p.Config().Name[len(p.Config().Name)-1:]
		}
		if got := where(); got != "a" {
			t.Fatalf("first call on %s; want a", got)
		}
		if err := pacer.Throttle(ctx, other[0], time.Minute, classify.LimitUnknown, pacer.Request{Tokens: 1}); err != nil {
			t.Fatal(err)
		}
		if got := where(); got != "b" {
			t.Errorf("a paused: call on %s; want b", got)
		}
		if err := pacer.StopQuota(ctx, other[1], time.Hour, time.Hour); err != nil {
			t.Fatal(err)
		}
		if got := where(); got != "c" {
			t.Errorf("a paused, b stopped: call on %s; want c", got)
		}
		og := newGroup(t, pacer.FillInOrder, split, other...)
		if err := og.Cooldown(ctx, other[2], 30*time.Second); err != nil {
			t.Fatal(err)
		}
		// All out: the soonest back is c (30 s), before a (a minute); b
		// never. (Long enough that a loaded machine's stalls cannot blur
		// the order or the wait.)
		_, _, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1})
		var ny *pacer.RefusedError
		if !errors.Is(err, pacer.ErrWaitTimeout) || !errors.As(err, &ny) || retryAfter(ny) > 30*time.Second || retryAfter(ny) < 20*time.Second || ny.Limit != "" {
			t.Errorf("all out: TryAcquire() = %v; want NotYet about 30s for a pause", err)
		}
		_, _, err = g.Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: time.Second})
		if !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Errorf("all out, bound 1s: Acquire() = %v; want ErrWaitTimeout", err)
		}
		// Only stopped deployments left: the stop's error.
		stopped := newGroup(t, pacer.FillInOrder, split, other[1])
		if _, _, err := stopped.Acquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Errorf("every deployment stopped: Acquire() = %v; want ErrQuotaExhausted", err)
		}
	})
}

// When no deployment has room, a call reserves its turn on the one whose
// room comes first, and waits only that long.
func TestGroupWaitsOnSoonest(t *testing.T) {
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		runningClock()
		ctx := context.Background()
		ps := deployments(t, b.Client(t), redistest.Name(t),
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 6, Window: time.Minute, Burst: 1}}},   // a request every 10 s
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 150, Window: time.Minute, Burst: 1}}}) // every 400 ms
		g := newGroup(t, pacer.FillInOrder, split, ps...)
		var onB pacer.LeaseInfo
		for _, want := range []string{"a", "b"} {
			l, p, err := g.Acquire(ctx, pacer.Request{Tokens: 1})
			if err != nil || p != ps[want[0]-'a'] {
				t.Fatalf("Acquire() = %v on %v; want deployment %s", err, p, want)
			}
			onB = l.Info()
			_ = l.Settle(ctx, 1)
		}
		start := time.Now()
		l, p, err := g.Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: 5 * time.Second})
		took := time.Since(start)
		if err != nil || p != ps[1] {
			t.Fatalf("third Acquire() = %v on %v; want the 400 ms deployment", err, p)
		}
		_ = l.Settle(ctx, 1)
		// Its turn on b, read on the Redis clock: at least 400 ms after b's
		// first call (a loaded machine may take longer between the two, and
		// then the turn is later still). On a, it would be 10 s.
		if gap := l.Info().Start.Sub(onB.Start); gap < 390*time.Millisecond {
			t.Errorf("third call's turn %v after b's first; want b's 400 ms", gap)
		}
		if took > 4*time.Second {
			t.Errorf("third Acquire took %v; want its turn on b, about 400 ms", took)
		}
	})
}

// Spread offers calls in proportion to the weights while both have room.
func TestGroupSpreadsByWeight(t *testing.T) {
	t.Parallel()
	b := redistest.Mini(t)
	stopClock(b)
	ctx := context.Background()
	ps := deployments(t, b.Client(t), redistest.Name(t), pacer.Config{Limits: pacer.Limits{RPD: 100_000}}, pacer.Config{Limits: pacer.Limits{RPD: 100_000}})
	g, err := pacer.NewGroup(pacer.GroupConfig{Policy: pacer.Spread, Deployments: []pacer.Deployment{{Pacer: ps[0], Weight: 3}, {Pacer: ps[1], Weight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i < 200; i++ {
		_, p, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1})
		if err != nil {
			t.Fatal(err)
		}
		if p == ps[0] {
			n++
		}
	}
	// 150 expected, standard deviation 6.1: 28 is 4.6 of them.
	if n < 122 || n > 178 {
		t.Errorf("weights 3:1 sent %d of 200 calls to the first; want about 150", n)
	}
}

// MostRoom offers each call first to the deployment with the most room
// left, as a fraction: the first deployment, listed first but drained by
// an outside caller to a quarter of its requests, gets no call until the
// second, empty one, is down to about as little; then the two fill
// together, to the last request of each. FillInOrder would have sent the
// first calls to the first.
func TestGroupMostRoom(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		stopClock(b)
		ctx := context.Background()
		c := b.Client(t)
		name := redistest.Name(t)
		ps := deployments(t, c, name, pacer.Config{Limits: pacer.Limits{RPD: 20}}, pacer.Config{Limits: pacer.Limits{RPD: 10}})
		outside := deployments(t, c, name, pacer.Config{Limits: pacer.Limits{RPD: 20}})[0] // the same budget as ps[0]
		for i := 0; i < 15; i++ {
			if _, err := outside.TryAcquire(ctx, pacer.Request{Tokens: 1}); err != nil {
				t.Fatalf("outside call %d: %v", i, err)
			}
		}
		g := newGroup(t, pacer.MostRoom, false, ps...)
		if !pacer.OneTrip(g) {
			t.Fatalf("a group with one HashTag routes in one trip on %s", b.Kind)
		}
		var got []string
		for i := 0; i < 15; i++ {
			_, p, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1})
			if err != nil {
				t.Fatalf("call %d: TryAcquire() = %v; want a lease while a deployment has room", i, err)
			}
			got = append(got, p.Config().Name[len(p.Config().Name)-1:])
		}
		// b has 0.9 of its requests left after the first call, a 0.2 after
		// any: b takes the calls while it has more than a fifth left.
		if s := fmtNames(got[:7]); s != "[b b b b b b b]" {
			t.Errorf("first seven calls on %s; want all on b, the deployment with more room", s)
		}
		n := map[string]int{}
		for _, x := range got {
			n[x]++
		}
		if n["a"] != 5 || n["b"] != 10 {
			t.Errorf("calls per deployment %v; want a 5 (the outside caller took 15 of 20) and b 10", n)
		}
		if _, _, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Errorf("16th TryAcquire = %v; want ErrWaitTimeout: both are full", err)
		}
	})
}

// Concurrency limits hold per deployment under many goroutines and
// several groups: slots are queued for on the deployment chosen.
func TestGroupConcurrency(t *testing.T) {
	t.Parallel()
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		name := redistest.Name(t)
		cfgs := []pacer.Config{{Limits: pacer.Limits{Concurrency: 2}}, {Limits: pacer.Limits{Concurrency: 3}}}
		var groups []*pacer.Group
		for i := 0; i < 3; i++ {
			groups = append(groups, newGroup(t, pacer.FillInOrder, split, deployments(t, b.Client(t), name, cfgs...)...))
		}
		var inA, inB, maxA, maxB atomic.Int64
		var wg sync.WaitGroup
		// 30 callers for 5 slots: six times more than fit.
		for i := 0; i < 30; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				l, p, err := groups[i%3].Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: 20 * time.Second})
				if err != nil {
					t.Errorf("Acquire() = %v", err)
					return
				}
				in, hi := &inA, &maxA
				if p.Config().Name[len(p.Config().Name)-1] == 'b' {
					in, hi = &inB, &maxB
				}
				n := in.Add(1)
				for m := hi.Load(); n > m && !hi.CompareAndSwap(m, n); m = hi.Load() {
				}
				time.Sleep(10 * time.Millisecond)
				in.Add(-1)
				if err := l.Settle(ctx, 1); err != nil {
					t.Errorf("Settle() = %v", err)
				}
			}()
		}
		wg.Wait()
		if maxA.Load() > 2 || maxB.Load() > 3 {
			t.Errorf("in flight at most %d on a, %d on b; limits 2 and 3", maxA.Load(), maxB.Load())
		}
		if maxB.Load() == 0 {
			t.Errorf("b never used while a was full")
		}
	})
}

// A deployment's stored definition and tenants keep working in a group:
// the group follows a newer definition, and a tenant's own limit sends
// its calls to the next deployment.
func TestGroupDefinitionsAndTenants(t *testing.T) {
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		stopClock(b)
		ctx := context.Background()
		name := redistest.Name(t)
		ten := pacer.Tenants{Rates: []pacer.Rate{{Limit: 1, Window: 24 * time.Hour, Unit: pacer.Requests}}}
		cfgs := []pacer.Config{{Limits: pacer.Limits{RPD: 100}, Version: 1, Tenants: ten}, {Limits: pacer.Limits{RPD: 100}, Tenants: ten}}
		g := newGroup(t, pacer.FillInOrder, split, deployments(t, b.Client(t), name, cfgs...)...)
		where := func(tenant string) string {
			t.Helper()
			_, p, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1, Tenant: tenant})
			if err != nil {
				return "refused"
			}
			return p.Config().Name[len(p.Config().Name)-1:]
		}
		for _, want := range []string{"a", "b", "refused"} {
			if got := where("t1"); got != want {
				t.Errorf("tenant t1 (1 a day on each): call on %s; want %s", got, want)
			}
		}
		if got := where("t2"); got != "a" {
			t.Errorf("tenant t2: call on %s; want a", got)
		}
		// Another process stores a definition of a with 2 a day: a is full.
		newer := cfgs[0]
		newer.Limits.RPD, newer.Version = 2, 2
		other := deployments(t, b.Client(t), name, newer, cfgs[1])
		if _, err := other[0].TryAcquire(ctx, pacer.Request{Tokens: 1}); err != nil {
			t.Fatalf("the newer definition's first call = %v", err)
		}
		if got := where("t3"); got != "b" {
			t.Errorf("after a's redefinition: call on %s; want b", got)
		}
		if got := g.Config().Deployments[0].Pacer.Config().Limits.RPD; got != 2 {
			t.Errorf("the group's a runs RPD %d; want the stored 2", got)
		}
	})
}

func TestNewGroupRefuses(t *testing.T) {
	b := redistest.Mini(t)
	c := b.Client(t)
	name := redistest.Name(t)
	ps := deployments(t, c, name, pacer.Config{Limits: pacer.Limits{RPD: 1}})
	shadow := deployments(t, c, name+"-s", pacer.Config{Limits: pacer.Limits{RPD: 1}, Shadow: true})
	for _, tc := range []struct {
		name string
		cfg  pacer.GroupConfig
	}{
		{"empty", pacer.GroupConfig{}},
		{"nil pacer", pacer.GroupConfig{Deployments: []pacer.Deployment{{}}}},
		{"twice", pacer.GroupConfig{Deployments: []pacer.Deployment{{Pacer: ps[0]}, {Pacer: ps[0]}}}},
		{"negative weight", pacer.GroupConfig{Deployments: []pacer.Deployment{{Pacer: ps[0], Weight: -1}}}},
		{"bad policy", pacer.GroupConfig{Deployments: []pacer.Deployment{{Pacer: ps[0]}}, Policy: 7}},
		{"shadow", pacer.GroupConfig{Deployments: []pacer.Deployment{{Pacer: shadow[0]}}}},
	} {
		if _, err := pacer.NewGroup(tc.cfg); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("%s: NewGroup() = %v; want ErrInvalid", tc.name, err)
		}
	}
}

// A group routes in one script call on one server, and on a cluster when
// its budgets share a HashTag; otherwise one call per deployment, and it
// still works (TestGroupFillsInOrder's "each" path).
func TestGroupPlacement(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		c := b.Client(t)
		name := redistest.Name(t)
		var own []*pacer.Pacer
		for _, n := range []string{"-x", "-y"} {
			p, err := pacer.New(c, pacer.Config{Name: name + n, Limits: pacer.Limits{RPD: 1}})
			if err != nil {
				t.Fatal(err)
			}
			own = append(own, p)
		}
		if got, want := pacer.OneTrip(newGroup(t, pacer.FillInOrder, false, own...)), b.Kind != "cluster"; got != want {
			t.Errorf("budgets with their own hash tags: one trip = %v; want %v on %s", got, want, b.Kind)
		}
		if !pacer.OneTrip(newGroup(t, pacer.FillInOrder, false, deployments(t, c, name, pacer.Config{Limits: pacer.Limits{RPD: 1}}, pacer.Config{Limits: pacer.Limits{RPD: 1}})...)) {
			t.Errorf("budgets with one HashTag: not one trip on %s", b.Kind)
		}
	})
}

// takenDeployments returns two deployments of one request every 3 s, each
// request taken by another client, the first's 200 ms earlier: its room
// comes first, so a routed call reserves its turn there, about 2.8 s
// ahead. The Group over them prefers them in order.
func takenDeployments(t *testing.T, b redistest.Backend) ([]*pacer.Pacer, *pacer.Group) {
	t.Helper()
	ctx := context.Background()
	name := redistest.Name(t)
	cfg := pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 20, Window: time.Minute, Burst: 1}}}
	ps := deployments(t, b.Client(t), name, cfg, cfg)
	direct := deployments(t, b.Client(t), name, cfg, cfg)
	if _, err := direct[0].TryAcquire(ctx, pacer.Request{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := direct[1].TryAcquire(ctx, pacer.Request{}); err != nil {
		t.Fatal(err)
	}
	return ps, newGroup(t, pacer.FillInOrder, false, ps...)
}

// A call that reserved a later turn on one deployment, which a 429 then
// pauses, is routed again, to the deployment with room, instead of waiting
// the pause out where it was.
func TestGroupRoutesAgainAfterAPause(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // the lanes wait out their ~3 s turns side by side; each has its own names
		ctx := context.Background()
		ps, g := takenDeployments(t, b)
		// The pause comes 2.5 s before the turn.
		paused := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			paused <- pacer.Throttle(ctx, ps[0], time.Minute, classify.LimitRequests, pacer.Request{})
		}()
		start := time.Now()
		l, p, err := g.Acquire(ctx, pacer.Request{MaxWait: 10 * time.Second})
		if perr := <-paused; perr != nil {
			t.Fatalf("Throttled() = %v", perr)
		}
		if err != nil {
			t.Fatalf("Acquire() = %v after %v; want a lease on the deployment that was not paused", err, time.Since(start))
		}
		defer l.Cancel(ctx)
		if p != ps[1] {
			t.Errorf("Acquire() admitted on %q; want %q", p.Config().Name, ps[1].Config().Name)
		}
		// The paused deployment's turn went back (in the background): only
		// the other client's lease is left there.
		var s pacer.Snapshot
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if s, err = ps[0].Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			if s.InFlight <= 1 || time.Now().After(deadline) {
				break
			}
		}
		if s.InFlight != 1 {
			t.Errorf("the paused deployment has %d leases in flight; want only the other client's (the routed call's turn given back)", s.InFlight)
		}
	})
}

// A routed call waiting for its turn on a deployment that this process
// then stops (StopQuota after a quota error) is routed again, to a
// deployment that can take it, rather than failing with the stop.
func TestGroupRoutesAgainAfterAStop(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // the lanes wait out their ~3 s turns side by side; each has its own names
		ctx := context.Background()
		ps, g := takenDeployments(t, b)
		// The stop comes 2.5 s before the turn, a margin a loaded machine
		// keeps.
		stopped := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			stopped <- pacer.StopQuota(ctx, ps[0], time.Minute, time.Minute)
		}()
		l, p, err := g.Acquire(ctx, pacer.Request{MaxWait: 10 * time.Second})
		if serr := <-stopped; serr != nil {
			t.Fatalf("StopQuota() = %v", serr)
		}
		if err != nil {
			t.Fatalf("Acquire() = %v; want a lease on the deployment that was not stopped", err)
		}
		defer l.Cancel(ctx)
		if p != ps[1] {
			t.Errorf("Acquire() admitted on %q; want %q", p.Config().Name, ps[1].Config().Name)
		}
	})
}
