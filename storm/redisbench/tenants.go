package main

import (
	"context"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// tenantConfig is a budget of RPM and TPM with tenants that each have an
// RPM and a TPM of their own and a share of 0.1: the tenant path of the
// scripts with every part of it at work, on limits no run can exhaust.
func tenantConfig() pacer.Config {
	return pacer.Config{
		Limits: pacer.Limits{RPM: 1 << 40, TPM: 1 << 45},
		Tenants: pacer.Tenants{Share: 0.1, Rates: []pacer.Rate{
			{Unit: pacer.Requests, Limit: 1 << 40, Window: time.Minute},
			{Unit: pacer.Tokens, Limit: 1 << 44, Window: time.Minute},
		}},
	}
}

// tenantCounts are the numbers of tenants the cost is measured over: each
// pair of calls goes to the next tenant in turn.
var tenantCounts = []int{1, 100, 10_000, 100_000}

// tenantPair runs one acquire and settle for tenant on p.
func tenantPair(ctx context.Context, p *pacer.Pacer, tenant string) error {
	l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100, Tenant: tenant})
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("ample budget refused tenant %q", tenant)
	}
	return l.Settle(ctx, 60)
}

// tenantID names the i-th tenant.
func tenantID(i int) string { return fmt.Sprintf("tenant-%d", i) }

