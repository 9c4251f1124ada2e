package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"math/rand/v2"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

// plan is one scenario ready to run: its jobs, its provider and its rows.
type plan struct {
	name, about string
	p           params
	set         map[string]bool // flags given on the command line

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

	provider fakeprovider.Config // Refund is set per row, from variant.providerRefund
	rows     []variant
	// custom, if set, runs the scenario instead of its rows (lane.go).
	custom customRun
}

// variant is one row: the provider it runs against, a mode and, for the
// shared mode, the budget's shape.
type variant struct {
	label          string
	providerRefund bool // fakeprovider.Config.Refund: unused max_tokens go back when a call ends
	shared         bool
	burst          int64   // the budget's capacity in tokens
	slidingSafe    bool    // refill (limit - burst) per window, never over the limit in any window
	exactSliding   bool    // a pacer.Rate with Sliding: the provider's own window, counted
	headroom       float64 // pacer.Config.Headroom
	noRefund       bool    // pacer.Config.NoRefund: Settle charges overruns only
	client         clientKind
	noHeaderSync   bool // pacerhttp.WithHeaderSync(false)
	noIncludeUsage bool // pacerhttp.WithIncludeUsage(false)
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
	pl := &plan{name: name, about: s.about, p: p, set: o.set}
	h := fnv.New64a()
	h.Write([]byte(name))
	s.build(pl, rand.New(rand.NewPCG(o.seed, h.Sum64())))
	if err := pl.checkJobs(); err != nil {
		return nil, err
	}
	sortByArrival(pl.jobs)
	pl.provider = fakeprovider.Config{
		TokenLimit: p.providerTokens, Window: p.wall(p.window),
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
	return pl, nil
}

// override applies the flags given on the command line.
func (o options) override(p params) params {
	g := o.params
	for name, f := range map[string]func(){
		"workers": func() { p.workers = g.workers }, "jobs": func() { p.jobs = g.jobs },
		"tokens": func() { p.tokens = g.tokens }, "output": func() { p.output = g.output },
		"provider-tokens": func() { p.providerTokens = g.providerTokens },
		"provider-window": func() { p.sliding = g.sliding },
		"provider-refund": func() { p.providerRefund = g.providerRefund },
		"window":          func() { p.window = g.window }, "latency": func() { p.latency = g.latency },
		"burst": func() { p.burst = g.burst }, "retries": func() { p.retries = g.retries },
		"speed": func() { p.speed = g.speed },
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
	if pl.sdkOnly {
		return pl.sdkVariants(mode, burst), nil
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
		match := variant{providerRefund: refund, shared: true, burst: burst, noRefund: !refund}
		var shared []variant
		switch {
		case p.sliding:
			full, safe := match, match
			full.label, full.burst = "shared, burst = limit", limit
			safe.label, safe.slidingSafe = fmt.Sprintf("shared, sliding-safe burst %s", thousands(burst)), true
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

// dispatchMargin is the time a call may take from the budget's admission
// to the provider's decision, more than the first call of the run took;
// see budgetConfig for why it is still needed.
const dispatchMargin = 20 * time.Millisecond

// largestJob is the largest charge of any job.
func (pl *plan) largestJob() int64 {
	var n int64
	for _, j := range pl.jobs {
		n = max(n, j.charge())
	}
	return n
}

// budgetConfig translates the provider's limit into a pacer.Config.
//
// pacer's token limits are per minute (TPM) and per day; the provider's
// window here is seconds. A bucket refilling limit tokens per window W is
// the same bucket as TPM = limit·(1 min / W) with Burst.TPM = limit: for
// 10,000 tokens per 5 s, TPM 120,000 and a burst of 10,000, both refilling
// 2 tokens per millisecond. When TPM is not a whole number it is rounded
// down, so the budget is never faster than the provider.
//
// A sliding-safe budget refills (limit - burst) per window. Config.SlidingWindow
// computes that refill per the limit's own window, a minute for TPM, so it
// is used only when the provider's window is a minute; otherwise the same
// bucket is written out as TPM = (limit - burst)·(1 min / W).
//
// NoRefund follows the row: set when the provider keeps max_tokens, so
// that settling real usage charges overruns but never refunds what the
// provider did not give back.
func (pl *plan) budgetConfig(v variant) (cfg pacer.Config, exact bool) {
	w := pl.provider.Window
	if v.exactSliding {
		// The provider's own limit and window, counted as it counts them.
		return pacer.Config{
			Rates:    []pacer.Rate{{Unit: pacer.Tokens, Limit: pl.p.providerTokens, Window: w, Sliding: true}},
			Headroom: v.headroom, NoRefund: v.noRefund, MaxWait: time.Hour,
		}, true
	}
	refill := pl.p.providerTokens
	if v.slidingSafe {
		refill -= v.burst
	}
	burst := v.burst
	// The budget admits a call a moment before the provider sees it, and
	// the first calls of a run set both buckets' clocks: the provider's
	// starts refilling when the first call arrives, the budget's when it
	// admitted it, up to a millisecond earlier still because Redis's clock
	// is read in whole milliseconds. A later call that reaches the
	// provider faster than the first did then finds it a fraction of a
	// token short (measured: "Used 9001, Requested 1000", retry-after-ms
	// 1). Such a 429 costs little time but it costs the call its turn: Run
	// pauses 1 ms and acquires again, behind every call that reserved a
	// turn meanwhile. Without the margin the default run met 0 to 4 of
	// them and its p99 wait went from 2.9 s to 4.9-8.4 s, for 20 ms less
	// in total. dispatchMargin of refill off the burst covers the offset;
	// it delays the run by the same 20 ms, once.
	margin := int64(math.Ceil(float64(pl.p.providerTokens) * dispatchMargin.Seconds() / w.Seconds()))
	margin = min(margin, max(burst-pl.largestJob(), 0))
	burst -= margin
	cfg = pacer.Config{Burst: pacer.Burst{TPM: burst}, Headroom: v.headroom, NoRefund: v.noRefund, MaxWait: time.Hour}
	if v.slidingSafe && w == time.Minute {
		// Config.SlidingWindow refills (TPM - burst) per minute; taking
		// the margin off TPM too keeps that refill at limit - v.burst.
		cfg.Limits.TPM, cfg.SlidingWindow = pl.p.providerTokens-margin, true
		return cfg, true
	}
	num := new(big.Int).Mul(big.NewInt(refill), big.NewInt(int64(time.Minute)))
	q, r := new(big.Int).QuoRem(num, big.NewInt(int64(w)), new(big.Int))
	cfg.Limits.TPM = q.Int64()
	return cfg, r.Sign() == 0
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
	if p.speed != p.speed || p.speed < minSpeed || p.speed > maxSpeed {
		bad("-speed %v: want %v to %v", p.speed, minSpeed, maxSpeed)
	} else if w := p.wall(p.window); p.window <= 0 || w < minWallWin || w > maxWallWin {
		bad("-window %v at -speed %v is %v of wall time: want %v to %v (pacer's token limits are per minute, and shorter windows drown in timer noise)",
			p.window, p.speed, w, minWallWin, maxWallWin)
	}
	if p.latency < 0 || p.latency > maxLatency {
		bad("-latency %v: want 0 to %v", p.latency, maxLatency)
	}
	if p.retries < 0 || p.retries > maxRetries {
		bad("-retries %d: want 0 to %d", p.retries, maxRetries)
	}
	return errs
}
