package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
)

// plan is one scenario ready to run: its jobs, its provider and its rows.
type plan struct {
	name, about string
	p           params
	set         map[string]bool // flags given on the command line
	procs       int             // OS processes per row (-procs)
	args        []string        // the command line, for -procs' children

	jobs     []job // in order of arrival
	outside  *outsideTraffic
	quota    int64 // provider credit in real tokens; 0 = none
	headroom float64
	// refundRows asks for the rows that show what refunds do: the shared
	// budget with and without them, against a provider that keeps
	// max_tokens and (unless -provider-refund chose one) one that refunds.
	refundRows bool
	// latencyPerKTok, if set, makes a call's latency proportional to its
	// output: this much per 1,000 output tokens (wall time).
	latencyPerKTok time.Duration
	// sdkOnly makes every row an openai-go row: without pacing (the
	// per-worker side) and through pacerhttp.NewTransport (the shared
	// side). sdkRows adds transport rows beside the scenario's own.
	sdkOnly, sdkRows bool
	// stream sends the SDK rows' calls as streams (NewStreaming).
	stream bool
	// outage, if set, takes Redis away mid-run (scenario redis-down).
	outage *outagePlan

	provider fakeprovider.Config // Refund is set per row, from variant.providerRefund
	rows     []variant
	// custom, if set, runs the scenario instead of its rows (lane.go).
	custom customRun
	// tenantLanes are the tenants scenario's lanes' calls, which -procs'
	// children run (tenants_procs.go).
	tenantLanes [][]call
}

// variant is one row: the provider it runs against, a mode and, for the
// shared mode, the budget's shape.
type variant struct {
	label          string
	providerRefund bool // fakeprovider.Config.Refund: unused max_tokens go back when a call ends
	shared         bool
	burst          int64   // the budget's capacity in tokens
	reqBurst       int64   // the budget's capacity in requests, when the provider limits them
	slidingSafe    bool    // refill (limit - burst) per window, never over the limit in any window
	exactSliding   bool    // a pacer.Rate with Sliding: the provider's own window, counted
	headroom       float64 // pacer.Config.Headroom
	noRefund       bool    // pacer.Config.NoRefund: Settle charges overruns only
	client         clientKind
	noHeaderSync   bool       // pacerhttp.WithHeaderSync(false)
	noIncludeUsage bool       // pacerhttp.WithIncludeUsage(false)
	outage         outageKind // redis-down rows: what the budget does while Redis is down
}

// buildPlan merges the scenario's defaults with the flags and makes the jobs.
func buildPlan(name string, o options) (*plan, error) {
	s, ok := findScenario(name)
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q", name)
	}
	p := baseParams()
	s.defaults(&p)
	p = o.override(p)
	if err := errors.Join(p.check()...); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	pl := &plan{name: name, about: s.about, p: p, set: o.set, procs: max(o.procs, 1), args: o.args}
	h := fnv.New64a()
	h.Write([]byte(name))
	s.build(pl, rand.New(rand.NewPCG(o.seed, h.Sum64())))
	if err := pl.checkJobs(); err != nil {
		return nil, err
	}
	sortByArrival(pl.jobs)
	pl.provider = fakeprovider.Config{
		TokenLimit: p.providerTokens, RequestLimit: p.providerReqs, Window: p.wall(p.window),
		Latency: p.wall(p.latency), QuotaTokens: pl.quota, Refund: p.providerRefund,
	}
	if p.sliding {
		pl.provider.Mode = fakeprovider.SlidingWindow
	}
	if per := pl.latencyPerKTok; per > 0 {
		pl.provider.LatencyFunc = func(u fakeprovider.Usage) time.Duration {
			return max(per*time.Duration(u.OutputTokens)/1000, per/5)
		}
	}
	var err error
	if pl.rows, err = pl.variants(o.mode); err != nil {
		return nil, err
	}
	if err := pl.checkProcs(); err != nil {
		return nil, err
	}
	return pl, nil
}

