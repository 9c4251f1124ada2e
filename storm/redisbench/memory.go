package main

import (
	"context"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// memory: bytes a budget keeps in Redis (MEMORY USAGE of each of its keys,
// summed) after a window of traffic at 10 and at 10,000 calls per window,
// each call acquired and settled: a bucket budget with RPM and TPM beside
// the same two limits as strict sliding windows. A bucket keeps a TAT and
// a give-back stack per limit whatever the traffic; a sliding rate keeps a
// count per sub-window with traffic in it, at most 65.
func (b *bench) memory(ctx context.Context) error {
	const window = 10 * time.Second
	type budget struct {
		name string
		cfg  pacer.Config
	}
	budgets := []budget{
		{"bucket RPM + TPM", pacer.Config{Rates: []pacer.Rate{
			{Unit: pacer.Requests, Limit: 1 << 40, Window: window},
			{Unit: pacer.Tokens, Limit: 1 << 45, Window: window},
		}}},
		{"sliding RPM + TPM", pacer.Config{Rates: []pacer.Rate{
			{Unit: pacer.Requests, Limit: 1 << 40, Window: window, Sliding: true},
			{Unit: pacer.Tokens, Limit: 1 << 45, Window: window, Sliding: true},
		}}},
	}
	fmt.Fprintf(b.out, "## Memory per budget (MEMORY USAGE of its keys after one %v window of calls, spread evenly, each acquired and settled)\n", window)
	fmt.Fprintln(b.out, "| budget | calls per window | bytes | of which the state hash |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|")
	for _, calls := range []int{10, 10_000} {
		for _, bu := range budgets {
			p, err := b.pacer(bu.cfg)
			if err != nil {
				return err
			}
			gap := window / time.Duration(calls)
			start := time.Now()
			for i := range calls {
				if d := time.Until(start.Add(time.Duration(i) * gap)); d > 0 {
					time.Sleep(d)
				}
				l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1000})
				if err != nil {
					return err
				}
				if err := l.Settle(ctx, 600); err != nil {
					return err
				}
			}
			var total, state int64
			for i, k := range keysOf(p) {
				n, err := b.rdb.MemoryUsage(ctx, k).Result()
				if err != nil && err.Error() != "redis: nil" {
					return fmt.Errorf("MEMORY USAGE %s: %w", k, err)
				}
				total += n
				if i == 0 {
					state = n
				}
			}
			fmt.Fprintf(b.out, "| %s | %d | %d | %d |\n", bu.name, calls, total, state)
			if err := b.rdb.Del(ctx, keysOf(p)...).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}
