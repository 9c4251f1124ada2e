package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/retry"
	"github.com/redis/go-redis/v9"
)

// The deployments scenario, in the simulated world (-speed divides it):
// one model served by three deployments of 30,000, 20,000 and 10,000
// tokens a minute (3:2:1), each its own provider and its own budget. An
// outside caller (another service, with its own Pacer on the second
// deployment's budget) sends a call every so often, a fifth of that
// deployment's rate. 300 jobs of 1,000 tokens, all there at the start, on
// 64 workers: five times the largest deployment's minute, so that no
// deployment alone serves them in time and the calls must be spread.
const (
	depJobs    = 300 // -jobs sets it
	depWorkers = 64
	depCall    = 1_000
	depLatency = time.Second
	depOutside = 0.2 // of the second deployment's rate
	depRetries = 6
)

// depSizes returns the deployments' tokens per minute, largest first.
func depSizes() []int64 { return []int64{30_000, 20_000, 10_000} }

// depHow is how a row sends each call to a deployment.
type depHow int

const (
	depFill   depHow = iota // a pacer.Group, FillInOrder
	depSpread               // a pacer.Group, Spread with the sizes as weights
	depMost                 // a pacer.Group, MostRoom
	depRandom               // one budget per deployment, picked at random per call
	depRound                // one budget per deployment, in turn
)

// String is the row's label.
func (h depHow) String() string {
	switch h {
	case depFill:
		return "Group, FillInOrder"
	case depSpread:
		return "Group, Spread (weights 3:2:1)"
	case depMost:
		return "Group, MostRoom"
	case depRandom:
		return "by hand: a deployment at random per call"
	}
	return "by hand: deployments in turn (round robin)"
}

// depRow is one way of routing, measured.
type depRow struct {
	Label        string
	Seconds      float64
	FloorSeconds float64 // see depFloor
	Calls        int64   // the three providers' calls, the outside caller's included
	RateLimited  int64
	Failed       int
	WaitP50      float64 // ms
	WaitP95      float64
	// Share is each deployment's part of the tokens the three providers
	// admitted (the outside caller's included).
	Share []float64
	// OutsideServed is how many of the outside caller's calls were served
	// before the jobs ended.
	OutsideServed int64
}

// depResult is what the deployments scenario measured.
type depResult struct {
	Jobs  int
	Sizes []int64
	Rows  []depRow
}

func buildDeployments(pl *plan, _ *rand.Rand) {
	n := depJobs
	if pl.set["jobs"] {
		n = pl.p.jobs
	}
	prompt := int64(depCall / 4)
	calls := make([]call, n)
	for i := range calls {
		calls[i] = call{prompt: prompt, maxTokens: depCall - prompt, output: depCall - prompt}
	}
	pl.custom = func(ctx context.Context, pl *plan, be *backend, prog *progress) (scenarioReport, error) {
		return runDeployments(ctx, pl, be, prog, calls)
	}
}

// depOutsideEvery is the wall time between the outside caller's calls.
func depOutsideEvery(w time.Duration) time.Duration {
	rate := depOutside * float64(depSizes()[1]) / w.Seconds() // tokens per wall second
	return time.Duration(float64(depCall) / rate * float64(time.Second))
}

// depFloor is the least time the three providers together allow for the
// calls and the outside caller's served ones (served of them), all there
// at the start: one bucket holding their capacities and refilling at
// their rates. The outside caller's calls count as they were served, not
// as they were sent: those that waited past the end of the jobs gave the
// jobs their room.
func depFloor(calls []call, served int64, w time.Duration) time.Duration {
	var capacity float64
	for _, s := range depSizes() {
		capacity += float64(s)
	}
	var jobs []job
	for _, c := range calls {
		jobs = append(jobs, job{prompt: c.prompt, maxTokens: c.maxTokens, output: c.output})
	}
	for range served {
		jobs = append(jobs, depOutsideJob())
	}
	return bucketFinish(jobs, capacity, capacity/w.Seconds(), 0, false, reqBucket{})
}

// depOutsideJob is the outside caller's call.
func depOutsideJob() job {
	return job{prompt: depCall / 4, maxTokens: depCall - depCall/4, output: depCall - depCall/4}
}

// depConfig is deployment i's budget: its provider's limit per wall
// window w, with a burst dispatchMargin of refill below it (see
// budgetConfig), and the group's hash tag.
func depConfig(name, tag string, limit int64, w time.Duration) pacer.Config {
	burst := limit - int64(math.Ceil(float64(limit)*dispatchMargin.Seconds()/w.Seconds()))
	return pacer.Config{
		Name: name, HashTag: tag,
		Rates:    []pacer.Rate{{Unit: pacer.Tokens, Limit: limit, Window: w, Burst: burst}},
		NoRefund: true, MaxWait: time.Hour,
	}
}

