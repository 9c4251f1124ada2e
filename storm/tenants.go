package main

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
)

// budgetScenarios are the scenarios that compare budgets (lane.go).
func budgetScenarios() []scenario {
	return []scenario{
		{"tenants", "one budget, ten tenants (Tenants.Share 0.1): one demands 10x its share; the nine light ones' waits beside it and alone",
			func(p *params) { p.speed = 20 }, buildTenants},
		{"spend", "a daily Spend cap: worst case reserved up front, settled at cost; jobs run until the cap refuses them",
			func(p *params) { p.speed = 20 }, buildSpend},
		{"anthropic", "a provider enforcing input and output tokens per minute apart (ITPM, OTPM): separate rates vs one combined TPM",
			func(p *params) { p.speed = 60 }, buildAnthropic},
		{"deployments", "three deployments of one model (3:2:1), one shared with an outside caller: a pacer.Group against picking one by hand",
			func(p *params) { p.speed = 30 }, buildDeployments},
		{"proxy", "Go, TypeScript and curl processes through two llmpacer proxy replicas: a budget per language's key vs one shared",
			func(p *params) { p.speed = 10 }, buildProxy},
	}
}

// The tenants scenario, in the simulated world (-speed divides it): a
// budget of 60,000 tokens a minute with a burst of 12,000, calls of 1,000
// tokens, five minutes of arrivals. The heavy tenant sends a Poisson
// stream at the budget's whole rate, ten times its share; the nine light
// tenants each a Poisson stream at tenantLight of it, below their share.
const (
	tenantRate     = 60_000
	tenantBurst    = 12_000 // -burst sets it: a fraction of the rate, or tokens
	tenantCall     = 1_000
	tenantRun      = 5 * time.Minute
	tenantLight    = 0.08 // of the budget's rate, per light tenant
	tenantHeavy    = 1.0  // of the budget's rate: 10x a share of 0.1
	tenantLights   = 9
	tenantShare    = 0.1
	tenantLatency  = 2 * time.Second
	tenantHeavyTag = "heavy"
)

// tenantsResult is what the tenants scenario measured: waits in ms.
type tenantsResult struct {
	LightP50, LightP95, LightP99 float64
	AloneP50, AloneP95, AloneP99 float64
	HeavyP50, HeavyP95           float64
	// WorstLightP95 is the largest p95 of one light tenant beside the
	// heavy one, and WorstAloneP95 the same tenant's alone.
	WorstLightP95, WorstAloneP95 float64
	LightCalls, LightFailed      int
	AloneFailed                  int
	HeavyCalls, HeavyServed      int
	// Used is what the provider admitted in the second half of the
	// arrivals, of the budget's rate over that time: the steady state,
	// once the burst is spent.
	Used, AloneUsed float64
	// OverShare is how many light calls found their tenant past its share
	// on arrival (replayed from the arrival times: the share bucket as
	// acquire.lua keeps it, charged at arrival), of LightCalls.
	OverShare              int
	Burst                  int64
	RateLimited, Alone429s int64
	Seconds                float64
	// Refill is the time the budget takes to refill one call, in ms, and
	// Bound the light p95 the goal allows: twice their p95 alone, or
	// Refill if more (a ratio to a wait of a millisecond alone measures
	// noise). Met says the goal was met: light p95 within Bound, no light
	// call failed and no 429s, the budget at least 95% used.
	Refill, Bound float64
	Met           bool
}

func buildTenants(pl *plan, rng *rand.Rand) {
	p := pl.p
	run := p.wall(tenantRun)
	perCall := func(share float64) float64 { // mean wall gap between calls
		return float64(p.wall(time.Minute)) / (share * tenantRate / tenantCall)
	}
	prompt := int64(tenantCall / 4)
	mk := func(tenant, group string, share float64, giveUp time.Duration) []call {
		var out []call
		mean := perCall(share)
		for at := rng.ExpFloat64() * mean; at < float64(run); at += rng.ExpFloat64() * mean {
			out = append(out, call{at: time.Duration(at), tenant: tenant, group: group,
				prompt: prompt, maxTokens: tenantCall - prompt, output: tenantCall - prompt, giveUpAt: giveUp})
		}
		return out
	}
	var light []call
	for i := range tenantLights {
		light = append(light, mk(fmt.Sprintf("light-%d", i+1), "light", tenantLight, 0)...)
	}
	// The heavy tenant's demand outlasts the run: what it has not been
	// served when arrivals end, it gives up.
	heavy := mk(tenantHeavyTag, "heavy", tenantHeavy, run)
	sortCalls(light)
	both := append(append([]call(nil), light...), heavy...)
	sortCalls(both)
	pl.tenantLanes = [][]call{both, light}
	pl.custom = func(ctx context.Context, pl *plan, be *backend, prog *progress) (scenarioReport, error) {
		return runTenants(ctx, pl, be, prog, both, light)
	}
}

