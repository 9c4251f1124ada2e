package lua_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
)

// Go and Python callers share one budget with tenants and a spend cap, on
// the real Redis and on the Cluster: a strict sliding spend cap of 100,000
// an hour, each tenant's own strict cap of 45,000, and a quarter of the
// budget as each tenant's share. Tokens cost 1 (input) and 2 (output) a
// piece, reserved at their worst case (no input margin) and settled at
// what the call used. Every caller calls for its tenant until its first
// refusal, settling at once.
//
//   - Phase 1, tenants a and b on both sides: past their shares (25,000
//     each) their calls leave the batch floor, a fifth of the cap, to
//     tenants within theirs: the spend stops near 80,000, not 100,000.
//   - Phase 2, tenant c on both sides: within its share, it gets the
//     room a and b left, and the cap fills to 100,000, never past it.
//   - After each phase, what Redis counts is exactly what the calls of
//     both sides spent: the budget's cap and each tenant's own.
//
// The bounds hold on a loaded machine: no step depends on speed, only on
// the shares' refill over the test's own run time, which the bounds add.
func TestPythonGoTenantsSpendCap(t *testing.T) {
	py := findPython(t, true)
	t.Run("redis", func(t *testing.T) { interopTenants(t, py, redistest.Real(t)) })
	t.Run("cluster", func(t *testing.T) { interopTenants(t, py, redistest.Cluster(t)) })
}

const (
	tenantsCap      = 100_000
	tenantOwnCap    = 45_000
	tenantsShare    = 0.25
	tenantsMaxSpend = 300 + 2*150 // the largest call's reservation
)

// tenantCall is one call a caller made: its tokens reserved and used.
type tenantCall struct {
	Side       string `json:"side"`
	Tenant     string `json:"tenant"`
	Input      int64  `json:"input"`
	Output     int64  `json:"output"`
	OutputUsed int64  `json:"output_used"`
}

var tenantsPrice = wire.Price{Input: 1_000_000, Output: 2_000_000}

func interopTenants(t *testing.T, py string, b redistest.Backend) {
	cfg := vconfig{
		Budget: redistest.Name(t), Limits: vlimits{RPM: 100_000},
		Rates:   []vrate{{Unit: "spend", Limit: tenantsCap, WindowMs: 3_600_000, Sliding: true}},
		Prices:  map[string]vprice{"": {Input: 1_000_000, Output: 2_000_000, InputMargin: -1}},
		Tenants: &vtenants{Share: tenantsShare, Rates: []vrate{{Unit: "spend", Limit: tenantOwnCap, WindowMs: 3_600_000, Sliding: true}}},
	}
	p, err := pacer.New(b.Client(t), cfg.config())
	if err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, py, b, map[string]vconfig{"t": cfg})
	// The worker is up (runTenants gives it 500 ms to start its callers).
	if a := w.do(map[string]any{"op": "snapshot", "budget": "t"}); a.Error != "" {
		t.Fatalf("Python snapshot: %s %s", a.Error, a.Message)
	}
	began := time.Now()
	// Each tenant's share refills at a quarter of the cap an hour: what it
	// may admit within its share beyond its burst while the test runs,
	// plus one call at the edge.
	refill := func() int64 {
		return int64(float64(tenantsCap)*tenantsShare*time.Since(began).Hours()) + tenantsMaxSpend
	}
	// A caller stops at its first refusal, while calls of others may still
	// give back their unused output: the room left is below a call's
	// reservation plus what every caller (2 a tenant a side) gave back.
	slack := func(tenants int) int64 { return tenantsMaxSpend * int64(1+4*tenants) }

	calls := runTenants(t, w, p, []string{"a", "b"}, 1)
	spent := checkTenantCounts(t, p, calls)
	total := spent["a"] + spent["b"]
	keep := int64(tenantsCap * 0.2) // Config.BatchFloor's default
	t.Logf("%s phase 1: a %d, b %d, total %d in %d calls", b.Kind, spent["a"], spent["b"], total, len(calls))
	if total > tenantsCap-keep+2*refill() || total < tenantsCap-keep-slack(2) {
		t.Errorf("phase 1: tenants a and b spent %d together, want about %d (the cap less the batch floor that calls past their share leave)", total, tenantsCap-keep)
	}

	more := runTenants(t, w, p, []string{"c"}, 2)
	calls = append(calls, more...)
	spent = checkTenantCounts(t, p, calls)
	total = spent["a"] + spent["b"] + spent["c"]
	t.Logf("%s phase 2: c %d, total %d", b.Kind, spent["c"], total)
	if total > tenantsCap || total < tenantsCap-slack(1) {
		t.Errorf("phase 2: the budget spent %d, want at most the cap %d and within %d of it", total, tenantsCap, slack(1))
	}
	if spent["c"] < keep-2*refill()-slack(1) {
		t.Errorf("phase 2: tenant c, within its share, spent %d; the room a and b left was about %d", spent["c"], keep)
	}
}

