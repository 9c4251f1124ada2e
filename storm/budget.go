package main

import (
	"math"
	"math/big"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// dispatchMargin is the default of -margin: the time a call may take from
// the budget's admission to the provider's decision, more than the first
// call of the run took; see budgetConfig for why it is still needed.
const dispatchMargin = 20 * time.Millisecond

// largestJob is the largest charge of any job.
func (pl *plan) largestJob() int64 {
	var n int64
	for _, j := range pl.jobs {
		n = max(n, j.charge())
	}
	return n
}

// budgetConfig translates the provider's limits into a pacer.Config.
//
// pacer's token limits are per minute (TPM) and per day; the provider's
// window here is seconds. A bucket refilling limit tokens per window W is
// the same bucket as TPM = limit·(1 min / W) with Burst.TPM = limit: for
// 10,000 tokens per 5 s, TPM 120,000 and a burst of 10,000, both refilling
// 2 tokens per millisecond. When TPM is not a whole number it is rounded
// down, so the budget is never faster than the provider. A request limit
// becomes RPM and Burst.RPM the same way.
//
// A sliding-safe budget refills (limit - burst) per window. Config.SlidingWindow
// computes that refill per the limit's own window, a minute for TPM, so it
// is used only when the provider's window is a minute; otherwise the same
// bucket is written out as TPM = (limit - burst)·(1 min / W).
//
// NoRefund follows the row: set when the provider keeps max_tokens, so
// that settling real usage charges overruns but never refunds what the
// provider did not give back.
func (pl *plan) budgetConfig(v variant) (cfg pacer.Config, exact bool) {
	w := pl.provider.Window
	reqs := pl.p.providerReqs
	if v.exactSliding {
		// The provider's own limits, counted as it counts them, over its
		// window stretched by the margin: the provider counts a call
		// from when it arrives, up to a few milliseconds after the budget
		// admitted it, and a call the budget counted from a moment before
		// the provider did would leave the budget's window that moment
		// before it leaves the provider's. The sub-windows' edge gives
		// no such slack: the call may fall at the end of its sub-window.
		// pacer wants the window in whole milliseconds; rounding up errs
		// on the safe side too.
		sw := (w + pl.p.margin + time.Millisecond - 1).Truncate(time.Millisecond)
		cfg = pacer.Config{
			Rates:    []pacer.Rate{{Unit: pacer.Tokens, Limit: pl.p.providerTokens, Window: sw, Sliding: true}},
			Headroom: v.headroom, NoRefund: v.noRefund, MaxWait: time.Hour,
		}
		if reqs > 0 {
			cfg.Rates = append(cfg.Rates, pacer.Rate{Unit: pacer.Requests, Limit: reqs, Window: sw, Sliding: true})
		}
		return cfg, sw == w
	}
	// The budget admits a call a moment before the provider sees it, and
	// the first calls of a run set both buckets' clocks: the provider's
	// starts refilling when the first call arrives, the budget's when it
	// admitted it, up to a millisecond earlier still because Redis's clock
	// is read in whole milliseconds. A later call that reaches the
	// provider faster than the first did then finds it a fraction of a
	// token short (measured: "Used 9001, Requested 1000", retry-after-ms
	// 1). Such a 429 costs little time but it costs the call its turn: Run
	// pauses 1 ms and acquires again, behind every call that reserved a
	// turn meanwhile. Without the margin the default run met 0 to 4 of
	// them and its p99 wait went from 2.9 s to 4.9-8.4 s, for 20 ms less
	// in total. The margin's refill off the burst covers the offset;
	// it delays the run by the same 20 ms, once.
	margin := func(limit, burst, least int64) int64 {
		m := int64(math.Ceil(float64(limit) * pl.p.margin.Seconds() / w.Seconds()))
		return min(m, max(burst-least, 0))
	}
	tokM := margin(pl.p.providerTokens, v.burst, pl.largestJob())
	cfg = pacer.Config{Burst: pacer.Burst{TPM: v.burst - tokM}, Headroom: v.headroom, NoRefund: v.noRefund, MaxWait: time.Hour}
	var reqM int64
	if reqs > 0 {
		reqM = margin(reqs, v.reqBurst, 1)
		cfg.Burst.RPM = v.reqBurst - reqM
	}
	if v.slidingSafe && w == time.Minute {
		// Config.SlidingWindow refills (limit - burst) per minute; taking
		// the margin off the limit too keeps that refill at limit - v.burst.
		cfg.Limits.TPM, cfg.SlidingWindow = pl.p.providerTokens-tokM, true
		if reqs > 0 {
			cfg.Limits.RPM = reqs - reqM
		}
		return cfg, true
	}
	perMinute := func(refill int64) (int64, bool) {
		num := new(big.Int).Mul(big.NewInt(refill), big.NewInt(int64(time.Minute)))
		q, r := new(big.Int).QuoRem(num, big.NewInt(int64(w)), new(big.Int))
		return q.Int64(), r.Sign() == 0
	}
	refill, reqRefill := pl.p.providerTokens, reqs
	if v.slidingSafe {
		refill, reqRefill = refill-v.burst, reqRefill-v.reqBurst
	}
	cfg.Limits.TPM, exact = perMinute(refill)
	if reqs > 0 {
		var ok bool
		cfg.Limits.RPM, ok = perMinute(reqRefill)
		exact = exact && ok
	}
	return cfg, exact
}