// checkProcs rejects -procs where it cannot apply: it splits the storm's
// own client rows between processes, not openai-go rows or the outside
// caller, and every process needs a worker.
func (pl *plan) checkProcs() error {
	switch {
	case pl.procs <= 1:
		return nil
	case pl.custom != nil && pl.tenantLanes == nil:
		return fmt.Errorf("-procs %d: scenario %s runs its own lanes in one process; use -procs with default, sliding, mixed, bursty, priority, quota or bottleneck", pl.procs, pl.name)
	case pl.sdkOnly || pl.sdkRows || pl.outside != nil:
		return fmt.Errorf("-procs %d: scenario %s has openai-go rows or an outside caller, which run in one process only; use -procs with default, sliding, mixed, bursty, priority, quota or bottleneck", pl.procs, pl.name)
	case pl.procs > pl.p.workers:
		return fmt.Errorf("-procs %d: scenario %s has %d workers, fewer than processes; raise -workers or lower -procs", pl.procs, pl.name, pl.p.workers)
	}
	return nil
}

// override applies the flags given on the command line.
func (o options) override(p params) params {
	g := o.params
	for name, f := range map[string]func(){
		"workers": func() { p.workers = g.workers }, "jobs": func() { p.jobs = g.jobs },
		"tokens": func() { p.tokens = g.tokens }, "output": func() { p.output = g.output },
		"provider-tokens":   func() { p.providerTokens = g.providerTokens },
		"provider-requests": func() { p.providerReqs = g.providerReqs },
		"provider-window":   func() { p.sliding = g.sliding },
		"provider-refund":   func() { p.providerRefund = g.providerRefund },
		"window":            func() { p.window = g.window }, "latency": func() { p.latency = g.latency },
		"burst": func() { p.burst = g.burst }, "retries": func() { p.retries = g.retries },
		"speed": func() { p.speed = g.speed }, "margin": func() { p.margin = g.margin },
	} {
		if o.set[name] {
			f()
		}
	}
	return p
}