// runTenants runs two Go callers and two Python callers for each tenant
// until each is refused once, and returns their calls. Both sides start
// at one moment, a little after the command is sent, and pause 1 to 4 ms
// between calls, so that each side's calls meet the other's.
func runTenants(t *testing.T, w *worker, p *pacer.Pacer, tenants []string, seed int) []tenantCall {
	t.Helper()
	start := time.Now().Add(500 * time.Millisecond)
	w.send(map[string]any{"op": "tenant_load", "budget": "t", "tenants": tenants, "threads": 2, "seed": seed, "seconds": 60,
		"start_unix_ms": start.UnixMilli()})
	var mu sync.Mutex
	var calls []tenantCall
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(tenants))
	for _, tn := range tenants {
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)+uint64(len(tn))<<8))
				time.Sleep(time.Until(start))
				deadline := time.Now().Add(60 * time.Second)
				for time.Now().Before(deadline) {
					time.Sleep(time.Millisecond + time.Duration(rng.Int64N(3_000_000)))
					in, out := 100+rng.Int64N(201), 50+rng.Int64N(101)
					l, err := p.TryAcquire(context.Background(), pacer.Request{Input: in, Output: out, Tenant: tn})
					var ny *pacer.RefusedError
					if errors.As(err, &ny) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
					used := rng.Int64N(out + 1)
					if err := l.SettleUsage(context.Background(), pacer.Usage{Input: in, Output: used}); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					calls = append(calls, tenantCall{Side: "go", Tenant: tn, Input: in, Output: out, OutputUsed: used})
					mu.Unlock()
				}
			}()
		}
	}
	a := w.answer()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Go caller: %v", err)
	}
	if a.Error != "" {
		t.Fatalf("Python tenant_load: %s %s", a.Error, a.Message)
	}
	py := a.TenantCalls
	sides := map[string]int{}
	for _, c := range append(calls, py...) {
		sides[c.Side+" "+c.Tenant]++
	}
	for _, tn := range tenants {
		for _, side := range []string{"go", "python"} {
			if sides[side+" "+tn] == 0 {
				t.Errorf("no %s call for tenant %s was admitted: %v", side, tn, sides)
			}
		}
	}
	return append(calls, py...)
}

