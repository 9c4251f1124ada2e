package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// group: the server-side cost of routing one call among three deployments
// (route.lua, one script call) against one budget's acquire, both RPM +
// TPM: when the first deployment has room, when only the third has, and
// when none has (three denials). Median of five rounds, in turn.
func (b *bench) group(ctx context.Context) error {
	const n, rounds = 5000, 5
	limits := budgets[0].limits
	single, err := b.pacer(pacer.Config{Limits: limits})
	if err != nil {
		return err
	}
	warm(ctx, single)
	defer b.rdb.Del(ctx, single.Keys()...)
	// mk returns a group of three budgets sharing a hash tag; full says
	// which of them start with no room (RPD 1, spent).
	mk := func(full ...bool) (*pacer.Group, error) {
		b.names++
		tag := fmt.Sprintf("g%d-%d", time.Now().UnixNano(), b.names)
		var ds []pacer.Deployment
		for i, f := range full {
			l := limits
			if f {
				l.RPD = 1
			}
			p, err := pacer.New(b.rdb, pacer.Config{Name: fmt.Sprintf("%s-%d", tag, i), HashTag: tag, KeyPrefix: "llmpacer-bench", Limits: l})
			if err != nil {
				return nil, err
			}
			warm(ctx, p) // spends a full one's only request
			ds = append(ds, pacer.Deployment{Pacer: p})
			defer func() { _ = b.rdb.Del(context.WithoutCancel(ctx), p.Keys()...) }()
		}
		return pacer.NewGroup(pacer.GroupConfig{Deployments: ds})
	}
	cases := []struct {
		name string
		full []bool
	}{
		{"group of 3, the first has room", []bool{false, false, false}},
		{"group of 3, only the third has room", []bool{true, true, false}},
		{"group of 3, none has room (3 denials)", []bool{true, true, true}},
	}
	groups := make([]*pacer.Group, len(cases))
	for i, c := range cases {
		if groups[i], err = mk(c.full...); err != nil {
			return err
		}
	}
	measure := func(f func() (*pacer.Lease, error)) (float64, error) {
		leases := make([]*pacer.Lease, 0, n)
		if err := b.reset(ctx); err != nil {
			return 0, err
		}
		for i := 0; i < n; i++ {
			l, err := f()
			if err != nil && !errors.Is(err, pacer.ErrNotYet) {
				return 0, err
			}
			if l != nil {
				leases = append(leases, l)
			}
		}
		u, _, err := b.usec(ctx)
		for _, l := range leases {
			_ = l.Settle(ctx, 60)
		}
		return u, err
	}
	per := make([][]float64, 1+len(cases))
	for round := 0; round < rounds; round++ {
		v, err := measure(func() (*pacer.Lease, error) { return single.TryAcquire(ctx, pacer.Request{Tokens: 100}) })
		if err != nil {
			return err
		}
		per[0] = append(per[0], v)
		for i, g := range groups {
			v, err := measure(func() (*pacer.Lease, error) {
				l, _, err := g.TryAcquire(ctx, pacer.Request{Tokens: 100})
				return l, err
			})
			if err != nil {
				return err
			}
			per[1+i] = append(per[1+i], v)
		}
	}
	base := median(per[0])
	fmt.Fprintf(b.out, "## Routing among deployments (INFO commandstats usec_per_call; median of %d rounds of %d admissions, RPM + TPM)\n", rounds, n)
	fmt.Fprintln(b.out, "| script | µs per call | ratio to one budget's acquire |")
	fmt.Fprintln(b.out, "|---|---:|---:|")
	fmt.Fprintf(b.out, "| one budget: acquire | %.2f | 1.00 |\n", base)
	for i, c := range cases {
		v := median(per[1+i])
		fmt.Fprintf(b.out, "| %s: route | %.2f | %.2f |\n", c.name, v, v/base)
	}
	return nil
}