// populate gives p n tenants with state, as calls would have left it: one
// tenant's hash, made by a real call, copied to the others' keys.
func (b *bench) populate(ctx context.Context, p *pacer.Pacer, n int) error {
	if err := tenantPair(ctx, p, tenantID(0)); err != nil {
		return err
	}
	src := tenantKeyOf(p, tenantID(0))
	dump, err := b.rdb.Dump(ctx, src).Result()
	if err != nil {
		return fmt.Errorf("DUMP %s: %w", src, err)
	}
	ttl := time.Hour // the copies must outlive the run; the hash sets its own at its next call
	pipe := b.rdb.Pipeline()
	for i := 1; i < n; i++ {
		pipe.RestoreReplace(ctx, tenantKeyOf(p, tenantID(i)), ttl, dump)
		if i%1000 == 999 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	_, err = pipe.Exec(ctx)
	return err
}

// dropTenants deletes p's keys and its n tenants'.
func (b *bench) dropTenants(ctx context.Context, p *pacer.Pacer, n int) {
	keys := keysOf(p)
	for i := range n {
		keys = append(keys, tenantKeyOf(p, tenantID(i)))
		if len(keys) >= 1000 {
			_ = b.rdb.Del(ctx, keys...).Err()
			keys = keys[:0]
		}
	}
	_ = b.rdb.Del(ctx, keys...).Err()
}

// tenants: server-side µs of an acquire and settle on a tenant inside a
// budget (RPM and TPM on each, a Share), beside one redis_rate GCRA call
// and the typical budget's pair, measured in turn within each round; and
// the same over 1 to 100,000 tenants with state in Redis.
func (b *bench) tenants(ctx context.Context) error {
	const n, rounds = 4000, 3
	measure := func(f func(i int) error) (float64, error) {
		if err := b.reset(ctx); err != nil {
			return 0, err
		}
		for i := range n {
			if err := f(i); err != nil {
				return 0, err
			}
		}
		u, _, err := b.usec(ctx)
		return u, err
	}
	allow, dropAllow := b.yardstick()
	defer dropAllow(ctx)
	if err := warmYardstick(ctx, allow); err != nil {
		return err
	}
	plain, err := b.pacer(pacer.Config{Limits: budgets[0].limits})
	if err != nil {
		return err
	}
	warm(ctx, plain)
	defer b.rdb.Del(ctx, keysOf(plain)...)
	p, err := b.pacer(tenantConfig())
	if err != nil {
		return err
	}
	most := tenantCounts[len(tenantCounts)-1]
	start := time.Now()
	if err := b.populate(ctx, p, most); err != nil {
		return err
	}
	populated := time.Since(start)
	defer b.dropTenants(ctx, p, most)

	// per[0] GCRA, per[1] the typical budget's pair, then a tenant's pair
	// over each count of tenants; all µs per pair (usec_per_call averages
	// acquire and settle).
	per := make([][]float64, 2+len(tenantCounts))
	for range rounds {
		v, err := measure(func(int) error { return allow(ctx) })
		if err != nil {
			return err
		}
		per[0] = append(per[0], v)
		if v, err = measure(func(int) error {
			l, err := plain.TryAcquire(ctx, pacer.Request{Tokens: 100})
			if err != nil {
				return err
			}
			return l.Settle(ctx, 60)
		}); err != nil {
			return err
		}
		per[1] = append(per[1], 2*v)
		for k, count := range tenantCounts {
			// Spread the calls over the whole range of tenants.
			stride := max(count/n, 1)
			if v, err = measure(func(i int) error { return tenantPair(ctx, p, tenantID((i*stride)%count)) }); err != nil {
				return err
			}
			per[2+k] = append(per[2+k], 2*v)
		}
	}
	g, typical := median(per[0]), median(per[1])
	fmt.Fprintf(b.out, "## Tenants: server-side cost (INFO commandstats; median of %d rounds of %d calls or pairs; %d tenants' hashes in Redis, written in %v)\n",
		rounds, n, most, populated.Round(time.Millisecond))
	fmt.Fprintln(b.out, "| call | µs | ratio to GCRA | ratio to the typical budget |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|")
	row := func(name string, v float64) {
		fmt.Fprintf(b.out, "| %s | %.2f | %.2f | %.2f |\n", name, v, v/g, v/typical)
	}
	row("redis_rate Allow (GCRA that writes its key)", g)
	row("RPM + TPM budget: acquire + settle", typical)
	for k, count := range tenantCounts {
		row(fmt.Sprintf("tenant (RPM + TPM, Share 0.1) in an RPM + TPM budget: acquire + settle, calls over %s tenants", thousands(count)), median(per[2+k]))
	}
	return nil
}

// instrTenants adds the tenant's rows to the instr part: instructions of
// an acquire and settle on a tenant inside a budget, over one tenant and
// over 100,000 with state in Redis; then, over one tenant, with the share
// alone and with the tenant's own rates alone, to show which part costs
// what.
func (b *bench) instrTenants(ctx context.Context, measure func(func() error) (float64, error), row func(string, float64)) error {
	one := func(name string, cfg pacer.Config, count int) error {
		return b.instrTenant(ctx, measure, row, name, cfg, count)
	}
	most := tenantCounts[len(tenantCounts)-1]
	for _, count := range []int{1, most} {
		if err := one(fmt.Sprintf("tenant in a budget (RPM + TPM each, Share 0.1), %s tenants", thousands(count)), tenantConfig(), count); err != nil {
			return err
		}
	}
	shareOnly := tenantConfig()
	shareOnly.Tenants.Rates = nil
	if err := one("tenant with Share 0.1 only, in an RPM + TPM budget", shareOnly, 1); err != nil {
		return err
	}
	ratesOnly := tenantConfig()
	ratesOnly.Tenants.Share = 0
	return one("tenant with its own RPM + TPM only (no Share), in an RPM + TPM budget", ratesOnly, 1)
}

// instrTenant measures a tenant's acquire, settle and their sum, the calls
// spread over count tenants.
func (b *bench) instrTenant(ctx context.Context, measure func(func() error) (float64, error), row func(string, float64), name string, cfg pacer.Config, count int) error {
	p, err := b.pacer(cfg)
	if err != nil {
		return err
	}
	if err := b.populate(ctx, p, count); err != nil {
		return err
	}
	defer b.dropTenants(ctx, p, count)
	i := 0
	var leases []*pacer.Lease
	acq, err := measure(func() error {
		l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100, Tenant: tenantID((i * 50) % count)})
		i++
		leases = append(leases, l)
		return err
	})
	if err != nil {
		return err
	}
	j := 0
	set, err := measure(func() error { j++; return leases[j-1].Settle(ctx, 60) })
	if err != nil {
		return err
	}
	row(name+": acquire", acq)
	row(name+": settle", set)
	row(name+": acquire + settle", acq+set)
	return nil
}

// thousands formats n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