// checkTenantCounts checks that what Redis counts on the budget's spend
// cap and on each tenant's own is exactly what the calls of both sides
// spent, and returns each tenant's spend.
func checkTenantCounts(t *testing.T, p *pacer.Pacer, calls []tenantCall) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	spent := map[string]int64{}
	var total int64
	for _, c := range calls {
		s := tenantsPrice.Spent(c.Input, 0, c.OutputUsed)
		spent[c.Tenant] += s
		total += s
	}
	snap, err := p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Rates) != 2 || snap.Rates[1].Rate.Unit != pacer.Spend {
		t.Fatalf("snapshot rates: %+v; want RPM and the spend cap", snap.Rates)
	}
	if got := tenantsCap - int64(snap.Rates[1].Level); got != total {
		t.Errorf("the budget's spend cap counts %d; the calls of both sides spent %d", got, total)
	}
	if total > tenantsCap {
		t.Errorf("the calls spent %d, past the cap %d", total, tenantsCap)
	}
	for tn, s := range spent {
		ts, err := p.TenantSnapshot(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		if got := tenantOwnCap - int64(ts.Rates[0].Level); got != s {
			t.Errorf("tenant %s's own cap counts %d; its calls spent %d", tn, got, s)
		}
		if s > tenantOwnCap {
			t.Errorf("tenant %s spent %d, past its own cap %d", tn, s, tenantOwnCap)
		}
	}
	return spent
}

// A Python Group and a Go Group route over the same two deployments, on
// Redis and on the Cluster (one hash tag): each side's charges are room
// the other's route passes over. The first deployment refills a token a
// second, so the steps hold unless one takes 20 s.
func TestPythonGoGroupRoutes(t *testing.T) {
	py := findPython(t, true)
	t.Run("redis", func(t *testing.T) { interopGroup(t, py, redistest.Real(t)) })
	t.Run("cluster", func(t *testing.T) { interopGroup(t, py, redistest.Cluster(t)) })
}

func interopGroup(t *testing.T, py string, b redistest.Backend) {
	ctx := context.Background()
	name := redistest.Name(t)
	budgets := map[string]vconfig{
		"g1": {Budget: name + ":g1", HashTag: name + "-grp", Limits: vlimits{TPM: 60}},
		"g2": {Budget: name + ":g2", HashTag: name + "-grp", Limits: vlimits{TPM: 600}},
	}
	rdb := b.Client(t)
	var ds []pacer.Deployment
	for _, k := range []string{"g1", "g2"} {
		p, err := pacer.New(rdb, budgets[k].config())
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, pacer.Deployment{Pacer: p})
	}
	g, err := pacer.NewGroup(pacer.GroupConfig{Deployments: ds})
	if err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, py, b, budgets)
	route := func(tokens int64, policy string) string {
		t.Helper()
		a := w.do(map[string]any{"op": "group_try", "budgets": []string{"g1", "g2"}, "policy": policy, "tokens": tokens})
		if a.Error != "" {
			t.Fatalf("Python group_try(%d): %s %s", tokens, a.Error, a.Message)
		}
		return a.Chosen
	}
	if got := route(40, "fill-in-order"); got != "g1" {
		t.Fatalf("Python's first call went to %s, want g1 (the first, full)", got)
	}
	// g1 holds 20 tokens now (and one more a second).
	if got := route(40, "fill-in-order"); got != "g2" {
		t.Errorf("Python's second call went to %s, want g2: g1 has 20 tokens left", got)
	}
	_, p, err := g.TryAcquire(ctx, pacer.Request{Tokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	if p != ds[1].Pacer {
		t.Errorf("Go's group sent a call of 40 to %s, want g2: Python's call took g1's room", p.Config().Name)
	}
	// Go takes g1's last 20; Python's route then passes g1 over, even by
	// room (g2 has 520 of 600 left).
	if _, err := ds[0].Pacer.TryAcquire(ctx, pacer.Request{Tokens: 20}); err != nil {
		t.Fatalf("Go TryAcquire(20) on g1: %v", err)
	}
	if got := route(10, "most-room"); got != "g2" {
		t.Errorf("Python's most-room call went to %s, want g2", got)
	}
	if a := w.do(map[string]any{"op": "group_try", "budgets": []string{"g1"}, "tokens": 30}); a.Error != "not_yet" {
		t.Errorf("Python's group of g1 alone, with Go's call there: %+v, want not_yet", a)
	}
}
