package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// params are the knobs every scenario has. A scenario starts from
// baseParams, sets its own defaults, and then the flags given on the
// command line win.
type params struct {
	workers        int
	jobs           int
	tokens         int64  // per job: prompt + max_tokens
	output         amount // real output, of max_tokens
	providerTokens int64  // admitted per window
	providerReqs   int64  // calls admitted per window; 0 = no request limit
	window         time.Duration
	sliding        bool // the provider enforces a strict sliding window
	providerRefund bool // the provider gives unused max_tokens back when a call ends
	latency        time.Duration
	burst          amount // the shared budget's burst; zero = the scenario's default
	retries        int
	speed          float64
	margin         time.Duration // wall time a call may take from admission to the provider (-margin)
}

// baseParams is the published comparison: 6 workers, 30 jobs of 1,000
// tokens, a provider allowing 10,000 tokens per 5 seconds.
func baseParams() params {
	return params{
		workers: 6, jobs: 30, tokens: 1000, output: amount{frac: 1, isFrac: true},
		providerTokens: 10_000, window: 5 * time.Second, latency: 100 * time.Millisecond,
		retries: 6, speed: 1, margin: dispatchMargin,
	}
}

// wall converts a duration of the simulated world to wall time.
func (p params) wall(d time.Duration) time.Duration { return time.Duration(float64(d) / p.speed) }

// job is one LLM call to make.
type job struct {
	prompt, maxTokens, output int64
	priority                  pacer.Priority
	at                        time.Duration // arrival, wall time since the start
	direct                    bool          // runs on its own goroutine at arrival (a request handler), not from the worker queue
	text                      string        // the prompt the SDK rows send (sdkJobs); prompt is then its estimate
}

// charge is what the provider's limit counts: prompt + max_tokens.
func (j job) charge() int64 { return j.prompt + j.maxTokens }

// outsideTraffic is a caller that uses the provider without the budget.
type outsideTraffic struct {
	every time.Duration // wall time between calls
	call  job
}

// scenario is one story the storm can tell.
type scenario struct {
	name, about string
	defaults    func(*params)
	// build makes the jobs and the rest of the plan from the final params.
	build func(pl *plan, rng *rand.Rand)
}

func scenarios() []scenario {
	return append([]scenario{
		{"default", "the published comparison: one budget per worker against one shared budget",
			func(*params) {}, buildUniform},
		{"sliding", "a strict sliding-window provider: a full-limit burst gets 429s, a sliding-safe burst none",
			func(p *params) { p.sliding = true; p.speed = 2 }, buildUniform},
		{"mixed", "prompts of 500 to 50,000 tokens, answers shorter than max_tokens: refunds matter, if the provider makes them",
			func(p *params) {
				p.workers, p.jobs, p.providerTokens, p.speed = 16, 100, 300_000, 2
			}, buildMixed},
		{"bursty", "Pareto arrivals, 64 workers, 3,000 jobs, at 20x speed",
			func(p *params) {
				p.workers, p.jobs, p.providerTokens, p.speed = 64, 3000, 100_000, 20
			}, buildBursty},
		{"priority", "interactive calls beside a saturating batch job (pacer.Interactive vs pacer.Batch)",
			func(p *params) { p.jobs, p.speed = 60, 4 }, buildPriority},
		{"outside", "a caller outside the pacer takes 20% of the limit: Headroom leaves it room; the transport with header sync on and off",
			func(p *params) { p.jobs, p.speed = 40, 2 }, buildOutside},
		{"quota", "the credit runs out mid-run: jobs stop with ErrQuotaExhausted, no retries burned",
			func(p *params) { p.speed = 2 }, buildQuota},
		{"bottleneck", "Node bottleneck's test: 100 calls at once of 400 to 1,600 tokens, 24,000 tokens and 30 requests per strict sliding 10 s",
			func(p *params) {
				p.workers, p.jobs, p.providerTokens, p.providerReqs = 100, 100, 24_000, 30
				p.window, p.sliding, p.latency, p.speed = 10*time.Second, true, 500*time.Millisecond, 4
			}, buildSpread},
		{"sdk", "openai-go with its default retries, alone and through pacerhttp.NewTransport",
			func(p *params) { p.speed = 2 }, buildSDK},
		{"redis-down", "Redis lost for a third of the run, 3 pods: fail closed, fail open at each pod's share, fail open at the whole limit per pod",
			func(p *params) { p.jobs, p.speed = 90, 2 }, buildRedisDown},
		{"stream", "streamed chat jobs (openai-go NewStreaming): tokens reserved vs used, time to first byte",
			func(p *params) {
				p.jobs, p.speed, p.output, p.providerRefund = 60, 4, amount{frac: 0.4, isFrac: true}, true
			}, buildStream},
	}, budgetScenarios()...)
}

func scenarioNames() []string {
	var out []string
	for _, s := range scenarios() {
		out = append(out, s.name)
	}
	return out
}

func findScenario(name string) (scenario, bool) {
	for _, s := range scenarios() {
		if s.name == name {
			return s, true
		}
	}
	return scenario{}, false
}

// uniformJobs returns n jobs of the params' size, all there at the start.
func uniformJobs(p params, n int) []job {
	prompt := max(p.tokens/4, 1)
	maxTok := p.tokens - prompt
	out := p.output.of(maxTok)
	jobs := make([]job, n)
	for i := range jobs {
		jobs[i] = job{prompt: prompt, maxTokens: maxTok, output: out, priority: pacer.Interactive}
	}
	return jobs
}

func buildUniform(pl *plan, _ *rand.Rand) {
	pl.jobs = uniformJobs(pl.p, pl.p.jobs)
}

