package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
)

// load: the regimes of issue 23 under the load they name, 64 goroutines
// at once (four Pacers of 16, four processes as far as Redis can tell),
// each keeping one lease in flight: it acquires a lease of 100 tokens,
// then settles its previous one at 60. Each regime runs with its calls
// sent alone (wire.GroupMax = 1, as before group commit) and by group
// commit with 1 (the default) and 2 script calls of each kind in flight,
// and with 1 in one Pacer of all 64 goroutines (one process), and
// redis_rate's Allow runs from the same 64 goroutines. Per pair (per
// call for Allow): Redis time (INFO commandstats usec of EVALSHA and
// EVAL) and the server's CPU (INFO cpu, user + sys), over rounds of
// loadPairs; the median of loadRounds, the scripts in turn within a
// round, each after a round of Allow that its ratios are to (the median
// of those ratios). Also the calls a script call carried, and pairs a second (a
// figure of this machine, not of Redis).
const loadPairs, loadRounds, loadGoroutines, loadPacers = 12000, 5, 64, 4

func (b *bench) load(ctx context.Context) error {
	allow, drop := b.yardstick()
	defer drop(ctx)
	if err := warmYardstick(ctx, allow); err != nil {
		return err
	}
	type setup struct {
		r regime
		m loadMode
	}
	var ss []setup
	var us []*loadRunner
	for _, r := range regimes(1) {
		for _, m := range loadModes {
			u, err := b.newLoadRunner(ctx, r, m, 1, false)
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			defer u.close(ctx)
			ss, us = append(ss, setup{r, m}), append(us, u)
		}
	}
	allowF, per, err := b.loadRounds(ctx, allow, us)
	if err != nil {
		return err
	}
	bu, bc := median(allowF.usec), median(allowF.cpu)
	fmt.Fprintf(b.out, "## Under load (issue 23): %d goroutines (%d Pacers of %d), each with one lease in flight; per pair, median of %d rounds of %d\n",
		loadGoroutines, loadPacers, loadGoroutines/loadPacers, loadRounds, loadPairs)
	fmt.Fprintln(b.out, "| regime | calls sent | Redis µs | ratio to Allow | server CPU µs | ratio to Allow | calls a script call | pairs/s |")
	fmt.Fprintln(b.out, "|---|---|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(b.out, "| redis_rate v10 Allow, one call (writes its key; the median of its rounds) | | %.2f | 1.00 | %.2f | 1.00 | | |\n", bu, bc)
	for i, s := range ss {
		f := per[i]
		fmt.Fprintf(b.out, "| %s | %s | %.2f | %.2fx | %.2f | %.2fx | %.2f | %.0f |\n", s.r.name, s.m.name, median(f.usec), median(f.ru), median(f.cpu), median(f.rc), median(f.perCall), median(f.rate))
	}
	return nil
}

// loadFigs are a setting's figures over the rounds, per pair (per call
// for Allow), and ru and rc their ratios to the Allow round before each.
type loadFigs struct{ usec, cpu, ru, rc, perCall, rate []float64 }

// loadRounds runs loadRounds rounds, each of every runner in turn, and
// returns Allow's figures and each runner's. Each runner's round follows
// a round of Allow of its own, and its ratios are to that one: the
// machine's load drifts within a round.
func (b *bench) loadRounds(ctx context.Context, allow func(context.Context) error, us []*loadRunner) (loadFigs, []loadFigs, error) {
	var allowF loadFigs
	per := make([]loadFigs, len(us))
	for round := 0; round < loadRounds; round++ {
		for i, u := range us {
			a, err := b.loadRound(ctx, func(int) error { return allow(ctx) }, false)
			if err != nil {
				return allowF, nil, err
			}
			allowF.usec, allowF.cpu = append(allowF.usec, a.usec), append(allowF.cpu, a.cpu)
			if err := u.ready(ctx); err != nil {
				return allowF, nil, fmt.Errorf("%s: %w", u.r.name, err)
			}
			m, err := b.loadRound(ctx, u.pair, true)
			if err != nil {
				return allowF, nil, fmt.Errorf("%s: %w", u.r.name, err)
			}
			f := &per[i]
			f.usec, f.cpu, f.perCall, f.rate = append(f.usec, m.usec), append(f.cpu, m.cpu), append(f.perCall, m.perCall), append(f.rate, m.rate)
			f.ru, f.rc = append(f.ru, m.usec/a.usec), append(f.rc, m.cpu/a.cpu)
		}
	}
	return allowF, per, nil
}

// loadMode is how a regime's Pacers send their calls: wire.GroupMax,
// wire.GroupFlight and wire.GroupYields when they are made.
type loadMode struct {
	name                        string
	max, flight, yields, pacers int
}

var loadModes = []loadMode{
	{"alone", 1, 1 << 20, 0, loadPacers},
	{"group commit, 1 in flight (default)", 32, 1, 4, loadPacers},
	{"group commit, 1 in flight, no yield (before round 14)", 32, 1, 0, loadPacers},
	{"group commit, 2 in flight", 32, 2, 4, loadPacers},
	{"group commit, 1 in flight, one Pacer of 64", 32, 1, 4, 1},
	{"group commit, 1 in flight, one Pacer of 64, no yield", 32, 1, 0, 1},
}

// loadMeasure is one round's figures, per pair (or call).
type loadMeasure struct {
	usec, cpu float64
	perCall   float64 // calls (two a pair) a script call carried
	rate      float64
}

// loadRound runs f loadPairs times from loadGoroutines goroutines (f's
// argument is the goroutine's index) and returns the server's cost per
// call of f. pairs says f is an acquire and a settle.
func (b *bench) loadRound(ctx context.Context, f func(int) error, pairs bool) (loadMeasure, error) {
	var m loadMeasure
	if err := b.reset(ctx); err != nil {
		return m, err
	}
	cpu0, err := b.serverCPU(ctx)
	if err != nil {
		return m, err
	}
	var wg sync.WaitGroup
	errs := make([]error, loadGoroutines)
	start := time.Now()
	for g := 0; g < loadGoroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < loadPairs/loadGoroutines; i++ {
				if err := f(g); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return m, err
		}
	}
	n := float64(loadPairs / loadGoroutines * loadGoroutines)
	cpu1, err := b.serverCPU(ctx)
	if err != nil {
		return m, err
	}
	usec, calls, err := b.scriptStats(ctx)
	if err != nil {
		return m, err
	}
	m.usec, m.cpu, m.rate = usec/n, (cpu1-cpu0)*1e6/n, n/took.Seconds()
	if pairs && calls > 0 {
		m.perCall = 2 * n / float64(calls)
	}
	return m, nil
}