// variants returns the rows the mode asks for. Every shared row's budget
// matches the provider (NoRefund unless it refunds), except where the
// scenario shows what a mismatch costs.
func (pl *plan) variants(mode string) ([]variant, error) {
	p := pl.p
	limit := p.providerTokens
	largest := pl.largestJob()
	burst := limit
	if !p.burst.isZero() {
		burst = p.burst.of(limit)
	}
	if p.sliding && !p.burst.isZero() && burst >= limit {
		return nil, fmt.Errorf("-burst %v is the whole limit: against a sliding-window provider the safe budget refills (limit - burst) per window, so the burst must be below the limit", p.burst)
	}
	if p.sliding && p.burst.isZero() {
		burst = amount{frac: 0.1, isFrac: true}.of(limit)
	}
	if burst < largest {
		return nil, fmt.Errorf("scenario %s: a burst of %d tokens cannot hold the largest job (%d tokens), which could never be admitted; raise -burst", pl.name, burst, largest)
	}
	// A request limit gets the same shape as the token limit: the whole
	// limit, or the same fraction of it, at least one call, below the
	// limit for a sliding-safe budget.
	reqs, reqBurst := p.providerReqs, p.providerReqs
	if p.sliding && reqs > 0 {
		reqBurst = min(max(int64(math.Round(float64(reqs)*float64(burst)/float64(limit))), 1), reqs-1)
		if reqBurst < 1 {
			return nil, fmt.Errorf("-provider-requests %d: a sliding-safe budget keeps a burst below the limit and at least one call, so it needs a limit of at least 2 calls per window", reqs)
		}
	}
	if pl.sdkOnly {
		return pl.sdkVariants(mode, burst), nil
	}
	if pl.outage != nil {
		return pl.outageVariants(burst), nil
	}
	kinds := []bool{p.providerRefund}
	if pl.refundRows && !pl.set["provider-refund"] {
		kinds = []bool{false, true}
	}
	var rows []variant
	for _, refund := range kinds {
		prefix := ""
		if len(kinds) > 1 {
			prefix = map[bool]string{false: "no-refund provider, ", true: "refunding provider, "}[refund]
		}
		// The budget that matches the provider.
		match := variant{providerRefund: refund, shared: true, burst: burst, reqBurst: reqBurst, noRefund: !refund}
		var shared []variant
		switch {
		case p.sliding:
			full, safe := match, match
			full.label, full.burst, full.reqBurst = "shared, burst = limit", limit, reqs
			safe.label, safe.slidingSafe = fmt.Sprintf("shared, sliding-safe burst %s", thousands(burst)), true
			if reqs > 0 {
				safe.label += fmt.Sprintf(" and %d calls", reqBurst)
			}
			exact := match
			exact.label, exact.exactSliding = "shared, exact sliding window", true
			shared = append(shared, full, safe, exact)
		case pl.refundRows:
			other := match
			other.noRefund = !match.noRefund
			for _, v := range []*variant{&match, &other} {
				v.label = "shared, refunds"
				if v.noRefund {
					v.label = "shared, NoRefund"
				}
			}
			shared = append(shared, match, other)
		case pl.headroom > 0:
			h := match
			match.label = "shared budget"
			h.label, h.headroom = fmt.Sprintf("shared, Headroom %g", pl.headroom), pl.headroom
			shared = append(shared, match, h)
			if pl.sdkRows {
				sync, nosync := pl.transportRow(match), pl.transportRow(match)
				sync.label += ", header sync"
				nosync.label, nosync.noHeaderSync = nosync.label+", WithHeaderSync(false)", true
				shared = append(shared, sync, nosync)
			}
		default:
			match.label = "shared budget (llmpacer)"
			shared = append(shared, match)
		}
		// One per-worker row is enough: its limiters know nothing of
		// refunds, and against either provider it tells the same story.
		if mode != "shared" && len(rows) == 0 {
			rows = append(rows, variant{label: fmt.Sprintf("%sper-worker limiters, %d retries", prefix, p.retries), providerRefund: refund})
		}
		if mode != "per-worker" {
			for _, v := range shared {
				v.label = prefix + v.label
				rows = append(rows, v)
			}
		}
	}
	return rows, nil
}

// check returns what is wrong with the params.
func (p params) check() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.workers < 1 || p.workers > maxWorkers {
		bad("-workers %d: want 1 to %d", p.workers, maxWorkers)
	}
	if p.jobs < 1 || p.jobs > maxJobs {
		bad("-jobs %d: want 1 to %d", p.jobs, maxJobs)
	}
	if p.tokens < 2 || p.tokens > maxCount {
		bad("-tokens %d: want 2 to %d (a job is a prompt and at least one output token)", p.tokens, int64(maxCount))
	}
	if p.providerTokens < 1 || p.providerTokens > maxCount {
		bad("-provider-tokens %d: want 1 to %d", p.providerTokens, int64(maxCount))
	}
	if p.providerReqs < 0 || p.providerReqs > maxCount {
		bad("-provider-requests %d: want 0 (no request limit) to %d", p.providerReqs, int64(maxCount))
	}
	if p.speed != p.speed || p.speed < minSpeed || p.speed > maxSpeed {
		bad("-speed %v: want %v to %v", p.speed, minSpeed, maxSpeed)
	} else if w := p.wall(p.window); p.window <= 0 || w < minWallWin || w > maxWallWin {
		bad("-window %v at -speed %v is %v of wall time: want %v to %v (pacer's token limits are per minute, and shorter windows drown in timer noise)",
			p.window, p.speed, w, minWallWin, maxWallWin)
	}
	if p.latency < 0 || p.latency > maxLatency {
		bad("-latency %v: want 0 to %v", p.latency, maxLatency)
	}
	if p.margin < 0 || p.margin > maxMargin {
		bad("-margin %v: want 0 to %v", p.margin, maxMargin)
	}
	if p.retries < 0 || p.retries > maxRetries {
		bad("-retries %d: want 0 to %d", p.retries, maxRetries)
	}
	return errs
}
