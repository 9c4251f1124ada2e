package main

import (
	"context"
	"math"
	"slices"

	"github.com/llmpacer/llmpacer/pacer"
)

// room is the smallest fraction left of any of ls (1 with none).
func room(ls ...[]level) float64 {
	r := 1.0
	for _, l := range ls {
		for _, x := range l {
			if x.Capacity > 0 {
				r = math.Min(r, x.Level/float64(x.Capacity))
			}
		}
	}
	return r
}

// readTenants reads up to -tenant-scan of hashes and keeps the -tenants
// with the least room: with a definition that has tenants, the smallest
// fraction left of any rate or share; without, the longest time until a
// bucket is full again.
func (r reader) readTenants(ctx context.Context, p *pacer.Pacer, b *budget, hashes []string) (*tenants, error) {
	slices.Sort(hashes) // the same tenants are read at every refresh
	ts := &tenants{Found: len(hashes)}
	hashes = hashes[:min(len(hashes), r.o.tenantScan)]
	ts.Read = len(hashes)
	all := make([]tenant, len(hashes))
	// With a definition that has tenants, each tenant's buckets are read
	// as it defines them; without (none stored, or stored without
	// tenants: removed, or set only in some process's Config), the raw
	// state.
	var def tenantDef
	withDef := p != nil
	if withDef {
		s, err := p.Snapshot(ctx)
		if err != nil {
			return ts, err
		}
		def, withDef = tenantDefOf(p.Config(), s)
	}
	one := func(ctx context.Context, i int, withDef bool) error {
		t := tenant{Hash: hashes[i]}
		if !withDef {
			raw, err := r.rawTenant(ctx, b.Name, hashes[i])
			t.Raw = append([]field{}, raw...) // not nil: read raw
			all[i] = t
			return err
		}
		rates, shares, err := r.readTenant(ctx, b.Name, hashes[i], def)
		if err != nil {
			return err
		}
		for _, rs := range rates {
			t.Rates = append(t.Rates, levelOf("", rs))
		}
		for _, rs := range shares {
			t.Shares = append(t.Shares, levelOf("share of ", rs))
		}
		rm := room(t.Rates, t.Shares)
		t.Room = &rm
		all[i] = t
		return nil
	}
	err := parallel(ctx, len(hashes), func(ctx context.Context, i int) error { return one(ctx, i, withDef) })
	if err != nil {
		return ts, err
	}
	slices.SortStableFunc(all, func(a, c tenant) int {
		if a.Raw != nil || c.Raw != nil {
			return -cmpFloat(longest(a.Raw), longest(c.Raw))
		}
		return cmpFloat(*a.Room, *c.Room)
	})
	ts.Busiest = all[:min(len(all), r.o.tenants)]
	return ts, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// longest is the longest time any of fs needs to fill again.
func longest(fs []field) float64 {
	m := 0.0
	for _, f := range fs {
		m = math.Max(m, f.FullInS)
	}
	return m
}

// readers bounds the reads of one budget's tenants run at once: enough
// to hide a remote Redis's round trips, few enough not to crowd it.
const readers = 8

// parallel runs f(0..n-1) on up to readers goroutines and returns the
// first error.
func parallel(ctx context.Context, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, readers)
	for range min(readers, n) {
		go func() {
			var err error
			for i := range next {
				if err == nil {
					if err = f(ctx, i); err != nil {
						cancel()
					}
				}
			}
			errs <- err
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	var first error
	for range min(readers, n) {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
