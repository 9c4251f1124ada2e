package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

// runPlan runs every row of a scenario, one after the other, each against
// a fresh provider and (for the shared rows) a fresh budget.
func runPlan(ctx context.Context, pl *plan, be *backend, prog *progress) (scenarioReport, error) {
	if pl.custom != nil {
		return pl.custom(ctx, pl, be, prog)
	}
	rep := newScenarioReport(pl, be)
	var b [4]byte
	_, _ = rand.Read(b[:])
	runID := hex.EncodeToString(b[:])
	for i, v := range pl.rows {
		row, err := runRow(ctx, pl, i, be, fmt.Sprintf("storm:%s:%d:%s", pl.name, i, runID), prog)
		if err != nil {
			return rep, fmt.Errorf("scenario %s, %s: %w", pl.name, v.label, err)
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.binTimelines()
	return rep, nil
}

// runRow runs the plan's jobs in one mode and reads the provider's counters.
// With -procs the jobs run in child processes (procs.go); the provider is
// served here either way.
func runRow(ctx context.Context, pl *plan, i int, be *backend, budgetName string, prog *progress) (rowResult, error) {
	v := pl.rows[i]
	pcfg := pl.provider
	pcfg.Refund = v.providerRefund
	fp, rec, srv, err := startProvider(pcfg)
	if err != nil {
		return rowResult{}, err
	}
	defer srv.Close()
	if pl.procs > 1 {
		return runRowProcs(ctx, pl, i, be, budgetName, prog, fp, rec, srv.URL)
	}
	conns := pl.p.workers + 16
	c := newChatClient(srv.URL, conns)
	defer c.close()
	if err := c.warm(ctx, min(conns, 128)); err != nil {
		return rowResult{}, err
	}
	rs, err := setupRow(pl, v, be, budgetName, c)
	if err != nil {
		return rowResult{}, err
	}
	row := rs.row

	cmds0 := be.cmds.Load()
	start := time.Now()
	fp.ResetStats()
	rec.reset(start)
	octx, stopOutside := context.WithCancel(ctx)
	outside := make(chan outsideCount, 1)
	if pl.outside != nil {
		go func() { outside <- runOutside(octx, pl.outside, c) }()
	}
	prog.begin(pl.name, v.label, len(pl.jobs), rec)
	if rs.rig != nil {
		rs.rig.begin(ctx, start)
	}
	results := runJobs(ctx, pl.jobs, pl.p.workers, start, rs.do, prog.jobDone)
	elapsed := time.Since(start)
	if rs.rig != nil {
		row.Outage = rs.rig.end()
	}
	stopOutside()
	if pl.outside != nil {
		oc := <-outside
		row.Outside = &oc
	}
	prog.end()
	if err := ctx.Err(); err != nil {
		return rowResult{}, err
	}
	if rs.tally != nil {
		if err := rs.tally.waitFor(5 * time.Second); err != nil {
			return rowResult{}, err
		}
		row.Pacer = rs.tally.count()
		// The transport syncs the provider's headers in the background:
		// let the last Sync land, so that it is counted here and does not
		// meet a closed client.
		be.quiet(20*time.Millisecond, time.Second)
	}
	row.RedisCommands = be.cmds.Load() - cmds0
	row.fill(fp.Stats(), results, elapsed)
	row.events = rec.snapshot()
	return row, nil
}

// rowSetup is one process's means to run a row's jobs: how each job runs,
// and the row as far as it is known before it runs.
type rowSetup struct {
	row   rowResult
	do    doJob
	tally *paceTally // SDK rows through the transport
	rig   *outageRig // a redis-down row's outage
}

// setupRow builds the limiters of row v: per-worker buckets, a Pacer on
// the shared budget, or openai-go clients, all sending through c.
func setupRow(pl *plan, v variant, be *backend, budgetName string, c *chatClient) (rowSetup, error) {
	row := rowResult{Label: v.label, Mode: "per-worker", ProviderRefunds: v.providerRefund}
	limit, window := pl.p.providerTokens, pl.provider.Window
	var do doJob
	var tally *paceTally
	var rig *outageRig
	start := time.Now()
	if v.client != clientRaw {
		row.Mode = "sdk"
		var cfg pacer.Config
		exact := true
		if v.client == clientTransport {
			row.Mode = "transport"
			cfg, exact = pl.budgetConfig(v)
			cfg.Name = budgetName
			if pl.quota == 0 {
				f := budgetFinish(pl.jobs, cfg).Seconds()
				row.BudgetFloorSeconds = &f
			}
		}
		s, err := newSDKRig(pl, v, be, cfg, c.url, c.hc.Transport)
		if err != nil {
			return rowSetup{}, err
		}
		row.Budget = describeSDK(v, cfg, exact)
		do, tally = s.job, s.tally
	} else if v.shared {
		row.Mode = "shared"
		cfg, exact := pl.budgetConfig(v)
		cfg.Name = budgetName
		p, err := pacer.New(be.rdb, cfg)
		if err != nil {
			return rowSetup{}, err
		}
		row.Budget = describeBudget(cfg, exact)
		if pl.quota == 0 {
			f := budgetFinish(pl.jobs, cfg).Seconds()
			row.BudgetFloorSeconds = &f
		}
		do = sharedJob(p, c, pl.p.retries)
		if v.outage != outageNone {
			if rig, err = newOutageRig(pl, v, be, cfg, c); err != nil {
				return rowSetup{}, err
			}
			do = rig.job
		}
	} else {
		// One bucket per worker, plus one for the direct (interactive)
		// calls, which stand for one more process with its own limiter.
		// With a request limit each worker has a bucket of calls too.
		buckets := make([]*localBucket, pl.p.workers+1)
		var calls []*localBucket
		for i := range buckets {
			buckets[i] = newLocalBucket(limit, limit, window, start)
			if n := pl.p.providerReqs; n > 0 {
				calls = append(calls, newLocalBucket(n, n, window, start))
			}
		}
		row.Budget = fmt.Sprintf("each worker: its own bucket of %s tokens per %v", thousands(limit), window)
		if n := pl.p.providerReqs; n > 0 {
			row.Budget = fmt.Sprintf("each worker: its own buckets of %s tokens and %d calls per %v", thousands(limit), n, window)
		}
		do = perWorkerJob(buckets, calls, c, pl.p.retries, pl.p.wall(time.Second))
	}
	return rowSetup{row: row, do: do, tally: tally, rig: rig}, nil
}

// describeBudget says how the shared budget was set up, for the report.
func describeBudget(cfg pacer.Config, exact bool) string {
	var rates []string
	for _, r := range cfg.Rates {
		sl := ""
		if r.Sliding {
			sl = ", Sliding"
		}
		if r.Burst > 0 {
			sl += ", Burst " + thousands(r.Burst)
		}
		rates = append(rates, fmt.Sprintf("Rate{%v, %s per %v%s}", r.Unit, thousands(r.Limit), r.Window, sl))
	}
	s := "pacer " + strings.Join(rates, " + ")
	if cfg.Headroom > 0 {
		s += fmt.Sprintf(", Headroom %g", cfg.Headroom)
	}
	if cfg.NoRefund {
		s += ", NoRefund"
	}
	if !exact {
		s += " (TPM rounded down: the provider's rate is not a whole number per minute)"
	}
	return s
}

// fill computes the row's figures: totals from the provider's own counters,
// times and waits from the jobs.
func (row *rowResult) fill(st fakeprovider.Stats, results []jobResult, elapsed time.Duration) {
	row.Seconds = elapsed.Seconds()
	row.Calls, row.OK, row.RateLimited, row.QuotaErrors = st.Calls, st.OK, st.RateLimited, st.QuotaErrors
	row.TokensAdmitted, row.TokensUsed, row.TokensRefunded = st.TokensAdmitted, st.TokensUsed, st.TokensRefunded
	if row.Seconds > 0 {
		row.TokensPerSec = float64(st.TokensAdmitted) / row.Seconds
	}
	var all, inter, batch, firstBytes, afterHeaders []time.Duration
	var interFailed, batchFailed int
	for _, r := range results {
		row.Jobs++
		row.Attempts += r.attempts
		failed := !r.ran || r.err != nil
		if failed {
			row.Failed++
			if quotaFailure(r.err, row.Mode) {
				row.QuotaFailed++
			}
		}
		if !r.ran {
			continue
		}
		all = append(all, r.wait())
		if !r.firstByte.IsZero() {
			firstBytes = append(firstBytes, r.firstByte.Sub(r.start))
			afterHeaders = append(afterHeaders, r.firstByte.Sub(r.answered))
		}
		if r.priority == pacer.Batch {
			batch = append(batch, r.wait())
			batchFailed += b2i(failed)
		} else {
			inter = append(inter, r.wait())
			interFailed += b2i(failed)
		}
	}
	if row.Jobs > 0 {
		row.RedisPerJob = float64(row.RedisCommands) / float64(row.Jobs)
	}
	row.Wait = newWaitStats(all, interFailed+batchFailed)
	if len(firstBytes) > 0 {
		fb, ah := newWaitStats(firstBytes, 0), newWaitStats(afterHeaders, 0)
		row.FirstByte, row.HeadersToFirstByte = &fb, &ah
	}
	if len(batch) > 0 && len(inter) > 0 {
		i, b := newWaitStats(inter, interFailed), newWaitStats(batch, batchFailed)
		row.Interactive, row.Batch = &i, &b
	}
}

// quotaFailure says a job's error was an exhausted quota. Run's error says
// it with a sentinel; the naive client's error is the provider's answer,
// read by classify.
func quotaFailure(err error, mode string) bool {
	return errors.Is(err, pacer.ErrQuotaExhausted) ||
		(mode != "shared" && classify.FromError(err).Kind == classify.QuotaExhausted)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
