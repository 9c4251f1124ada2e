package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/retry"
)

// jobResult is what became of one job.
type jobResult struct {
	priority   pacer.Priority
	ran        bool
	start, end time.Time
	inCalls    time.Duration // time spent inside provider calls
	attempts   int
	err        error
	firstByte  time.Time // SDK rows: the first byte of the answer's body reached the SDK; zero if none did
	answered   time.Time // SDK rows: the answer's headers came off the wire, below the transport
}

// wait is the time the job spent outside provider calls: waiting for a
// limiter, sleeping out 429s. It is what the limit cost this job.
func (r jobResult) wait() time.Duration { return r.end.Sub(r.start) - r.inCalls }

// doJob runs one job for worker w. Direct jobs (request handlers, not
// queue workers) run with w equal to the number of workers.
type doJob func(ctx context.Context, w int, j job) jobResult

// runJobs releases each job at its arrival time, to the workers' queue or,
// for a direct job, to a goroutine of its own, and returns the results in
// job order once every job has ended. done is called after each job.
func runJobs(ctx context.Context, jobs []job, workers int, start time.Time, do doJob, done func()) []jobResult {
	results := make([]jobResult, len(jobs))
	queue := make(chan int, len(jobs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range queue {
				results[i] = do(ctx, w, jobs[i])
				done()
			}
		})
	}
	for i, j := range jobs {
		if sleepCtx(ctx, time.Until(start.Add(j.at))) != nil {
			break
		}
		if j.direct {
			wg.Go(func() {
				results[i] = do(ctx, workers, j)
				done()
			})
			continue
		}
		queue <- i
	}
	close(queue)
	wg.Wait()
	return results
}

// sharedJob runs a job through retry.Run on the shared budget, as users get
// it: Run waits for room, sends the call, settles the usage the answer
// reports (with Config.NoRefund the budget keeps the unused part), pauses
// every worker on a 429 and retries what classify.FromError says can be
// retried.
func sharedJob(p *pacer.Pacer, c *chatClient, retries int) doJob {
	return func(ctx context.Context, _ int, j job) jobResult {
		r := jobResult{priority: j.priority, ran: true, start: time.Now()}
		call := func(ctx context.Context) (usage, error) {
			t := time.Now()
			u, err := c.chat(ctx, j, false)
			r.inCalls += time.Since(t)
			r.attempts++
			return u, err
		}
		settle := func(u usage) int64 { return u.total() }
		_, r.err = retry.Run(ctx, p, pacer.Request{Tokens: j.charge(), Priority: j.priority}, call, settle,
			retry.WithRetries(retries))
		r.end = time.Now()
		return r
	}
}

// perWorkerJob runs a job the way most code does today: the worker's own
// limiter, then the call, and on a 429 a retry after the delay the provider
// named (retry-after-ms, else retry-after, else fallback) plus a little
// jitter, up to retries times. It retries every 429, as a naive client does,
// including OpenAI's insufficient_quota, which no wait can fix.
//
// calls, if not nil, holds each worker's bucket of requests, which every
// call also waits for.
func perWorkerJob(buckets, calls []*localBucket, c *chatClient, retries int, fallback time.Duration) doJob {
	return func(ctx context.Context, w int, j job) jobResult {
		r := jobResult{priority: j.priority, ran: true, start: time.Now()}
		b := buckets[w]
		for attempt := 0; ; attempt++ {
			now := time.Now()
			d := b.reserve(now, j.charge())
			if calls != nil {
				d = max(d, calls[w].reserve(now, 1))
			}
			if r.err = sleepCtx(ctx, d); r.err != nil {
				break
			}
			t := time.Now()
			_, r.err = c.chat(ctx, j, false)
			r.inCalls += time.Since(t)
			r.attempts++
			var ae *fakeprovider.APIError
			if r.err == nil || !errors.As(r.err, &ae) || ae.Response.StatusCode != http.StatusTooManyRequests || attempt == retries {
				break
			}
			d, ok := retryAfter(ae)
			if !ok {
				d = fallback
			}
			if r.err = sleepCtx(ctx, d+jitter(d)); r.err != nil {
				break
			}
		}
		r.end = time.Now()
		return r
	}
}

// jitter is a random extra wait of up to a tenth of d (at least up to a
// millisecond), so workers told the same delay do not all return at once.
func jitter(d time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(d/10) + int64(time.Millisecond)))
}

// outsideCount is what the outside caller sent and how it fared, counted on
// its side of the wire.
type outsideCount struct {
	Calls       int64 `json:"calls"`
	RateLimited int64 `json:"rate_limited"`
}

// runOutside sends o.call straight to the provider every o.every until ctx
// ends, without the budget and without retries, and counts the answers.
func runOutside(ctx context.Context, o *outsideTraffic, c *chatClient) outsideCount {
	var calls, limited atomic.Int64
	var wg sync.WaitGroup
	t := time.NewTicker(o.every)
	defer t.Stop()
	send := func() {
		calls.Add(1)
		// A call already sent finishes even if the run ends meanwhile.
		_, err := c.chat(context.WithoutCancel(ctx), o.call, true)
		if classify.FromError(err).Kind == classify.RateLimited {
			limited.Add(1)
		}
	}
	for {
		wg.Go(send)
		select {
		case <-t.C:
		case <-ctx.Done():
			wg.Wait()
			return outsideCount{Calls: calls.Load(), RateLimited: limited.Load()}
		}
	}
}

// sleepCtx sleeps d, or returns ctx's error if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
