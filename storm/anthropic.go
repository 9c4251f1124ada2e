package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

// The anthropic scenario, in the simulated world: a provider allowing
// 30,000 input and 8,000 output tokens a minute apart (Anthropic's tier-1
// ITPM and OTPM for Claude Sonnet), charging max_tokens against the
// output limit when a call arrives. Half the jobs read (a 6,000-token
// prompt, 300 out), half write (a 500-token prompt, 2,000 out), shuffled,
// each using all its max_tokens, on 8 workers.
const (
	anthITPM    = 30_000
	anthOTPM    = 8_000
	anthJobs    = 60 // -jobs sets it
	anthWorkers = 8
	anthLatency = 2 * time.Second
)

// anthRow is one budget's run against the provider.
type anthRow struct {
	Label       string
	Seconds     float64
	Calls       int64
	RateLimited int64
	Failed      int
	WaitP50     float64 // ms
	WaitP95     float64
}

// anthResult is what the anthropic scenario measured.
type anthResult struct {
	FloorSeconds float64
	Jobs         int
	Rows         []anthRow
}

func buildAnthropic(pl *plan, rng *rand.Rand) {
	n := anthJobs
	if pl.set["jobs"] {
		n = pl.p.jobs
	}
	calls := make([]call, n)
	for i := range calls {
		if i%2 == 0 {
			calls[i] = call{group: "read", prompt: 6_000, maxTokens: 300, output: 300}
		} else {
			calls[i] = call{group: "write", prompt: 500, maxTokens: 2_000, output: 2_000}
		}
	}
	rng.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	pl.custom = func(ctx context.Context, pl *plan, be *backend, prog *progress) (scenarioReport, error) {
		return runAnthropic(ctx, pl, be, prog, calls)
	}
}

// anthFloor is the least time the provider's limits allow for calls, all
// there at the start: each limit's total past its first window's worth,
// at its rate; the slower of the two.
func anthFloor(calls []call, w time.Duration) time.Duration {
	var in, out int64
	for _, c := range calls {
		in += c.prompt
		out += c.maxTokens
	}
	f := math.Max(float64(in-anthITPM)/anthITPM, float64(out-anthOTPM)/anthOTPM)
	return time.Duration(math.Max(f, 0) * float64(w))
}

func runAnthropic(ctx context.Context, pl *plan, be *backend, prog *progress, calls []call) (scenarioReport, error) {
	p := pl.p
	w := p.wall(time.Minute)
	rep := scenarioReport{Name: pl.name, About: pl.about, Speed: p.speed, Redis: be.desc, Jobs: len(calls)}
	res := anthResult{FloorSeconds: anthFloor(calls, w).Seconds(), Jobs: len(calls)}
	id := runID()
	// As in every storm budget (see budgetConfig), a burst of the rate over
	// dispatchMargin less than the limit covers the moment between the
	// budget's admission and the provider's decision.
	burst := func(limit int64) int64 {
		return limit - int64(math.Ceil(float64(limit)*dispatchMargin.Seconds()/w.Seconds()))
	}
	rows := []struct {
		label string
		cfg   pacer.Config
		split bool
	}{
		{"separate rates: Rate{InputTokens, 30,000} and Rate{OutputTokens, 8,000} per minute", pacer.Config{Rates: []pacer.Rate{
			{Unit: pacer.InputTokens, Limit: anthITPM, Window: w, Burst: burst(anthITPM)},
			{Unit: pacer.OutputTokens, Limit: anthOTPM, Window: w, Burst: burst(anthOTPM)},
		}}, true},
		{"one combined rate: Rate{Tokens, 38,000 per minute} (ITPM + OTPM)", pacer.Config{Rates: []pacer.Rate{
			{Unit: pacer.Tokens, Limit: anthITPM + anthOTPM, Window: w, Burst: burst(anthITPM + anthOTPM)},
		}}, false},
	}
	for i, r := range rows {
		fp, _, c, stop, err := startLane(ctx, fakeprovider.Config{
			InputTokenLimit: anthITPM, OutputTokenLimit: anthOTPM, Window: w, Latency: p.wall(anthLatency), Refund: true,
		}, anthWorkers+16)
		if err != nil {
			return rep, err
		}
		cfg := r.cfg
		cfg.Name, cfg.MaxWait = fmt.Sprintf("storm:anthropic:%d:%s", i, id), time.Hour
		pc, err := pacer.New(be.rdb, cfg)
		if err != nil {
			stop()
			return rep, err
		}
		ln := &lane{p: pc, c: c, split: r.split, retries: 20}
		prog.begin(pl.name, r.label, len(calls), &recorder{})
		fp.ResetStats()
		start := time.Now()
		rs := ln.runWorkers(ctx, calls, anthWorkers, nil, prog.jobDone)
		row := anthRow{Label: r.label, Seconds: time.Since(start).Seconds()}
		prog.end()
		st := fp.Stats()
		stop()
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		waits, failed := waitsOf(rs, "")
		row.Calls, row.RateLimited, row.Failed = st.Calls, st.RateLimited, failed
		row.WaitP50, row.WaitP95 = quantile(waits, 50), quantile(waits, 95)
		res.Rows = append(res.Rows, row)
	}
	rep.Budgets = res
	rep.Table = anthTable(p, res)
	return rep, nil
}

func anthTable(p params, r anthResult) *customTable {
	t := &customTable{Header: []string{
		fmt.Sprintf("provider: %s input and %s output tokens per %v apart (ITPM, OTPM; -speed %g: a simulated minute), max_tokens charged on arrival, unused output given back; %v per call",
			thousands(anthITPM), thousands(anthOTPM), p.wall(time.Minute), p.speed, p.wall(anthLatency).Round(time.Millisecond)),
		fmt.Sprintf("%d jobs on %d workers, shuffled: half read (6,000 in, 300 out), half write (500 in, 2,000 out); each budget's burst is its limit less %v of its rate", r.Jobs, anthWorkers, dispatchMargin),
		fmt.Sprintf("floor %.2f s: the output tokens past the first minute's %s, at the OTPM", r.FloorSeconds, thousands(anthOTPM)),
	}}
	t.Cells = [][]string{{"budget", "seconds", "vs floor", "calls", "429s", "failed", "wait p50", "p95"}}
	for _, row := range r.Rows {
		t.Cells = append(t.Cells, []string{row.Label, fmt.Sprintf("%.2f", row.Seconds),
			fmt.Sprintf("%+.1f%%", (row.Seconds/r.FloorSeconds-1)*100), fmt.Sprint(row.Calls), fmt.Sprint(row.RateLimited),
			fmt.Sprint(row.Failed), dur(row.WaitP50), dur(row.WaitP95)})
	}
	t.Notes = []string{
		"the combined rate admits by input + output together: it lets writers through faster than the OTPM allows, and the provider answers 429",
	}
	return t
}
