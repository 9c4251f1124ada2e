package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

// The spend scenario: a daily cap of $2 in micro-dollars on gpt-4o's
// prices, 16 workers running jobs of a 2,000-token prompt and up to 1,000
// tokens out (each using 10% to 100% of it) until the cap refuses them.
// The day never turns during the run, so what the cap admits is all there
// is.
const (
	spendCap     = 2_000_000 // µ$: $2.00
	spendWorkers = 16
	spendJobs    = 400 // more than the cap admits
	spendPrompt  = 2_000
	spendMax     = 1_000
	spendModel   = "gpt-4o"
	spendLatency = 2 * time.Second
)

// spendPrice is gpt-4o's: $2.50, $1.25 and $10 a million tokens, in µ$.
var spendPrice = pacer.Price{Input: 2_500_000, CachedInput: 1_250_000, Output: 10_000_000}

// spendRow is one way of keeping the cap.
type spendRow struct {
	Label     string
	Served    int   // calls answered
	Refused   int   // calls the cap refused
	Spent     int64 // µ$: what the answered calls cost, at the provider's usage
	Overshoot int64 // µ$: Spent past the cap
	// Counted is the budget's own count of what was spent (the cap less
	// its level), for the pacer row; -1 for the other.
	Counted int64
	Seconds float64
}

// spendResult is what the spend scenario measured.
type spendResult struct {
	Cap       int64
	WorstCall int64 // µ$: what one call reserves
	Rows      []spendRow
}

func buildSpend(pl *plan, rng *rand.Rand) {
	calls := make([]call, spendJobs)
	for i := range calls {
		out := int64(float64(spendMax) * (0.1 + 0.9*rng.Float64()))
		calls[i] = call{model: spendModel, prompt: spendPrompt, maxTokens: spendMax, output: max(out, 1)}
	}
	pl.custom = func(ctx context.Context, pl *plan, be *backend, prog *progress) (scenarioReport, error) {
		return runSpend(ctx, pl, be, prog, calls)
	}
}

// cost is what a call that used u costs, in µ$.
func cost(u usage) int64 {
	return int64(float64(u.prompt)*spendPrice.Input/1e6 + float64(u.output)*spendPrice.Output/1e6)
}

