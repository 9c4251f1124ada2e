package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/llmpacer/llmpacer/estimate"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

// The spend scenario: a daily cap of $2 in micro-dollars on Claude Sonnet's
// prices, 16 workers running jobs of a prompt estimated at 2,000 tokens and
// up to 1,000 tokens out (each using 10% to 100% of it) until the cap
// refuses them. The estimate undercounts as it does for Claude: the
// provider counts 20% more prompt tokens. The day never turns during the
// run, so what the cap admits is all there is.
const (
	spendCap        = 2_000_000 // µ$: $2.00
	spendWorkers    = 16
	spendJobs       = 400 // more than the cap admits
	spendPrompt     = 2_000
	spendUndercount = 0.20 // the provider counts 20% more prompt tokens
	spendMax        = 1_000
	spendModel      = "claude-sonnet-4-5"
	spendLatency    = 2 * time.Second
)

// spendPrice is Claude Sonnet 4.5's: $3, $0.30 (cache reads) and $15 a
// million tokens, in µ$.
var spendPrice = pacer.Price{Input: 3_000_000, CachedInput: 300_000, Output: 15_000_000}

// spendRow is one way of keeping the cap.
type spendRow struct {
	Label     string
	Served    int   // calls answered
	Refused   int   // calls the cap refused
	Spent     int64 // µ$: what the answered calls cost, at the provider's usage
	Overshoot int64 // µ$: Spent past the cap
	// Over counts the answered calls that cost more than they reserved,
	// for the pacer rows; -1 for the other.
	Over int
	// Counted is the budget's own count of what was spent (the cap less
	// its level), for the pacer rows; -1 for the other.
	Counted int64
	Seconds float64
}

// spendResult is what the spend scenario measured.
type spendResult struct {
	Cap int64
	// WorstCall is what one call reserves with Claude's default margin;
	// Estimated what it reserves with none, at the estimate as it is.
	WorstCall, Estimated int64
	// Excess is the most one call costs beyond Estimated: what its
	// prompt's undercount costs when it uses all of its output.
	Excess int64
	Rows   []spendRow
}

func buildSpend(pl *plan, rng *rand.Rand) {
	calls := make([]call, spendJobs)
	for i := range calls {
		out := int64(float64(spendMax) * (0.1 + 0.9*rng.Float64()))
		calls[i] = call{model: spendModel, prompt: spendPrompt, realPrompt: spendRealPrompt, maxTokens: spendMax, output: max(out, 1)}
	}
	pl.custom = func(ctx context.Context, pl *plan, be *backend, prog *progress) (scenarioReport, error) {
		return runSpend(ctx, pl, be, prog, calls)
	}
}

// spendRealPrompt is the prompt the provider counts.
const spendRealPrompt = spendPrompt * (1 + spendUndercount)

// cost is what a call that used u costs, in µ$.
func cost(u usage) int64 {
	return int64(float64(u.prompt)*spendPrice.Input/1e6 + float64(u.output)*spendPrice.Output/1e6)
}

func runSpend(ctx context.Context, pl *plan, be *backend, prog *progress, calls []call) (scenarioReport, error) {
	p := pl.p
	rep := scenarioReport{Name: pl.name, About: pl.about, Speed: p.speed, Redis: be.desc, Jobs: len(calls)}
	margin := estimate.InputMargin(spendModel)
	none := spendPrice
	none.InputMargin = -1
	one := call{model: spendModel, prompt: spendPrompt, maxTokens: spendMax}
	res := spendResult{Cap: spendCap, WorstCall: reserved(spendPrice, one), Estimated: reserved(none, one)}
	res.Excess = cost(usage{prompt: spendRealPrompt, output: spendMax}) - res.Estimated
	pcfg := fakeprovider.Config{Latency: p.wall(spendLatency)}

	// The budget: a sliding day of spend, the worst case reserved with
	// the model's default margin on the prompt, settled at cost; then the
	// same with no margin, the estimate taken as it is.
	for _, m := range []struct {
		label  string
		margin float64 // Price.InputMargin
	}{
		{fmt.Sprintf("pacer Rate{Spend, $2 per 24h, Sliding}: the prompt reserved +%.0f%% (Claude's default margin)", 100*margin), 0},
		{"the same with InputMargin -1: the prompt reserved at its estimate", -1},
	} {
		row, err := runSpendPacer(ctx, pcfg, be, pl, prog, calls, m.label, m.margin)
		if err != nil {
			return rep, err
		}
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
					u, err := c.chat(ctx, job{prompt: cmp.Or(j.realPrompt, j.prompt), maxTokens: j.maxTokens, output: j.output}, false)
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
			Served: int(served.Load()), Refused: int(refused.Load()), Spent: spent.Load(), Over: -1, Counted: -1}
		row.Overshoot = max(row.Spent-spendCap, 0)
		res.Rows = append(res.Rows, row)
	}
	rep.Budgets = res
	rep.Table = spendTable(p, res)
	return rep, nil
}

