package main

import (
	"math"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// The floor is the least time a limit allows for a scenario's jobs: when
// the last job could be admitted at the earliest if jobs were served in
// order of arrival, each the moment the limit had room for it, and calls
// took no time. For jobs all there at the start of a token bucket it is
// (total - capacity) / rate: 10 s for 30,000 tokens against 10,000 per 5 s.
// Against a provider that refunds, a call still needs prompt + max_tokens
// free to be admitted, but keeps only what it used: the unused part comes
// back at once, as it would if calls took no time.

// idealFinish is the provider's floor for the plan, against a provider
// that refunds or one that keeps max_tokens. An outside caller's share
// comes off the rate. It is < 0 for the quota scenario, whose jobs cannot
// all succeed.
func (pl *plan) idealFinish(refunds bool) time.Duration {
	if pl.quota > 0 {
		return -1
	}
	limit := float64(pl.p.providerTokens)
	w := pl.provider.Window.Seconds()
	rate := limit / w
	if o := pl.outside; o != nil {
		rate -= float64(o.call.charge()) / o.every.Seconds()
	}
	reqs := float64(pl.p.providerReqs)
	if pl.p.sliding {
		return slidingFinish(pl.jobs, rate*w, reqs, w, refunds)
	}
	return bucketFinish(pl.jobs, limit, rate, 0, refunds, reqBucket{reqs, reqs / w})
}

// budgetFinish is the floor of a shared budget itself: its capacity and
// refill, which may be below the provider's (a sliding-safe burst, a
// margin, Headroom), and the share of the bucket batch calls must leave
// (Config.BatchFloor's default, 0.2). Headroom lowers the limit and the burst, as
// pacer applies it, and a budget without NoRefund gets each call's unused
// tokens back at once. The gap between it and the provider's floor is what
// the budget's shape costs; the gap between it and the measured time is
// what pacing costs.
func budgetFinish(jobs []job, cfg pacer.Config) time.Duration {
	keep := func(n int64) float64 { return math.Floor(float64(n) * (1 - cfg.Headroom)) }
	if sliding, ok := slidingRates(cfg); ok {
		tok, req := sliding[pacer.Tokens], sliding[pacer.Requests]
		return slidingFinish(jobs, keep(tok.Limit), keep(req.Limit), tok.Window.Seconds(), !cfg.NoRefund)
	}
	// A bucket's capacity (its Burst, or its limit) and refill per second.
	shape := func(r pacer.Rate) (capacity, perSecond float64) {
		if r.Limit == 0 {
			return 0, 0
		}
		capacity = keep(r.Burst)
		if r.Burst == 0 {
			capacity = keep(r.Limit)
		}
		return capacity, keep(r.Limit) / r.Window.Seconds()
	}
	burst, refill := shape(bucketOf(cfg, pacer.Tokens))
	rb, rrefill := shape(bucketOf(cfg, pacer.Requests))
	return bucketFinish(jobs, burst, refill, burst*0.2, !cfg.NoRefund, reqBucket{rb, rrefill})
}

// slidingRates returns a budget's sliding rates by unit, if its only rates
// are a sliding token rate and perhaps a sliding request rate of the same
// window: the shape the storm's exact rows use.
func slidingRates(cfg pacer.Config) (map[pacer.Unit]pacer.Rate, bool) {
	by := map[pacer.Unit]pacer.Rate{}
	for _, r := range cfg.Rates {
		if !r.Sliding || (r.Unit != pacer.Tokens && r.Unit != pacer.Requests) {
			return nil, false
		}
		by[r.Unit] = r
	}
	tok, ok := by[pacer.Tokens]
	if req, has := by[pacer.Requests]; !ok || (has && req.Window != tok.Window) {
		return nil, false
	}
	return by, true
}

// reqBucket is a request limit as a bucket: capacity calls, refilling
// perSec; a zero capacity is no request limit.
type reqBucket struct{ capacity, perSec float64 }

// kept is what a job leaves charged once it has ended: its real usage if
// the limit refunds, else its whole charge.
func (j job) kept(refunds bool) float64 {
	if refunds {
		return float64(j.prompt + j.output)
	}
	return float64(j.charge())
}

// bucketFinish serves jobs (sorted by arrival) from a bucket that starts
// full with capacity tokens and refills perSec tokens per second:
// interactive jobs first come, first served; a batch job only when no
// interactive job is waiting, and only if it leaves batchKeep tokens, as
// pacer serves them. With refunds a job keeps only its real usage. req, if
// set, is a request bucket every job must also find a call in.
func bucketFinish(jobs []job, capacity, perSec, batchKeep float64, refunds bool, req reqBucket) time.Duration {
	var inter, batch []job // arrived, not yet admitted
	var t, last float64    // seconds
	level, calls, next := capacity, req.capacity, 0
	refill := func(to float64) {
		level = min(capacity, level+(to-last)*perSec)
		if req.capacity > 0 {
			calls = min(req.capacity, calls+(to-last)*req.perSec)
		}
		last = to
	}
	for next < len(jobs) || len(inter)+len(batch) > 0 {
		for ; next < len(jobs) && jobs[next].at.Seconds() <= t; next++ {
			if jobs[next].priority == pacer.Batch {
				batch = append(batch, jobs[next])
			} else {
				inter = append(inter, jobs[next])
			}
		}
		if len(inter)+len(batch) == 0 {
			t = jobs[next].at.Seconds()
			continue
		}
		queue, need := &inter, 0.0
		if len(inter) == 0 {
			queue, need = &batch, batchKeep
		}
		c := float64((*queue)[0].charge())
		refill(t)
		wait := max(0, (c+need-level)/perSec)
		if req.capacity > 0 {
			wait = max(wait, (1-calls)/req.perSec)
		}
		if queue == &batch && next < len(jobs) && jobs[next].at.Seconds() < t+wait {
			t = jobs[next].at.Seconds() // whoever arrives may go first
			continue
		}
		t += wait
		refill(t)
		level -= (*queue)[0].kept(refunds)
		calls--
		*queue = (*queue)[1:]
	}
	return time.Duration(t * float64(time.Second))
}

// slidingFinish serves jobs in order through a strict sliding window that
// admits limit tokens, and reqs calls if reqs > 0, in any window of w
// seconds. With refunds a job needs its charge free but counts only its
// real usage.
func slidingFinish(jobs []job, limit, reqs, w float64, refunds bool) time.Duration {
	type admission struct{ at, n float64 }
	var in []admission // still in the window, oldest first
	var t, sum float64
	for _, j := range jobs {
		t = max(t, j.at.Seconds())
		c := float64(j.charge())
		for {
			for len(in) > 0 && t >= in[0].at+w { // the same sum as below: t-at >= w may round short of it and never hold
				sum -= in[0].n
				in = in[1:]
			}
			fits := sum+c <= limit && (reqs <= 0 || float64(len(in))+1 <= reqs)
			if fits || len(in) == 0 {
				break
			}
			t = in[0].at + w
		}
		in = append(in, admission{t, j.kept(refunds)})
		sum += j.kept(refunds)
	}
	return time.Duration(t * float64(time.Second))
}
