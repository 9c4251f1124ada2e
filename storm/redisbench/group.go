package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// group: the server-side cost of routing one call among three deployments
// (route.lua, one script call) against one budget's acquire, both RPM +
// TPM: when the first deployment has room, when only the third has, and
// when none has (three denials). Median of five rounds, in turn.
//
// Each case is measured twice: with route.lua as shipped, and with its
// look-up of a resent route (one ZSCORE per deployment) cut out, so the
// look-up's cost is a ratio within one run. The cut text runs through a
// second client whose hook swaps route.lua's hash for the cut one's; when
// the look-up's text is no longer found, those columns are left out.
func (b *bench) group(ctx context.Context) error {
	n, rounds := 5000, 5
	// unit: what a figure counts. Under callgrind (-callgrind-pid), the
	// instructions per call, which repeat from run to run: one round.
	unit, what := "µs", "INFO commandstats usec_per_call"
	if b.cgPID != 0 {
		n, rounds = 2000, 1
		unit, what = "k instructions", "callgrind"
	}
	limits := budgets[0].limits
	single, err := b.pacer(pacer.Config{Limits: limits})
	if err != nil {
		return err
	}
	warm(ctx, single)
	defer b.rdb.Del(ctx, keysOf(single)...)
	cut, err := b.routeWithoutLookup(ctx)
	if err != nil {
		return err
	}
	if cut != nil {
		defer cut.Close()
	}
	// mk returns a group of three budgets on rdb sharing a hash tag; full
	// says which of them start with no room (RPD 1, spent).
	mk := func(rdb *redis.Client, full ...bool) (*pacer.Group, error) {
		b.names++
		tag := fmt.Sprintf("g%d-%d", time.Now().UnixNano(), b.names)
		var ds []pacer.Deployment
		for i, f := range full {
			l := limits
			if f {
				l.RPD = 1
			}
			p, err := pacer.New(rdb, pacer.Config{Name: fmt.Sprintf("%s-%d", tag, i), HashTag: tag, KeyPrefix: "llmpacer-bench", Limits: l})
			if err != nil {
				return nil, err
			}
			warm(ctx, p) // spends a full one's only request
			ds = append(ds, pacer.Deployment{Pacer: p})
			defer func() { _ = b.rdb.Del(context.WithoutCancel(ctx), keysOf(p)...) }()
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
	// groups[2i] routes case i with route.lua, groups[2i+1] without the
	// look-up (nil when it is not measured).
	groups := make([]*pacer.Group, 2*len(cases))
	for i, c := range cases {
		if groups[2*i], err = mk(b.rdb, c.full...); err != nil {
			return err
		}
		if cut == nil {
			continue
		}
		if groups[2*i+1], err = mk(cut, c.full...); err != nil {
			return err
		}
	}
	measure := func(f func() (*pacer.Lease, error)) (float64, error) {
		leases := make([]*pacer.Lease, 0, n)
		if err := b.zero(ctx); err != nil {
			return 0, err
		}
		for i := 0; i < n; i++ {
			l, err := f()
			if err != nil && !errors.Is(err, pacer.ErrWaitTimeout) {
				return 0, err
			}
			if l != nil {
				leases = append(leases, l)
			}
		}
		u, err := b.per(ctx, n)
		for _, l := range leases {
			_ = l.Settle(ctx, 60)
		}
		return u, err
	}
	per := make([][]float64, 1+len(groups))
	for round := 0; round < rounds; round++ {
		v, err := measure(func() (*pacer.Lease, error) { return single.TryAcquire(ctx, pacer.Request{Tokens: 100}) })
		if err != nil {
			return err
		}
		per[0] = append(per[0], v)
		for i, g := range groups {
			if g == nil {
				continue
			}
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
	fmt.Fprintf(b.out, "## Routing among deployments (%s; median of %d rounds of %d admissions, RPM + TPM)\n", what, rounds, n)
	if cut == nil {
		fmt.Fprintf(b.out, "| script | %s per call | ratio to one budget's acquire |\n", unit)
		fmt.Fprintln(b.out, "|---|---:|---:|")
		fmt.Fprintf(b.out, "| one budget: acquire | %.2f | 1.00 |\n", base)
		for i, c := range cases {
			v := median(per[1+2*i])
			fmt.Fprintf(b.out, "| %s: route | %.2f | %.2f |\n", c.name, v, v/base)
		}
		return nil
	}
	fmt.Fprintf(b.out, "| script | %[1]s per call | ratio to one budget's acquire | without the resend look-up: %[1]s | ratio | route / without |\n", unit)
	fmt.Fprintln(b.out, "|---|---:|---:|---:|---:|---:|")
	fmt.Fprintf(b.out, "| one budget: acquire | %.2f | 1.00 | | | |\n", base)
	for i, c := range cases {
		v, w := median(per[1+2*i]), median(per[2+2*i])
		fmt.Fprintf(b.out, "| %s: route | %.2f | %.2f | %.2f | %.2f | %.2f |\n", c.name, v, v/base, w, w/base, v/w)
	}
	return nil
}

// routeWithoutLookup returns a client that runs route.lua without its
// look-up of a resent route (see group), or nil when the look-up's text is
// not found. The cut script is loaded first, so EVALSHA never falls back.
func (b *bench) routeWithoutLookup(ctx context.Context) (*redis.Client, error) {
	src := lua.Source("route")
	i := strings.Index(src, "\n-- Admitted before, by an earlier run of this route")
	j := strings.Index(src, "\n-- ord: the order of the tries")
	if i < 0 || j < i {
		return nil, nil
	}
	sha, err := b.rdb.ScriptLoad(ctx, src[:i]+src[j:]).Result()
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(b.rdb.Options())
	rdb.AddHook(swapScript{from: lua.Route.Hash(), to: sha})
	return rdb, nil
}

// swapScript is a go-redis hook that sends EVALSHA of script to instead of
// script from.
type swapScript struct{ from, to string }

func (h swapScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h swapScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h swapScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) >= 2 && cmd.Name() == "evalsha" && a[1] == h.from {
			a[1] = h.to
		}
		return next(ctx, cmd)
	}
}

// zero starts a count: INFO commandstats reset, or callgrind's counters
// zeroed under -callgrind-pid.
func (b *bench) zero(ctx context.Context) error {
	if b.cgPID == 0 {
		return b.reset(ctx)
	}
	if err := exec.Command("callgrind_control", "-z", strconv.Itoa(b.cgPID)).Run(); err != nil {
		return fmt.Errorf("callgrind_control -z: %w", err)
	}
	return nil
}

// per returns the cost of each of the n calls since zero: µs of EVALSHA,
// or k instructions of the whole command under -callgrind-pid.
func (b *bench) per(ctx context.Context, n int) (float64, error) {
	if b.cgPID == 0 {
		u, _, err := b.usec(ctx)
		return u, err
	}
	v, err := b.dumpInstr(n)
	return v / 1000, err
}
