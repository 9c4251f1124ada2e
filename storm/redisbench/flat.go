package main

import (
	"context"
	"fmt"
	"time"
)

// flat: issue 23's goal that an acquire and settle cost the same in Redis
// whatever the leases in flight (0 to 10,000) and the tenants (1 to
// 100,000), measured under load's harness (loadRounds: 64 goroutines,
// four Pacers of 16, group commit with 1 script call in flight, the
// default; each setting's round after a round of redis_rate's Allow of
// its own, its ratios to that one; the median of loadRounds):
//
//   - RPM + TPM in use (load's regime: TATs kept 10 to 40 s ahead, a
//     give-back on every settle), each goroutine keeping a ring of about
//     N/64 leases in flight and settling its oldest, N from 0 (each lease
//     settled once acquired) to 10,000;
//   - a tenant (Share 0.1) in that budget, one lease in flight a
//     goroutine, the pairs going over 1 to 100,000 tenants in turn, every
//     tenant's hash written (populate) before each round: each call finds
//     its tenant's state, as kept by a call within the last minute. One
//     tenant alone takes a round's 12,000 pairs, 12 times what a share of
//     0.1 refills (100 calls a second, 6,000 held): it is over its share,
//     on another path of the scripts than the many tenants within theirs.
//     So one tenant runs again with a Share of 1, within it (a round
//     moves its share's TAT 12 s, as the budget's).
//
// The tenants' budgets have their TATs set to mid before every round
// (regime.reset): a call over its share is refused sooner.
//
// The leases live far longer than the run (flatTTL), and a settle that
// finds its lease expired fails the bench.
var flatFlight = []int{0, 64, 1000, 10_000}

// flatTTL is the lease TTL of flat's budgets: no lease in flight expires
// during a run.
const flatTTL = 6 * time.Hour

func (b *bench) flat(ctx context.Context) error {
	allow, drop := b.yardstick()
	defer drop(ctx)
	if err := warmYardstick(ctx, allow); err != nil {
		return err
	}
	mode := loadModes[1] // group commit, 1 in flight (the default)
	rs := regimes(1)
	inUse, tenant := rs[1], rs[3]
	inUse.cfg.LeaseTTL, tenant.cfg.LeaseTTL = flatTTL, flatTTL
	var us []*loadRunner
	add := func(r regime, ring int, populated bool) error {
		u, err := b.newLoadRunner(ctx, r, mode, ring, populated)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		us = append(us, u)
		return nil
	}
	defer func() {
		for _, u := range us {
			u.close(ctx)
		}
	}()
	for _, n := range flatFlight {
		ring := (n + loadGoroutines/2) / loadGoroutines // n/64, rounded
		r := inUse
		r.name = fmt.Sprintf("RPM + TPM in use, %s leases in flight (%d a goroutine)", thousands(ring*loadGoroutines), ring)
		if ring == 0 {
			r.name = "RPM + TPM in use, ~0 leases in flight (each settled once acquired)"
		}
		if err := add(r, ring, false); err != nil {
			return err
		}
	}
	tenant.reset = true
	for _, n := range tenantCounts {
		r := tenant
		r.tenants = n
		r.name = fmt.Sprintf("a tenant (Share 0.1) of %s, RPM + TPM in use, 64 in flight", thousands(n))
		if n == 1 {
			r.name = "a tenant (Share 0.1) of 1, over its share, RPM + TPM in use, 64 in flight"
		}
		if err := add(r, 1, true); err != nil {
			return err
		}
	}
	whole := tenant
	whole.tenants, whole.cfg.Tenants.Share = 1, 1
	whole.name = "a tenant (Share 1) of 1, within its share, RPM + TPM in use, 64 in flight"
	if err := add(whole, 1, true); err != nil {
		return err
	}
	allowF, per, err := b.loadRounds(ctx, allow, us)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "## Flat (issue 23): leases in flight and tenants under load, %d goroutines (%d Pacers of %d), %s; per pair, median of %d rounds of %d\n",
		loadGoroutines, loadPacers, loadGoroutines/loadPacers, mode.name, loadRounds, loadPairs)
	fmt.Fprintln(b.out, "| setting | Redis µs | ratio to Allow | CPU µs | ratio | calls a script call |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|---:|---:|")
	fmt.Fprintf(b.out, "| redis_rate v10 Allow, one call (writes its key; the median of its rounds) | %.2f | 1.00 | %.2f | 1.00 | |\n", median(allowF.usec), median(allowF.cpu))
	for i, u := range us {
		f := per[i]
		fmt.Fprintf(b.out, "| %s | %.2f | %.2fx | %.2f | %.2fx | %.2f |\n", u.r.name, median(f.usec), median(f.ru), median(f.cpu), median(f.rc), median(f.perCall))
	}
	return nil
}