func runDeployments(ctx context.Context, pl *plan, be *backend, prog *progress, calls []call) (scenarioReport, error) {
	p := pl.p
	rep := scenarioReport{Name: pl.name, About: pl.about, Speed: p.speed, Redis: be.desc, Jobs: len(calls)}
	res := depResult{Jobs: len(calls), Sizes: depSizes()}
	if err := warmRedis(ctx, be.rdb, depWorkers); err != nil {
		return rep, err
	}
	id := runID()
	for _, how := range []depHow{depFill, depSpread, depMost, depRandom, depRound} {
		row, err := runDepRow(ctx, pl, be, prog, calls, how, fmt.Sprintf("storm:deployments:%d:%s", how, id))
		if err != nil {
			return rep, fmt.Errorf("scenario %s, %s: %w", pl.name, how.String(), err)
		}
		res.Rows = append(res.Rows, row)
	}
	rep.Budgets = res
	rep.Table = depTable(p, res)
	return rep, nil
}

// runDepRow starts three providers and their budgets (named after base),
// the outside caller, and runs the calls on the workers, routed by how.
func runDepRow(ctx context.Context, pl *plan, be *backend, prog *progress, calls []call, how depHow, base string) (depRow, error) {
	w := pl.p.wall(time.Minute)
	sizes := depSizes()
	fps := make([]*fakeprovider.Provider, len(sizes))
	cs := make([]*chatClient, len(sizes))
	ps := make([]*pacer.Pacer, len(sizes))
	at := map[*pacer.Pacer]int{}
	var ds []pacer.Deployment
	for i, size := range sizes {
		fp, _, c, stop, err := startLane(ctx, fakeprovider.Config{TokenLimit: size, Window: w, Latency: pl.p.wall(depLatency)}, depWorkers+16)
		if err != nil {
			return depRow{}, err
		}
		defer stop()
		p, err := pacer.New(be.rdb, depConfig(fmt.Sprintf("%s:%c", base, 'a'+i), base, size, w))
		if err != nil {
			return depRow{}, err
		}
		fps[i], cs[i], ps[i], at[p] = fp, c, p, i
		ds = append(ds, pacer.Deployment{Pacer: p, Weight: float64(size)})
	}
	// The outside caller's own handle on the second deployment's budget.
	op, err := pacer.New(be.rdb, depConfig(ps[1].Config().Name, base, sizes[1], w))
	if err != nil {
		return depRow{}, err
	}
	var g *pacer.Group
	if how == depFill || how == depSpread || how == depMost {
		policy := pacer.FillInOrder
		switch how {
		case depSpread:
			policy = pacer.Spread
		case depMost:
			policy = pacer.MostRoom
		}
		if g, err = pacer.NewGroup(pacer.GroupConfig{Deployments: ds, Policy: policy}); err != nil {
			return depRow{}, err
		}
	}
	var turn atomic.Int64
	do := func(ctx context.Context, c call) callResult {
		r := callResult{call: c, start: time.Now()}
		j := job{prompt: c.prompt, maxTokens: c.maxTokens, output: c.output}
		send := func(ctx context.Context, i int) (usage, error) {
			t := time.Now()
			u, err := cs[i].chat(ctx, j, false)
			r.inCalls += time.Since(t)
			r.attempts++
			return u, err
		}
		req := pacer.Request{Tokens: j.charge()}
		retries := retry.WithRetries(depRetries)
		switch how {
		case depFill, depSpread, depMost:
			r.used, r.err = retry.RunGroup(ctx, g, req, func(ctx context.Context, p *pacer.Pacer) (usage, error) {
				return send(ctx, at[p])
			}, usage.total, retries)
		default:
			i := rand.IntN(len(ps))
			if how == depRound {
				i = int((turn.Add(1) - 1) % int64(len(ps)))
			}
			r.used, r.err = retry.Run(ctx, ps[i], req, func(ctx context.Context) (usage, error) { return send(ctx, i) }, usage.total, retries)
		}
		r.end = time.Now()
		return r
	}
	for _, fp := range fps {
		fp.ResetStats()
	}
	prog.begin(pl.name, how.String(), len(calls), &recorder{})
	octx, stopOutside := context.WithCancel(ctx)
	served := make(chan int64, 1)
	start := time.Now()
	// The outside caller was there first: its first call goes before the
	// jobs arrive. Sent among them, it reached Redis behind as many of
	// their turns as the race let in, and on a fast run waited past the
	// run's end (served: 0). Its later calls come among the jobs'.
	first := depOutsideCall(ctx, op, cs[1])
	go func() { served <- first + depOutsideCaller(octx, op, cs[1], depOutsideEvery(w)) }()
	rs := runWorkers(ctx, calls, depWorkers, nil, prog.jobDone, do)
	row := depRow{Label: how.String(), Seconds: time.Since(start).Seconds()}
	stopOutside()
	row.OutsideServed = <-served
	row.FloorSeconds = depFloor(calls, row.OutsideServed, w).Seconds()
	prog.end()
	if err := ctx.Err(); err != nil {
		return depRow{}, err
	}
	var total int64
	for _, fp := range fps {
		st := fp.Stats()
		row.Calls += st.Calls
		row.RateLimited += st.RateLimited
		total += st.TokensAdmitted
	}
	for _, fp := range fps {
		row.Share = append(row.Share, float64(fp.Stats().TokensAdmitted)/math.Max(float64(total), 1))
	}
	waits, failed := waitsOf(rs, "")
	row.Failed = failed
	row.WaitP50, row.WaitP95 = quantile(waits, 50), quantile(waits, 95)
	return row, nil
}

