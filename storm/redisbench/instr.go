package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// instr: instructions per script call, counted by callgrind in a Redis
// started under valgrind. Unlike microseconds they repeat from run to run
// on a busy machine, so they show what a change to a script buys:
//
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/out.%p \
//	    redis-server --port 26500 --bind 127.0.0.1 --save "" --appendonly no &
//	go run ./storm/redisbench -redis 127.0.0.1:26500 -only instr -callgrind-pid $!
//
// Each figure covers the whole command: reading it off the socket, running
// the script, writing the reply.
func (b *bench) instr(ctx context.Context) error {
	measure, row, err := b.instrBase(ctx)
	if err != nil {
		return err
	}
	one := b.instrPair(ctx, measure, row)
	for _, c := range budgets {
		if err := one(c.name, pacer.Config{Limits: c.limits}); err != nil {
			return err
		}
	}
	// The same two limits as strict sliding windows (issue 12: within
	// 1.5x of the bucket budget's). A sliding rate's cost grows with the
	// sub-windows that hold a count: over a minute the 2,000 calls fill a
	// few of its 64; over a second, under callgrind, every one. Buckets of
	// one second beside them show the window's length alone changes
	// nothing for a bucket.
	rates := func(w time.Duration, sliding bool) pacer.Config {
		return pacer.Config{Rates: []pacer.Rate{
			{Unit: pacer.Requests, Limit: 1 << 40, Window: w, Sliding: sliding},
			{Unit: pacer.Tokens, Limit: 1 << 45, Window: w, Sliding: sliding},
		}}
	}
	if err := one("sliding RPM + TPM", rates(time.Minute, true)); err != nil {
		return err
	}
	if err := one("bucket requests + tokens per 1 s", rates(time.Second, false)); err != nil {
		return err
	}
	if err := one("sliding requests + tokens per 1 s (every sub-window filled)", rates(time.Second, true)); err != nil {
		return err
	}
	// A tenant inside a budget (issue 10: within 3.5x of GCRA).
	return b.instrTenants(ctx, measure, row)
}

// pairs: the instr part cut to the two pairs issue 10's cost goal names, the
// typical budget's and a tenant's, beside GCRA, then each one's floor (see
// floorRows): a quick check of a script change (about a minute under
// callgrind, against six for instr).
func (b *bench) pairs(ctx context.Context) error {
	measure, row, err := b.instrBase(ctx)
	if err != nil {
		return err
	}
	if err := b.instrPair(ctx, measure, row)(budgets[0].name, pacer.Config{Limits: budgets[0].limits}); err != nil {
		return err
	}
	const tname = "tenant in a budget (RPM + TPM each, Share 0.1), 1 tenant"
	if err := b.instrTenant(ctx, measure, row, tname, tenantConfig(), 1); err != nil {
		return err
	}
	if err := b.floorRows(ctx, measure, row, budgets[0].name, pacer.Config{Limits: budgets[0].limits}, "", floorUse{}); err != nil {
		return err
	}
	if err := b.floorRows(ctx, measure, row, tname, tenantConfig(), tenantID(0), floorUse{}); err != nil {
		return err
	}
	return b.regimeFloors(ctx, measure, row)
}

// regimeFloors: issue 23's regimes in use (see regimes.go), each beside
// its floor, with the stacks as long as the regime left them and a settle
// that writes its give-back.
func (b *bench) regimeFloors(ctx context.Context, measure func(func() error) (float64, error), row func(string, float64)) error {
	for _, r := range regimes(20)[1:] {
		v, u, err := b.regimeInstr(ctx, r, b.measureN(instrCalls/4))
		if err != nil {
			return err
		}
		stack, err := u.stackBytes(ctx)
		u.close(ctx)
		if err != nil {
			return err
		}
		row(fmt.Sprintf("%s: acquire + settle (stacks %d bytes)", r.name, stack), v)
		tenant := ""
		if r.tenants > 0 {
			tenant = tenantID(0)
		}
		use := floorUse{stack: stack, give: true, slots: r.cfg.Limits.Concurrency > 0}
		if err := b.floorRows(ctx, measure, row, r.name, r.cfg, tenant, use); err != nil {
			return err
		}
	}
	return nil
}

// instrCalls is how many calls each instr row averages.
const instrCalls = 2000

// instrPair returns a function measuring one budget's acquire, settle and
// their sum.
func (b *bench) instrPair(ctx context.Context, measure func(func() error) (float64, error), row func(string, float64)) func(string, pacer.Config) error {
	return func(name string, cfg pacer.Config) error {
		p, err := b.pacer(cfg)
		if err != nil {
			return err
		}
		warm(ctx, p)
		acq, set, err := acquireThenSettle(ctx, p, instrCalls, measure)
		if err != nil {
			return err
		}
		row(name+": acquire", acq)
		row(name+": settle", set)
		row(name+": acquire + settle", acq+set)
		return b.rdb.Del(ctx, keysOf(p)...).Err()
	}
}

// instrBase measures the trivial script and redis_rate's GCRA, prints
// their rows, and returns the measure and row functions every instr part
// shares: each later row is given as a ratio to those two.
func (b *bench) instrBase(ctx context.Context) (measure func(func() error) (float64, error), row func(string, float64), err error) {
	if b.cgPID == 0 {
		return nil, nil, fmt.Errorf("-callgrind-pid is required: the pid of a redis-server run under valgrind --tool=callgrind")
	}
	const n = instrCalls
	measure = func(f func() error) (float64, error) {
		if err := exec.Command("callgrind_control", "-z", strconv.Itoa(b.cgPID)).Run(); err != nil {
			return 0, fmt.Errorf("callgrind_control -z: %w", err)
		}
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		return b.dumpInstr(n)
	}
	trivial := redis.NewScript("return 1")
	allow, dropAllow := b.yardstick()
	defer dropAllow(ctx)
	_ = trivial.Run(ctx, b.rdb, []string{"x"}).Err()
	if err := warmYardstick(ctx, allow); err != nil {
		return nil, nil, err
	}
	base, err := measure(func() error { return trivial.Run(ctx, b.rdb, []string{"x"}).Err() })
	if err != nil {
		return nil, nil, err
	}
	g, err := measure(func() error { return allow(ctx) })
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(b.out, "## Instructions per call (callgrind; %d calls each, leases settled after all acquires)\n", n)
	fmt.Fprintln(b.out, "| script | k instructions | ratio to trivial | ratio to GCRA |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|")
	row = func(name string, v float64) {
		fmt.Fprintf(b.out, "| %s | %.1f | %.1f | %.2f |\n", name, v/1000, v/base, v/g)
	}
	row("trivial `return 1`", base)
	row("redis_rate Allow (GCRA that writes its key)", g)
	return measure, row, nil
}

// dumpInstr returns the instructions callgrind counted since the last
// zeroing (callgrind_control -e Ir: its totals, summed over threads), per
// call.
func (b *bench) dumpInstr(calls int) (float64, error) {
	out, err := exec.Command("callgrind_control", "-e", "Ir", strconv.Itoa(b.cgPID)).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("callgrind_control -e Ir: %w: %s", err, out)
	}
	var total float64
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "Th" {
			v, err := strconv.ParseFloat(strings.ReplaceAll(f[2], ",", ""), 64)
			if err != nil {
				return 0, fmt.Errorf("callgrind_control -e Ir: %q: %w", line, err)
			}
			total += v
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("callgrind_control -e Ir: no totals in %q", out)
	}
	return total / float64(calls), nil
}
