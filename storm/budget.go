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
// the same bucket as a Rate of limit·(1 min / W) tokens a minute (tpm)
// with a Burst of limit: for 10,000 tokens per 5 s, 120,000 a minute and a
// burst of 10,000, both refilling 2 tokens per millisecond. When the rate
// is not a whole number per minute it is rounded down, so the budget is
// never faster than the provider. A request limit becomes an rpm Rate the
// same way.
//
// A sliding-safe budget refills (limit - burst) per window: the Rate's
// limit is (limit - burst)·(1 min / W), with the same Burst (see
// minuteRate for a burst above a minute's refill).
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
	cfg = pacer.Config{Headroom: v.headroom, NoRefund: v.noRefund, MaxWait: time.Hour}
	perMinute := func(refill int64) (int64, bool) {
		num := new(big.Int).Mul(big.NewInt(refill), big.NewInt(int64(time.Minute)))
		q, r := new(big.Int).QuoRem(num, big.NewInt(int64(w)), new(big.Int))
		return q.Int64(), r.Sign() == 0
	}
	refill, reqRefill := pl.p.providerTokens, reqs
	if v.slidingSafe {
		refill, reqRefill = refill-v.burst, reqRefill-v.reqBurst
	}
	tpm, exact := perMinute(refill)
	cfg.Rates = []pacer.Rate{minuteRate(pacer.Tokens, tpm, v.burst-tokM)}
	if reqs > 0 {
		rpm, ok := perMinute(reqRefill)
		exact = exact && ok
		cfg.Rates = append(cfg.Rates, minuteRate(pacer.Requests, rpm, v.reqBurst-margin(reqs, v.reqBurst, 1)))
	}
	return cfg, exact
}

// minuteRate is a bucket of unit refilling perMinute a minute, holding
// burst: a Rate per minute, or, for a burst above a minute's refill (a
// Rate's Burst is at most its Limit), per as many minutes as it takes, at
// the same refill.
func minuteRate(unit pacer.Unit, perMinute, burst int64) pacer.Rate {
	perMinute = max(perMinute, 1)
	k := max(1, (burst+perMinute-1)/perMinute)
	return pacer.Rate{Unit: unit, Limit: perMinute * k, Window: time.Duration(k) * time.Minute, Burst: burst}
}

// bucketOf returns the refilling Rate of unit in cfg (see budgetConfig),
// or the zero Rate.
func bucketOf(cfg pacer.Config, unit pacer.Unit) pacer.Rate {
	for _, r := range cfg.Rates {
		if r.Unit == unit && !r.Sliding {
			return r
		}
	}
	return pacer.Rate{}
}