// depOutsideCaller sends a call through p to c every `every` until ctx
// ends, the first one `every` after it starts, each on its own
// goroutine; it returns how many were served. A call still waiting when
// ctx ends gives up.
func depOutsideCaller(ctx context.Context, p *pacer.Pacer, c *chatClient, every time.Duration) int64 {
	var served atomic.Int64
	var wg sync.WaitGroup
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			wg.Go(func() { served.Add(depOutsideCall(ctx, p, c)) })
		case <-ctx.Done():
			wg.Wait()
			return served.Load()
		}
	}
}

// depOutsideCall sends one of the outside caller's calls through p to c,
// waiting for the budget as any caller of it does, and returns 1 if it
// was served, 0 if not.
func depOutsideCall(ctx context.Context, p *pacer.Pacer, c *chatClient) int64 {
	j := depOutsideJob()
	_, err := retry.Run(ctx, p, pacer.Request{Tokens: j.charge()}, func(ctx context.Context) (usage, error) {
		return c.chat(ctx, j, true)
	}, usage.total)
	if err != nil {
		return 0
	}
	return 1
}

func depTable(p params, r depResult) *customTable {
	var sizes, capShare []string
	var sum int64
	for _, s := range r.Sizes {
		sum += s
	}
	for _, s := range r.Sizes {
		sizes = append(sizes, thousands(s))
		capShare = append(capShare, fmt.Sprintf("%.0f%%", 100*float64(s)/float64(sum)))
	}
	t := &customTable{Header: []string{
		fmt.Sprintf("three deployments of %s tokens per %v (-speed %g: a simulated minute), each its own provider (token bucket, max_tokens kept, %v per call) and budget; capacity shares %s",
			strings.Join(sizes, ", "), p.wall(time.Minute), p.speed, p.wall(depLatency).Round(time.Millisecond), strings.Join(capShare, " / ")),
		fmt.Sprintf("%d jobs of %s tokens on %d workers, all there at the start; an outside caller with its own Pacer on the second deployment's budget sends one at the start, then one every %v (%g of its rate)",
			r.Jobs, thousands(depCall), depWorkers, depOutsideEvery(p.wall(time.Minute)).Round(time.Millisecond), depOutside),
		"floor: the least time the three limits together allow for the jobs and the outside calls served in the row, each served the moment any has room",
	}}
	t.Cells = [][]string{{"routing", "seconds", "floor", "vs floor", "calls", "429s", "failed", "wait p50", "p95", "share a / b / c", "outside served"}}
	for _, row := range r.Rows {
		var share []string
		for _, s := range row.Share {
			share = append(share, fmt.Sprintf("%.0f%%", 100*s))
		}
		t.Cells = append(t.Cells, []string{row.Label, fmt.Sprintf("%.2f", row.Seconds), fmt.Sprintf("%.2f", row.FloorSeconds),
			fmt.Sprintf("%+.1f%%", (row.Seconds/row.FloorSeconds-1)*100), fmt.Sprint(row.Calls), fmt.Sprint(row.RateLimited),
			fmt.Sprint(row.Failed), dur(row.WaitP50), dur(row.WaitP95), strings.Join(share, " / "), fmt.Sprint(row.OutsideServed)})
	}
	t.Notes = []string{
		"share: each deployment's part of the tokens the three providers admitted, the outside caller's included",
		"by hand, a third of the calls wait on the smallest deployment while the others have room: the run takes as long as its queue",
	}
	return t
}

// warmRedis readies rdb for n callers at once before a first row, which
// would otherwise pay alone for what every later row finds done: the
// scripts are loaded (else n workers meet NOSCRIPT at once and Redis
// compiles each script n times), and n connections are open (else the
// first calls each dial one).
func warmRedis(ctx context.Context, rdb redis.UniversalClient, n int) error {
	for _, sc := range []*redis.Script{lua.Define, lua.Route, lua.Acquire, lua.Settle, lua.Pause} {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			return err
		}
	}
	errs := make(chan error, n)
	for range n {
		go func() { errs <- rdb.Ping(ctx).Err() }()
	}
	var err error
	for range n {
		err = errors.Join(err, <-errs)
	}
	return err
}