// runSpendPacer runs the jobs through a pacer budget whose price has the
// input margin given, until the cap refuses every worker.
func runSpendPacer(ctx context.Context, pcfg fakeprovider.Config, be *backend, pl *plan, prog *progress, calls []call, label string, margin float64) (spendRow, error) {
	_, _, c, stop, err := startLane(ctx, pcfg, spendWorkers+16)
	if err != nil {
		return spendRow{}, err
	}
	defer stop()
	price := spendPrice
	price.InputMargin = margin
	cfg := pacer.Config{
		Name:   "storm:spend:" + runID(),
		Rates:  []pacer.Rate{{Unit: pacer.Spend, Limit: spendCap, Window: 24 * time.Hour, Sliding: true}},
		Prices: map[string]pacer.Price{spendModel: price},
	}
	pc, err := pacer.New(be.rdb, cfg)
	if err != nil {
		return spendRow{}, err
	}
	ln := &lane{p: pc, c: c, split: true, retries: 6}
	prog.begin(pl.name, label, len(calls), &recorder{})
	start := time.Now()
	rs := ln.runWorkers(ctx, calls, spendWorkers, refusedByCap, prog.jobDone)
	row := spendRow{Label: label, Seconds: time.Since(start).Seconds()}
	prog.end()
	for _, r := range rs {
		switch {
		case r.start.IsZero():
		case r.err == nil:
			row.Served++
			row.Spent += cost(r.used)
			if cost(r.used) > reserved(price, r.call) {
				row.Over++
			}
		case refusedByCap(r.err):
			row.Refused++
		default:
			return row, fmt.Errorf("spend: a call failed: %w", r.err)
		}
	}
	s, err := pc.Snapshot(ctx)
	if err != nil {
		return row, err
	}
	if len(s.Rates) != 1 {
		return row, fmt.Errorf("spend: the budget's snapshot has %d rates; want 1", len(s.Rates))
	}
	row.Counted = spendCap - int64(s.Rates[0].Level)
	row.Overshoot = max(row.Spent-spendCap, 0)
	return row, nil
}

// reserved is what a call reserves under price, as the budget does: the
// prompt's estimate with the margin, and the output cap.
func reserved(price pacer.Price, c call) int64 {
	m := max(price.InputMargin, 0)
	if price.InputMargin == 0 {
		m = estimate.InputMargin(c.model)
	}
	return int64(math.Ceil(float64(c.prompt)*(1+m)*price.Input/1e6 + float64(c.maxTokens)*price.Output/1e6))
}

// refusedByCap says err is the cap refusing a call: its room comes back
// only as the day slides, far past any wait bound.
func refusedByCap(err error) bool { return errors.Is(err, pacer.ErrWaitTimeout) }

func spendTable(p params, r spendResult) *customTable {
	usd := func(micro int64) string { return fmt.Sprintf("$%.4f", float64(micro)/1e6) }
	t := &customTable{Header: []string{
		fmt.Sprintf("a daily cap of %s on %s's prices ($3, $0.30 cached, $15 a million tokens in and out); %d workers run jobs of a prompt estimated at %s tokens (the provider counts %.0f%% more) and max_tokens %s, using 10-100%% of it, until the cap refuses them",
			usd(spendCap), spendModel, spendWorkers, thousands(spendPrompt), 100*spendUndercount, thousands(spendMax)),
		fmt.Sprintf("a call reserves %s with the default margin, %s without; with no margin it may cost up to %s more; provider latency %v (-speed %g)",
			usd(r.WorstCall), usd(r.Estimated), usd(r.Excess), p.wall(spendLatency).Round(time.Millisecond), p.speed),
	}}
	t.Cells = [][]string{{"", "served", "refused", "spent", "of the cap", "overshoot", "over their reservation", "budget's count"}}
	for _, row := range r.Rows {
		counted, over := "-", "-"
		if row.Counted >= 0 {
			counted = usd(row.Counted)
		}
		if row.Over >= 0 {
			over = fmt.Sprint(row.Over)
		}
		t.Cells = append(t.Cells, []string{row.Label, fmt.Sprint(row.Served), fmt.Sprint(row.Refused), usd(row.Spent),
			fmt.Sprintf("%.2f%%", 100*float64(row.Spent)/float64(spendCap)), usd(row.Overshoot), over, counted})
	}
	t.Notes = []string{
		"spent: what the answered calls cost at the usage the provider reported; refused: calls the cap turned away (a worker stops at its first)",
		"with the margin every call costs at most what it reserved, so what is in flight can never pass the cap; without it a call may cost more, and the cap can be passed by what the calls in flight exceed their reservations",
	}
	return t
}