// scriptStats returns the usec and calls of EVALSHA, EVAL and FCALL since
// the last reset (a Pacer sends EVAL once for a script Redis had not
// loaded, and its batches by FCALL on Redis 7).
func (b *bench) scriptStats(ctx context.Context) (float64, int64, error) {
	info, err := b.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	var usec float64
	var calls int64
	for _, line := range strings.Split(info, "\n") {
		rest, ok := scriptStat(line)
		if !ok {
			continue
		}
		for _, kv := range strings.Split(strings.TrimSpace(rest), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				c, _ := strconv.ParseInt(v, 10, 64)
				calls += c
			case "usec":
				u, _ := strconv.ParseFloat(v, 64)
				usec += u
			}
		}
	}
	return usec, calls, nil
}

// serverCPU returns the server's CPU seconds so far, user and system.
func (b *bench) serverCPU(ctx context.Context) (float64, error) {
	info, err := b.rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	user, err1 := strconv.ParseFloat(field(info, "used_cpu_user"), 64)
	sys, err2 := strconv.ParseFloat(field(info, "used_cpu_sys"), 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("INFO cpu: no used_cpu_user or used_cpu_sys")
	}
	return user + sys, nil
}

// loadRunner is one regime's budget under load: its Pacers, each
// goroutine's leases in flight, and the TATs kept ahead of the clock.
type loadRunner struct {
	runner // the TATs' push, on the first Pacer's keys
	ps     []*pacer.Pacer
	// held is each goroutine's ring of leases in flight, its oldest at
	// oldest[g]; a ring of none: each lease is settled once acquired.
	held   [][]*pacer.Lease
	oldest []int
	calls  []int // each goroutine's pairs so far, for its tenant
	// populated: the tenants' hashes are written by populate, anew before
	// each round, rather than by calls.
	populated bool
}