// tenantConfig is the budget of the tenants scenario, for wall window w.
func tenantConfig(name string, w time.Duration, burst int64) pacer.Config {
	return pacer.Config{
		Name:     name,
		Rates:    []pacer.Rate{{Unit: pacer.Tokens, Limit: tenantRate, Window: w, Burst: burst}},
		Tenants:  pacer.Tenants{Share: tenantShare},
		NoRefund: true, MaxWait: time.Hour,
	}
}

func runTenants(ctx context.Context, pl *plan, be *backend, prog *progress, both, light []call) (scenarioReport, error) {
	p := pl.p
	w := p.wall(time.Minute)
	run := p.wall(tenantRun)
	rep := scenarioReport{Name: pl.name, About: pl.about, Speed: p.speed, Redis: be.desc, Jobs: len(both), Procs: pl.procs}
	id := runID()
	burst := tenantBurstOf(p)
	type out struct {
		res    []callResult
		used   float64
		r429   int64
		err    error
		finish time.Duration
	}
	lanes := pl.tenantLanes
	outs := make([]out, 2)
	// The lanes start together, once both are ready: with -procs, once
	// their children run, which on a loaded machine takes seconds.
	gate := newStartGate(ctx, len(lanes))
	prog.begin(pl.name, "with the heavy tenant and alone", len(both)+len(light), &recorder{})
	var wg sync.WaitGroup
	for i, calls := range lanes {
		wg.Go(func() {
			fp, rec, c, stop, err := startLane(ctx, fakeprovider.Config{TokenLimit: tenantRate, Window: w, Latency: p.wall(tenantLatency)}, 256)
			if err != nil {
				gate.fail()
				outs[i].err = err
				return
			}
			defer stop()
			name := tenantBudget(i, id)
			var start time.Time
			ready := func() (time.Time, error) {
				t, err := gate.ready()
				if err == nil {
					start = t
					rec.reset(t)
					fp.ResetStats()
				}
				return t, err
			}
			if pl.procs > 1 {
				outs[i].res, err = runTenantProcs(ctx, pl, be, i, name, c.url, ready, prog)
			} else {
				outs[i].res, err = runTenantLane(ctx, be, c, name, w, burst, calls, ready, prog.jobDone)
			}
			if err != nil {
				gate.fail() // no-op once the lanes started
				outs[i].err = err
				return
			}
			outs[i].finish = time.Since(start)
			ev := rec.snapshot()
			most := float64(tenantRate) * (run / 2).Seconds() / w.Seconds()
			outs[i].used = float64(admittedBy(ev, run)-admittedBy(ev, run/2)) / most
			outs[i].r429 = fp.Stats().RateLimited
		})
	}
	wg.Wait()
	prog.end()
	for _, o := range outs {
		if o.err != nil {
			return rep, o.err
		}
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	r := tenantsResult{Used: outs[0].used, AloneUsed: outs[1].used, RateLimited: outs[0].r429, Alone429s: outs[1].r429,
		Seconds: outs[0].finish.Seconds()}
	lw, lf := waitsOf(outs[0].res, "light")
	aw, af := waitsOf(outs[1].res, "light")
	hw, _ := waitsOf(outs[0].res, "heavy")
	r.LightCalls, r.LightFailed, r.AloneFailed = len(light), lf, af
	r.LightP50, r.LightP95, r.LightP99 = quantile(lw, 50), quantile(lw, 95), quantile(lw, 99)
	r.AloneP50, r.AloneP95, r.AloneP99 = quantile(aw, 50), quantile(aw, 95), quantile(aw, 99)
	r.HeavyP50, r.HeavyP95 = quantile(hw, 50), quantile(hw, 95)
	for _, c := range both {
		if c.group == "heavy" {
			r.HeavyCalls++
		}
	}
	r.HeavyServed = len(hw)
	r.Burst = burst
	r.OverShare = overShare(light, w, burst)
	r.Refill = float64(w.Microseconds()) / 1000 * tenantCall / tenantRate
	r.Bound = max(2*r.AloneP95, r.Refill)
	r.Met = r.LightP95 <= r.Bound && r.LightFailed == 0 && r.RateLimited == 0 && r.Used >= 0.95
	for i := range tenantLights {
		t := fmt.Sprintf("light-%d", i+1)
		with, alone := tenantWaits(outs[0].res, t), tenantWaits(outs[1].res, t)
		if p95 := quantile(with, 95); p95 >= r.WorstLightP95 {
			r.WorstLightP95, r.WorstAloneP95 = p95, quantile(alone, 95)
		}
	}
	rep.Budgets = r
	rep.Table = tenantsTable(p, r)
	if pl.procs > 1 {
		rep.Table.Header = append(rep.Table.Header, fmt.Sprintf("each lane's calls in %d OS processes sharing its budget (-procs), on %s", pl.procs, be.desc))
	}
	return rep, nil
}

// tenantBudget names lane i's budget (0: with the heavy tenant, 1: alone)
// in run id.
func tenantBudget(i int, id string) string { return fmt.Sprintf("storm:tenants:%d:%s", i, id) }

// runTenantLane runs calls against the budget name through c, from the
// start ready returns once its Pacer is made: in this process, or in one
// of -procs' children.
func runTenantLane(ctx context.Context, be *backend, c *chatClient, name string, w time.Duration, burst int64,
	calls []call, ready func() (time.Time, error), done func()) ([]callResult, error) {
	pc, err := pacer.New(be.rdb, tenantConfig(name, w, burst))
	if err != nil {
		return nil, err
	}
	start, err := ready()
	if err != nil {
		return nil, err
	}
	ln := &lane{p: pc, c: c, retries: 6}
	return ln.run(ctx, calls, start, done), nil
}

// tenantBurstOf is the budget's burst: -burst, else tenantBurst.
func tenantBurstOf(p params) int64 {
	if p.burst.isZero() {
		return tenantBurst
	}
	return p.burst.of(tenantRate)
}

// overShare replays the light calls' arrivals through each tenant's share
// bucket as acquire.lua keeps it (a GCRA of Share of the burst, with room
// for wire.ShareCalls of the call up to Share of the limit, refilling
// Share of the rate, charged whether or not the call is past it) and
// counts the calls that find it past its allowance.
func overShare(calls []call, w time.Duration, burst int64) int {
	perNs := tenantShare * tenantRate / float64(w) // share tokens per ns
	tats := map[string]float64{}
	n := 0
	for _, c := range calls {
		now := float64(c.at)
		tat := max(tats[c.tenant], now)
		charge := float64(c.prompt+c.maxTokens) / perNs
		room := min(wire.ShareCalls*charge, float64(int64(tenantShare*tenantRate))/perNs)
		allow := max(float64(max(int64(tenantShare*float64(burst)), 1))/perNs, room)
		if tat+charge-now > allow {
			n++
		}
		tats[c.tenant] = min(tat+charge, now+2*allow)
	}
	return n
}

// tenantWaits returns the waits of tenant's calls that succeeded.
func tenantWaits(rs []callResult, tenant string) []time.Duration {
	var out []time.Duration
	for _, r := range rs {
		if r.tenant == tenant && r.err == nil {
			out = append(out, r.wait())
		}
	}
	return out
}

func tenantsTable(p params, r tenantsResult) *customTable {
	pct := func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
	t := &customTable{Header: []string{
		fmt.Sprintf("budget Rate{Tokens, %s per %v, Burst %s}, Tenants.Share %g, NoRefund; provider %s tokens per %v; calls of %s tokens, %v each",
			thousands(tenantRate), p.wall(time.Minute), thousands(r.Burst), tenantShare, thousands(tenantRate), p.wall(time.Minute),
			thousands(tenantCall), p.wall(tenantLatency).Round(time.Millisecond)),
		fmt.Sprintf("%v of Poisson arrivals (-speed %g: a simulated minute is %v): 9 light tenants at %g of the rate each, the heavy one at %g (10x its share), giving up at the end",
			p.wall(tenantRun), p.speed, p.wall(time.Minute), tenantLight, tenantHeavy),
		"the same light calls run at the same time against a second budget and provider without the heavy tenant (alone)",
	}}
	t.Cells = [][]string{
		{"", "calls", "served", "wait p50", "p95", "p99", "budget used", "429s"},
		{"light tenants, heavy present", fmt.Sprint(r.LightCalls), fmt.Sprint(r.LightCalls - r.LightFailed),
			dur(r.LightP50), dur(r.LightP95), dur(r.LightP99), pct(r.Used), fmt.Sprint(r.RateLimited)},
		{"heavy tenant", fmt.Sprint(r.HeavyCalls), fmt.Sprint(r.HeavyServed), dur(r.HeavyP50), dur(r.HeavyP95), "", "", ""},
		{"light tenants alone", fmt.Sprint(r.LightCalls), fmt.Sprint(r.LightCalls - r.AloneFailed),
			dur(r.AloneP50), dur(r.AloneP95), dur(r.AloneP99), pct(r.AloneUsed), fmt.Sprint(r.Alone429s)},
	}
	ratio := "-"
	if r.AloneP95 > 0 {
		ratio = fmt.Sprintf("%.2fx", r.LightP95/r.AloneP95)
	}
	met := "missed"
	if r.Met {
		met = "met"
	}
	t.Notes = []string{
		fmt.Sprintf("goal %s: light p95 within %s, the larger of 2x their p95 alone (now %s of it) and a call's refill (%s); no light call failed (%d), no 429s (%d); budget at least 95%% used (%.1f%%)",
			met, dur(r.Bound), ratio, dur(r.Refill), r.LightFailed, r.RateLimited, 100*r.Used),
		fmt.Sprintf("the light tenant with the largest p95 beside the heavy one: %s, alone %s", dur(r.WorstLightP95), dur(r.WorstAloneP95)),
		fmt.Sprintf("light calls that found their tenant past its share on arrival: %d of %d (a share holds Share of the burst, %s tokens, with room for %d calls up to Share of the limit, %s)",
			r.OverShare, r.LightCalls, thousands(int64(tenantShare*float64(r.Burst))), wire.ShareCalls, thousands(int64(tenantShare*tenantRate))),
		"budget used: tokens the provider admitted in the second half of the arrivals (the burst long spent), of the budget's rate over that time",
	}
	return t
}

// sortCalls orders calls by arrival, keeping the order of equals.
func sortCalls(cs []call) {
	slices.SortStableFunc(cs, func(a, b call) int { return cmp.Compare(a.at, b.at) })
}

// runID names one run's budgets apart from another's.
func runID() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startGate gives n lanes one start time, fixed when the last of them is
// ready: a lane that fails releases the others with an error.
type startGate struct {
	ctx   context.Context
	mu    sync.Mutex
	n     int
	start time.Time
	err   error
	done  chan struct{}
}

func newStartGate(ctx context.Context, n int) *startGate {
	return &startGate{ctx: ctx, n: n, done: make(chan struct{})}
}

// ready reports a lane ready and returns the common start, 100 ms after
// the last lane is ready.
func (g *startGate) ready() (time.Time, error) {
	g.mu.Lock()
	if g.n--; g.n == 0 && g.err == nil {
		g.start = time.Now().Add(100 * time.Millisecond)
		close(g.done)
	}
	g.mu.Unlock()
	select {
	case <-g.done:
		return g.start, g.err
	case <-g.ctx.Done():
		return time.Time{}, g.ctx.Err()
	}
}

// fail releases the lanes waiting: a lane could not start.
func (g *startGate) fail() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil && g.n > 0 {
		g.err, g.n = errors.New("another lane of the scenario failed to start"), -1
		close(g.done)
	}
}