// buildSpread draws each job's charge uniformly from 40% to 160% of
// -tokens (400 to 1,600 by default), a quarter of it prompt, all there at
// the start.
func buildSpread(pl *plan, rng *rand.Rand) {
	p := pl.p
	lo, hi := max(p.tokens*2/5, 2), max(p.tokens*8/5, 2)
	for range p.jobs {
		size := p
		size.tokens = lo + rng.Int64N(hi-lo+1)
		pl.jobs = append(pl.jobs, uniformJobs(size, 1)[0])
	}
}

// buildMixed draws prompts log-uniformly from 500 to 50,000 tokens (-tokens
// sets the top), max_tokens from 256 to 4,096, and real output from 10% to
// 100% of max_tokens unless -output says otherwise. Calls take longer the
// more they write.
func buildMixed(pl *plan, rng *rand.Rand) {
	top := int64(50_000)
	if pl.set["tokens"] {
		top = max(pl.p.tokens, 501)
	}
	for range pl.p.jobs {
		prompt := int64(math.Round(500 * math.Exp(rng.Float64()*math.Log(float64(top)/500))))
		maxTok := 256 + rng.Int64N(4096-256+1)
		out := int64(math.Round(float64(maxTok) * (0.1 + 0.9*rng.Float64())))
		if pl.set["output"] {
			out = pl.p.output.of(maxTok)
		}
		pl.jobs = append(pl.jobs, job{prompt: prompt, maxTokens: maxTok, output: out})
	}
	lat := pl.p.wall(pl.p.latency)
	pl.latencyPerKTok = lat // per 1,000 output tokens
	pl.refundRows = true
}

// buildBursty spaces arrivals by a Pareto distribution of shape 1.1: most
// gaps are a tenth of the mean, so jobs come in bursts at ten times the
// mean rate, separated now and then by a long quiet spell. The mean rate is
// what the provider admits, so bursts overrun the limit and quiet spells
// refill it.
func buildBursty(pl *plan, rng *rand.Rand) {
	p := pl.p
	pl.jobs = uniformJobs(p, p.jobs)
	perJob := float64(p.tokens) / float64(p.providerTokens) * float64(p.wall(p.window)) // wall time per job at the limit
	const alpha = 1.3
	xm := perJob * (alpha - 1) / alpha // mean gap = xm·α/(α-1)
	var at float64
	for i := range pl.jobs {
		pl.jobs[i].at = time.Duration(at)
		at += xm / math.Pow(1-rng.Float64(), 1/alpha)
	}
}

// buildPriority runs p.jobs batch jobs on the workers and, beside them,
// interactive calls of a quarter of the job size arriving as a Poisson
// process at a quarter of the provider's rate, each on its own goroutine
// like a request handler, for as long as the batch job should take.
func buildPriority(pl *plan, rng *rand.Rand) {
	p := pl.p
	pl.jobs = uniformJobs(p, p.jobs)
	for i := range pl.jobs {
		pl.jobs[i].priority = pacer.Batch
	}
	small := p
	small.tokens = max(p.tokens/4, 2)
	ij := uniformJobs(small, 1)[0]
	ij.direct = true
	rate := float64(p.providerTokens) / p.wall(p.window).Seconds() // tokens per wall second
	mean := float64(ij.charge()) / (rate / 4) * float64(time.Second)
	// The batch alone would need (total - burst)/rate; with interactive
	// traffic taking a quarter it needs a third more.
	dur := float64(int64(p.jobs)*p.tokens-p.providerTokens) / rate * 4 / 3 * float64(time.Second)
	for at := rng.ExpFloat64() * mean; at < dur; at += rng.ExpFloat64() * mean {
		j := ij
		j.at = time.Duration(at)
		pl.jobs = append(pl.jobs, j)
	}
}

// buildOutside adds a caller that sends a quarter-size call straight to the
// provider at 20% of its token rate, and a shared row with Headroom 0.2.
func buildOutside(pl *plan, _ *rand.Rand) {
	p := pl.p
	pl.jobs = sdkJobs(p, p.jobs) // the transport rows send them through openai-go
	pl.sdkRows = true
	small := p
	small.tokens = max(p.tokens/4, 2)
	call := uniformJobs(small, 1)[0]
	rate := float64(p.providerTokens) / p.wall(p.window).Seconds()
	pl.outside = &outsideTraffic{call: call, every: time.Duration(float64(call.charge()) / (0.2 * rate) * float64(time.Second))}
	pl.headroom = 0.2
}

// buildQuota gives the provider credit for two thirds of the jobs' real
// usage: the last third meet an exhausted quota.
func buildQuota(pl *plan, _ *rand.Rand) {
	pl.jobs = uniformJobs(pl.p, pl.p.jobs)
	var used int64
	for _, j := range pl.jobs {
		used += j.prompt + j.output
	}
	pl.quota = max(used*2/3, 1)
}

// sortByArrival orders jobs by arrival, keeping the order of equals.
func sortByArrival(jobs []job) {
	slices.SortStableFunc(jobs, func(a, b job) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
}

// checkJobs rejects jobs the limits can never admit.
func (pl *plan) checkJobs() error {
	for _, j := range pl.jobs {
		if j.charge() > pl.p.providerTokens {
			return fmt.Errorf("scenario %s: a job of %d tokens (prompt + max_tokens) exceeds the provider's limit of %d per window: it could never be admitted; raise -provider-tokens or lower -tokens",
				pl.name, j.charge(), pl.p.providerTokens)
		}
	}
	return nil
}