// newLoadRunner makes r's budget and its Pacers, sending as m says, each
// goroutine keeping ring leases in flight, and fills its leases in flight
// and stacks, and its tenants' hashes: by populate if populated says so,
// else by calls.
func (b *bench) newLoadRunner(ctx context.Context, r regime, m loadMode, ring int, populated bool) (*loadRunner, error) {
	max, flight, yields := wire.GroupMax, wire.GroupFlight, wire.GroupYields
	wire.GroupMax, wire.GroupFlight, wire.GroupYields = m.max, m.flight, m.yields
	defer func() { wire.GroupMax, wire.GroupFlight, wire.GroupYields = max, flight, yields }()
	b.names++
	cfg := r.cfg
	cfg.Name = fmt.Sprintf("load%d-%d", time.Now().UnixNano(), b.names)
	u := &loadRunner{held: make([][]*pacer.Lease, loadGoroutines), oldest: make([]int, loadGoroutines), calls: make([]int, loadGoroutines), populated: populated}
	for g := range u.held {
		u.held[g] = make([]*pacer.Lease, ring)
	}
	for range m.pacers {
		p, err := b.pacer(cfg)
		if err != nil {
			return nil, err
		}
		u.ps = append(u.ps, p)
	}
	u.runner = runner{b: b, r: r, p: u.ps[0]}
	warm(ctx, u.ps[0])
	if err := u.ready(ctx); err != nil {
		return nil, err
	}
	// A ring's worth of pairs a goroutine and one more, and a call for
	// each tenant not populated: leases in flight, stacks and tenants'
	// hashes filled.
	rounds := r.tenants/loadGoroutines + 1
	if populated {
		rounds = 0
	}
	for round := 0; round < rounds+ring+1; round++ {
		for g := range loadGoroutines {
			if err := u.pair(g); err != nil {
				return nil, err
			}
		}
	}
	return u, nil
}

// ready readies the budget for a round: its tenants' hashes written
// anew, if populated, and its TATs pushed ahead.
func (u *loadRunner) ready(ctx context.Context) error {
	if u.populated {
		if err := u.b.populate(ctx, u.p, u.r.tenants); err != nil {
			return err
		}
	}
	return u.push(ctx)
}

// pair acquires a lease for goroutine g and settles its oldest in flight
// (the one it acquired, with a ring of none).
func (u *loadRunner) pair(g int) error {
	ctx := context.Background()
	req := pacer.Request{Tokens: 100}
	if u.r.tenants > 0 {
		req.Tenant = tenantID((g + loadGoroutines*u.calls[g]) % u.r.tenants)
		u.calls[g]++
	}
	l, err := u.ps[g%len(u.ps)].TryAcquire(ctx, req)
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("%s: refused a call", u.r.name)
	}
	if ring := u.held[g]; len(ring) > 0 {
		i := u.oldest[g]
		l, ring[i] = ring[i], l
		u.oldest[g] = (i + 1) % len(ring)
	}
	if l == nil {
		return nil
	}
	if err := l.Settle(ctx, 60); err != nil {
		if errors.Is(err, pacer.ErrLeaseExpired) {
			return fmt.Errorf("%s: a lease expired in flight: %w", u.r.name, err)
		}
		return err
	}
	return nil
}

func (u *loadRunner) close(ctx context.Context) {
	for _, ring := range u.held {
		for _, l := range ring {
			if l != nil {
				_ = l.Settle(ctx, 60)
			}
		}
	}
	u.b.dropTenants(ctx, u.p, u.r.tenants)
	u.b.rdb.Del(ctx, keysOf(u.p)...)
}

// scriptStat returns the fields of an INFO commandstats line of a script
// call (EVALSHA, EVAL or FCALL: a Pacer's batches go by FCALL), and
// whether it is one.
func scriptStat(line string) (string, bool) {
	for _, c := range []string{"cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_fcall:"} {
		if rest, ok := strings.CutPrefix(line, c); ok {
			return rest, true
		}
	}
	return "", false
}
