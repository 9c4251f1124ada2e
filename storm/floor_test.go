package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

func jobsOf(n int, size int64, gap time.Duration) []job {
	jobs := make([]job, n)
	for i := range jobs {
		jobs[i] = job{prompt: size / 4, maxTokens: size - size/4, output: size - size/4, at: time.Duration(i) * gap}
	}
	return jobs
}

// usingOnly makes every job's answer output tokens long.
func usingOnly(jobs []job, output int64) []job {
	for i := range jobs {
		jobs[i].output = output
	}
	return jobs
}

func batch(jobs []job) []job {
	for i := range jobs {
		jobs[i].priority = pacer.Batch
	}
	return jobs
}

func TestFloors(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		// (30,000 - 10,000) / 2,000 per second.
		{"bucket, all at start", bucketFinish(jobsOf(30, 1000, 0), 10_000, 2000, 0, false, reqBucket{}), 10 * time.Second},
		{"bucket, under capacity", bucketFinish(jobsOf(10, 1000, 0), 10_000, 2000, 0, false, reqBucket{}), 0},
		// Arrivals slower than the rate: the last arrival sets the floor.
		{"bucket, slow arrivals", bucketFinish(jobsOf(30, 1000, time.Second), 10_000, 2000, 0, false, reqBucket{}), 29 * time.Second},
		// Batch jobs leave 2,000 tokens: 8 fit the first burst, not 10.
		{"bucket, batch", bucketFinish(batch(jobsOf(30, 1000, 0)), 10_000, 2000, 2000, false, reqBucket{}), 11 * time.Second},
		// An interactive job arriving at 3 s goes before the batch jobs
		// still waiting, so the batch ends half a second later.
		{"bucket, interactive first", bucketFinish(append(batch(jobsOf(30, 1000, 0)), job{prompt: 250, maxTokens: 750, at: 3 * time.Second}),
			10_000, 2000, 2000, false, reqBucket{}), 11500 * time.Millisecond},
		// 10 calls at once, then 2 a second: the request limit binds,
		// (30 - 10) / 2 per s.
		{"bucket, requests", bucketFinish(jobsOf(30, 100, 0), 10_000, 2000, 0, false, reqBucket{10, 2}), 10 * time.Second},
		// 10 calls per 5 s window: at 0, 5 and 10 s.
		{"sliding, requests", slidingFinish(jobsOf(30, 100, 0), 10_000, 10, 5, false), 10 * time.Second},
		{"budget, exact sliding with requests", budgetFinish(jobsOf(30, 100, 0), pacer.Config{Rates: []pacer.Rate{
			{Unit: pacer.Tokens, Limit: 10_000, Window: 5 * time.Second, Sliding: true},
			{Unit: pacer.Requests, Limit: 10, Window: 5 * time.Second, Sliding: true}}}), 10 * time.Second},
		{"budget, RPM", budgetFinish(jobsOf(30, 100, 0),
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 120_000, Window: time.Minute, Burst: 10_000},
				{Unit: pacer.Requests, Limit: 120, Window: time.Minute, Burst: 10}}}), 10 * time.Second},
		// 10,000 at 0, 5 and 10 s: each leaves the window 5 s after it came.
		{"sliding, all at start", slidingFinish(jobsOf(30, 1000, 0), 10_000, 0, 5, false), 10 * time.Second},
		{"sliding, one window", slidingFinish(jobsOf(10, 1000, 0), 10_000, 0, 5, false), 0},
		// A sliding-safe budget: burst 1,000, refill 9,000 per 5 s.
		{"budget, sliding-safe", budgetFinish(jobsOf(30, 1000, 0),
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 108_000, Window: time.Minute, Burst: 1000}}}), 29_000 * time.Second / 1800},
		// Headroom lowers the burst too: 8,000 at 1,600 per second.
		{"budget, headroom", budgetFinish(jobsOf(30, 1000, 0),
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 120_000, Window: time.Minute, Burst: 10_000}}, Headroom: 0.2}), 22_000 * time.Second / 1600},
		// With refunds a job needs 1,000 free but keeps only 400: the last
		// goes once the first 29 have kept 11,600 and 1,000 are free,
		// (11,600 + 1,000 - 10,000) / 2,000 per s.
		{"bucket, refunds", bucketFinish(usingOnly(jobsOf(30, 1000, 0), 150), 10_000, 2000, 0, true, reqBucket{}), 1300 * time.Millisecond},
		{"bucket, refunds but none to give", bucketFinish(jobsOf(30, 1000, 0), 10_000, 2000, 0, true, reqBucket{}), 10 * time.Second},
		// A sliding window of 10,000 per 5 s: 23 jobs keep 9,200, and the
		// 24th, needing 1,000 free, waits until they leave at 5 s.
		{"sliding, refunds", slidingFinish(usingOnly(jobsOf(30, 1000, 0), 150), 10_000, 0, 5, true), 5 * time.Second},
		{"budget, NoRefund", budgetFinish(usingOnly(jobsOf(30, 1000, 0), 150),
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 120_000, Window: time.Minute, Burst: 10_000}}, NoRefund: true}), 10 * time.Second},
		{"budget, refunds", budgetFinish(usingOnly(jobsOf(30, 1000, 0), 150),
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 120_000, Window: time.Minute, Burst: 10_000}}}), 1300 * time.Millisecond},
	} {
		if d := tc.got - tc.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: floor = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestBudgetConfig(t *testing.T) {
	mk := func(window time.Duration, jobs []job) *plan {
		p := baseParams()
		return &plan{p: p, jobs: jobs, provider: fakeproviderConfig(p.providerTokens, window)}
	}
	for _, tc := range []struct {
		name      string
		pl        *plan
		v         variant
		want      pacer.Config
		wantExact bool
	}{
		{"the published shape", mk(5*time.Second, jobsOf(30, 1000, 0)), variant{burst: 10_000},
			// 10,000 per 5 s is 2 tokens per ms either way; 40 tokens (20 ms
			// of refill) come off the burst as the dispatch margin.
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 120_000, Window: time.Minute, Burst: 9960}}}, true},
		{"sliding-safe", mk(5*time.Second, jobsOf(30, 1000, 0)), variant{burst: 2000, slidingSafe: true},
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 96_000, Window: time.Minute, Burst: 1960}}}, true},
		{"sliding-safe, a one-minute window", mk(time.Minute, jobsOf(30, 1000, 0)), variant{burst: 2000, slidingSafe: true},
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 8000, Window: time.Minute, Burst: 1996}}}, true},
		// pacer's Headroom lowers the limit and the burst alike.
		{"headroom", mk(5*time.Second, jobsOf(30, 1000, 0)), variant{burst: 10_000, headroom: 0.2},
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 120_000, Window: time.Minute, Burst: 9960}}, Headroom: 0.2}, true},
		{"a provider that keeps max_tokens", mk(5*time.Second, jobsOf(30, 1000, 0)), variant{burst: 10_000, noRefund: true},
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 120_000, Window: time.Minute, Burst: 9960}}, NoRefund: true}, true},
		{"a rate that is no whole number per minute", mk(7*time.Second, jobsOf(30, 1000, 0)), variant{burst: 10_000},
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 85_714, Window: time.Minute, Burst: 9971}}}, false},
		{"no margin below the largest job", mk(5*time.Second, jobsOf(3, 10_000, 0)), variant{burst: 10_000},
			pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 120_000, Window: time.Minute, Burst: 10_000}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, exact := tc.pl.budgetConfig(tc.v)
			got.MaxWait = 0
			if diff := cmp.Diff(tc.want, got); diff != "" || exact != tc.wantExact {
				t.Errorf("budgetConfig(%+v) mismatch (-want +got):\n%sexact = %v, want %v", tc.v, diff, exact, tc.wantExact)
			}
		})
	}
}

func fakeproviderConfig(limit int64, window time.Duration) fakeprovider.Config {
	return fakeprovider.Config{TokenLimit: limit, Window: window}
}