func runSpend(ctx context.Context, pl *plan, be *backend, prog *progress, calls []call) (scenarioReport, error) {
	p := pl.p
	rep := scenarioReport{Name: pl.name, About: pl.about, Speed: p.speed, Redis: be.desc, Jobs: len(calls)}
	worst := int64(float64(spendPrompt)*spendPrice.Input/1e6 + float64(spendMax)*spendPrice.Output/1e6)
	res := spendResult{Cap: spendCap, WorstCall: worst}
	pcfg := fakeprovider.Config{Latency: p.wall(spendLatency)}

	// The budget: a sliding day of spend, worst case reserved, settled at
	// cost.
	{
		_, _, c, stop, err := startLane(ctx, pcfg, spendWorkers+16)
		if err != nil {
			return rep, err
		}
		cfg := pacer.Config{
			Name:   "storm:spend:" + runID(),
			Rates:  []pacer.Rate{{Unit: pacer.Spend, Limit: spendCap, Window: 24 * time.Hour, Sliding: true}},
			Prices: map[string]pacer.Price{spendModel: spendPrice},
		}
		pc, err := pacer.New(be.rdb, cfg)
		if err != nil {
			stop()
			return rep, err
		}
		ln := &lane{p: pc, c: c, split: true, retries: 6}
		prog.begin(pl.name, "pacer Spend rate", len(calls), &recorder{})
		start := time.Now()
		rs := ln.runWorkers(ctx, calls, spendWorkers, refusedByCap, prog.jobDone)
		row := spendRow{Label: "pacer Rate{Spend, $2 per 24h, Sliding}: worst case reserved, settled at cost", Seconds: time.Since(start).Seconds()}
		prog.end()
		stop()
		for _, r := range rs {
			switch {
			case r.start.IsZero():
			case r.err == nil:
				row.Served++
				row.Spent += cost(r.used)
			case refusedByCap(r.err):
				row.Refused++
			default:
				return rep, fmt.Errorf("spend: a call failed: %w", r.err)
			}
		}
		s, err := pc.Snapshot(ctx)
		if err != nil {
			return rep, err
		}
		if len(s.Rates) != 1 {
			return rep, fmt.Errorf("spend: the budget's snapshot has %d rates; want 1", len(s.Rates))
		}
		row.Counted = spendCap - int64(s.Rates[0].Level)
		row.Overshoot = max(row.Spent-spendCap, 0)
		res.Rows = append(res.Rows, row)
	}

	// Without a reservation: each worker checks what has been spent, calls,
	// then adds what the call cost. Exact in one process, and still over.
	{
		_, _, c, stop, err := startLane(ctx, pcfg, spendWorkers+16)
		if err != nil {
			return rep, err
		}
		var spent atomic.Int64
		var next atomic.Int64
		var served, refused atomic.Int64
		prog.begin(pl.name, "check, then add the cost", len(calls), &recorder{})
		start := time.Now()
		done := make(chan error, spendWorkers)
		for range spendWorkers {
			go func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(calls) {
						done <- nil
						return
					}
					if spent.Load() >= spendCap {
						refused.Add(1)
						done <- nil
						return
					}
					j := calls[i]
					u, err := c.chat(ctx, job{prompt: j.prompt, maxTokens: j.maxTokens, output: j.output}, false)
					if err != nil {
						done <- err
						return
					}
					served.Add(1)
					spent.Add(cost(u))
					prog.jobDone()
				}
			}()
		}
		var errs []error
		for range spendWorkers {
			errs = append(errs, <-done)
		}
		prog.end()
		stop()
		if err := errors.Join(errs...); err != nil {
			return rep, fmt.Errorf("spend: a call failed: %w", err)
		}
		row := spendRow{Label: "check what was spent, call, add the cost (one process, no reservation)", Seconds: time.Since(start).Seconds(),
			Served: int(served.Load()), Refused: int(refused.Load()), Spent: spent.Load(), Counted: -1}
		row.Overshoot = max(row.Spent-spendCap, 0)
		res.Rows = append(res.Rows, row)
	}
	rep.Budgets = res
	rep.Table = spendTable(p, res)
	return rep, nil
}

// refusedByCap says err is the cap refusing a call: its room comes back
// only as the day slides, far past any wait bound.
func refusedByCap(err error) bool { return errors.Is(err, pacer.ErrWaitTimeout) }

func spendTable(p params, r spendResult) *customTable {
	usd := func(micro int64) string { return fmt.Sprintf("$%.4f", float64(micro)/1e6) }
	t := &customTable{Header: []string{
		fmt.Sprintf("a daily cap of %s on %s's prices ($2.50, $1.25 cached, $10 a million tokens in and out); %d workers run jobs of %s prompt tokens and max_tokens %s, using 10-100%% of it, until the cap refuses them",
			usd(spendCap), spendModel, spendWorkers, thousands(spendPrompt), thousands(spendMax)),
		fmt.Sprintf("a call's worst case: %s; provider latency %v (-speed %g)", usd(r.WorstCall), p.wall(spendLatency).Round(time.Millisecond), p.speed),
	}}
	t.Cells = [][]string{{"", "served", "refused", "spent", "of the cap", "overshoot", "budget's count"}}
	for _, row := range r.Rows {
		counted := "-"
		if row.Counted >= 0 {
			counted = usd(row.Counted)
		}
		t.Cells = append(t.Cells, []string{row.Label, fmt.Sprint(row.Served), fmt.Sprint(row.Refused), usd(row.Spent),
			fmt.Sprintf("%.2f%%", 100*float64(row.Spent)/float64(spendCap)), usd(row.Overshoot), counted})
	}
	t.Notes = []string{
		"spent: what the answered calls cost at the usage the provider reported; refused: calls the cap turned away (a worker stops at its first)",
		"the budget reserves each call's worst case, so what is in flight can never pass the cap; what is left is what the last reservations could not fit",
	}
	return t
}
