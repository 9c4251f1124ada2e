package main

import (
	"context"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
)

// tenantDef is what a tenant's hash holds under a budget's definition:
// its buckets (wire's, built as pacer builds them: wire.RateBucket,
// wire.ShareBucket) and the state each reads as, the tenant's own rates
// first, then its shares of the budget's rates, as pacer's TenantSnapshot
// gives them.
type tenantDef struct {
	buckets []wire.Bucket
	states  []pacer.RateState // Rate, Limit, Capacity, PerSecond; Level read
	own     int               // how many of them are the tenant's own rates
}

// wireUnit is u as a bucket counts it.
var wireUnit = map[pacer.Unit]wire.Unit{
	pacer.Requests: wire.Requests, pacer.Tokens: wire.Tokens, pacer.InputTokens: wire.Input,
	pacer.OutputTokens: wire.Output, pacer.Spend: wire.Spend,
}

// tenantDefOf returns the tenant buckets of the definition cfg, whose
// budget's rates s reads; ok is false for a definition without tenants.
func tenantDefOf(cfg pacer.Config, s pacer.Snapshot) (d tenantDef, ok bool) {
	t := cfg.Tenants
	if len(t.Rates) == 0 && t.Share == 0 {
		return d, false
	}
	perSecond := func(units int64, window time.Duration) float64 {
		return float64(units) / float64(window.Milliseconds()) * 1000
	}
	for _, r := range t.Rates {
		wb := wire.RateBucket(r.Name(), r.Limit, r.Burst, r.Window, wireUnit[r.Unit], r.Sliding, cfg.Headroom)
		wb.Field = "@" + wb.Field
		limit := wire.Headroom(r.Limit, cfg.Headroom)
		d.buckets = append(d.buckets, wb)
		d.states = append(d.states, pacer.RateState{Rate: r, Limit: limit, Capacity: wb.Capacity, PerSecond: perSecond(limit, r.Window)})
	}
	d.own = len(d.buckets)
	if t.Share == 0 {
		return d, true
	}
	for _, rs := range s.Rates {
		r := rs.Rate
		wb := wire.ShareBucket(r.Name(), rs.Capacity, rs.Limit, r.Window, wireUnit[r.Unit], t.Share)
		d.buckets = append(d.buckets, wb)
		d.states = append(d.states, pacer.RateState{Rate: pacer.Rate{Unit: r.Unit, Limit: wb.Capacity, Window: r.Window},
			Limit: wb.Capacity, Capacity: wb.Capacity, PerSecond: perSecond(wb.Room, r.Window)})
	}
	return d, true
}

// readTenant reads the tenant of hash in budget name under d: its own
// rates and its shares, with their levels now.
func (r reader) readTenant(ctx context.Context, name, hash string, d tenantDef) (rates, shares []pacer.RateState, err error) {
	keys := wire.Keys(tag(r.o.prefix, name))[:3]
	keys[0] = wire.TenantKey(tag(r.o.prefix, name), hash)
	fields := make([]string, len(d.buckets))
	for i, b := range d.buckets {
		fields[i] = b.Field
	}
	now, vals, err := r.snapshot(ctx, keys, fields)
	if err != nil {
		return nil, nil, err
	}
	states := make([]pacer.RateState, len(d.states))
	for i, b := range d.buckets {
		states[i] = d.states[i]
		if states[i].Level, err = b.State(now.us, vals[i]); err != nil {
			return nil, nil, err
		}
	}
	return states[:d.own], states[d.own:], nil
}
