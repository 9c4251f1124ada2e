package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

// The budget scenarios (tenants, spend, anthropic) compare budgets, not a
// per-worker limiter with a shared one: each runs its own lanes and prints
// its own table. A lane is one budget and its provider, and the calls sent
// through them, each on its own goroutine at its arrival, as request
// handlers send them.

// customRun runs a scenario that builds its own table.
type customRun func(ctx context.Context, pl *plan, be *backend, prog *progress) (scenarioReport, error)

// customTable is the table of a budget scenario: a few lines that say
// what ran, cells, and notes under them.
type customTable struct {
	Header []string   `json:"header"`
	Cells  [][]string `json:"cells"`
	Notes  []string   `json:"notes,omitempty"`
}

// call is one LLM call of a lane.
type call struct {
	at                        time.Duration // arrival, wall time since the lane started
	tenant, model             string
	group                     string // how the table groups it: "light", "heavy"
	prompt, maxTokens, output int64
	// realPrompt, if positive, is the prompt the provider counts, where
	// prompt is the caller's estimate of it: an estimate that undercounts.
	realPrompt int64
	// giveUpAt, if positive, cancels the call when the lane has run this
	// long (wall): a demand that outlasts the run is cut off there.
	giveUpAt time.Duration
}

// callResult is what became of one call.
type callResult struct {
	call
	start, end time.Time
	inCalls    time.Duration // inside provider calls
	attempts   int
	err        error
	used       usage // what the answer reported, if it succeeded
}

// wait is the time the call spent outside provider calls.
func (r callResult) wait() time.Duration { return r.end.Sub(r.start) - r.inCalls }

// lane is one budget against its own provider.
type lane struct {
	p       *pacer.Pacer
	c       *chatClient
	split   bool // reserve Input and Output apart, and settle them apart
	retries int
}

// run sends every call at its arrival and returns the results in order.
func (ln *lane) run(ctx context.Context, calls []call, start time.Time, done func()) []callResult {
	out := make([]callResult, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		if sleepCtx(ctx, time.Until(start.Add(c.at))) != nil {
			break
		}
		wg.Go(func() {
			cctx := ctx
			if c.giveUpAt > 0 {
				var cancel context.CancelFunc
				cctx, cancel = context.WithDeadline(ctx, start.Add(c.giveUpAt))
				defer cancel()
			}
			out[i] = ln.do(cctx, c)
			done()
		})
	}
	wg.Wait()
	return out
}

// runWorkers runs calls from a queue on n workers, all there at the
// start, and returns the results in order. A worker whose call fails
// with an error stop says is final takes no more calls; the calls it
// leaves are not run (their result has a zero start).
func (ln *lane) runWorkers(ctx context.Context, calls []call, n int, stop func(error) bool, done func()) []callResult {
	return runWorkers(ctx, calls, n, stop, done, ln.do)
}

// runWorkers is lane.runWorkers with each call run by do.
func runWorkers(ctx context.Context, calls []call, n int, stop func(error) bool, done func(), do func(context.Context, call) callResult) []callResult {
	out := make([]callResult, len(calls))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(calls) || ctx.Err() != nil {
					return
				}
				out[i] = do(ctx, calls[i])
				done()
				if out[i].err != nil && stop != nil && stop(out[i].err) {
					return
				}
			}
		})
	}
	wg.Wait()
	return out
}

// do runs one call as a user's code would: acquire, call, settle the
// usage the answer reports; on a 429, fail the lease, which pauses the
// budget for the delay the provider named, and try again.
func (ln *lane) do(ctx context.Context, c call) callResult {
	r := callResult{call: c, start: time.Now()}
	req := pacer.Request{Tenant: c.tenant, Model: c.model}
	if ln.split {
		req.Input, req.Output = c.prompt, c.maxTokens
	} else {
		req.Tokens = c.prompt + c.maxTokens
	}
	j := job{prompt: cmp.Or(c.realPrompt, c.prompt), maxTokens: c.maxTokens, output: c.output}
	for attempt := 0; ; attempt++ {
		l, err := ln.p.Acquire(ctx, req)
		if err != nil {
			r.err = err
			break
		}
		t := time.Now()
		u, err := ln.c.chat(ctx, j, false)
		r.inCalls += time.Since(t)
		r.attempts++
		if err == nil {
			r.used = u
			r.err = l.SettleUsage(context.WithoutCancel(ctx), pacer.Usage{Input: u.prompt, Output: u.output})
			break
		}
		// A 429 pauses the budget (Fail) for the delay the provider
		// named; any other failure only ends the lease, keeping its
		// reservation.
		v := classify.Verdict{Kind: classify.Transient}
		var ae *fakeprovider.APIError
		limited := errors.As(err, &ae) && ae.Response.StatusCode == http.StatusTooManyRequests
		if limited {
			d, ok := retryAfter(ae)
			if !ok {
				d = 10 * time.Millisecond
			}
			v = classify.Verdict{Kind: classify.RateLimited, Status: http.StatusTooManyRequests, RetryAfter: d}
		}
		ferr := l.Fail(context.WithoutCancel(ctx), v, err)
		if !limited || attempt == ln.retries {
			r.err = err
			break
		}
		if ferr != nil {
			r.err = ferr
			break
		}
	}
	r.end = time.Now()
	return r
}

// waitsOf returns the waits of the results in group g ("" for all) that
// succeeded, and how many of the group failed.
func waitsOf(rs []callResult, g string) (waits []time.Duration, failed int) {
	for _, r := range rs {
		if g != "" && r.group != g {
			continue
		}
		if r.err != nil {
			failed++
			continue
		}
		waits = append(waits, r.wait())
	}
	return waits, failed
}

// quantile returns the p-th percentile of d, in milliseconds.
func quantile(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(percentile(s, p)) / float64(time.Millisecond)
}

// admittedBy sums the charges the provider admitted before t.
func admittedBy(events []event, t time.Duration) int64 {
	var n int64
	for _, e := range events {
		if e.at < t && e.kind == classify.OK {
			n += e.charge
		}
	}
	return n
}

// startLane starts a provider with cfg and a client for it.
func startLane(ctx context.Context, cfg fakeprovider.Config, conns int) (*fakeprovider.Provider, *recorder, *chatClient, func(), error) {
	fp, rec, srv, err := startProvider(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	c := newChatClient(srv.URL, conns)
	stop := func() { c.close(); srv.Close() }
	if err := c.warm(ctx, min(conns, 64)); err != nil {
		stop()
		return nil, nil, nil, nil, err
	}
	return fp, rec, c, stop, nil
}

// printCustom writes a budget scenario's table.
func printCustom(w io.Writer, t *customTable) {
	for _, h := range t.Header {
		fmt.Fprintf(w, "  %s\n", h)
	}
	fmt.Fprintln(w)
	writeCells(w, t.Cells)
	fmt.Fprintln(w)
	for _, n := range t.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	if len(t.Notes) > 0 {
		fmt.Fprintln(w)
	}
}
