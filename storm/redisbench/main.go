// Command redisbench measures what one admission costs against a real Redis:
// an acquire and its settle in four regimes of load (buckets full; TATs
// ahead of the clock with 64 leases in flight; every limit in use; a
// tenant), in Redis time against a GCRA call that writes its key (see
// regimes.go); script calls per second beside a trivial EVALSHA from the same client and
// goroutines, the scripts' server-side cost (INFO commandstats) and how it
// grows with leases in flight and with the number of budgets, Redis commands
// per admitted call when 64 goroutines compete for a saturated budget, the
// share of the limit that a saturated budget admits, and the cost of the one
// acquire that meets a mass expiry of 100,000 leases, and what a call on a
// tenant inside a budget costs, over 1 to 100,000 tenants.
//
//	go run ./storm/redisbench -redis 127.0.0.1:6379
//
// Point it only at a Redis on this machine: it writes keys under the prefix
// "llmpacer-bench" and resets the server's command statistics.
package main

import (
	"cmp"
	"context"
	_ "embed"
	"flag"
	"fmt"
	"github.com/llmpacer/llmpacer/internal/wire"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// gcraSrc is go-redis/redis_rate's one-limit GCRA script, the usual
// yardstick for a rate-limit script's cost. Every figure is set against
// it run as redis_rate v10's Allow runs it, with arguments that admit the
// call and write its key (see yardstick): with rate = burst = 2^40, as
// this benchmark once ran it, the increment falls below a double's
// resolution and the script skips its SET, a third of its cost.
//
//go:embed gcra.lua
var gcraSrc string

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "redisbench:", err)
		os.Exit(1)
	}
}

type bench struct {
	rdb   *redis.Client
	out   io.Writer
	dur   time.Duration
	names int
	cgPID int // a redis-server under callgrind, for the instr part
	// dumps: with -profile, callgrind writes each measured round's counts
	// to a file of its own (callgrind_control -d), for callgrind_annotate.
	dumps bool
	label string // the dump's name: what is being measured
	// regime: with -only iregimes, only this regime (1 to 4; 0: all).
	regime int
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("redisbench", flag.ContinueOnError)
	addr := fs.String("redis", "127.0.0.1:6379", "Redis address (loopback only)")
	dur := fs.Duration("d", 2*time.Second, "duration of each throughput run")
	only := fs.String("only", "", "comma-separated parts to run: regimes,load,flat,throughput,cost,growth,saturated,expiry,memory,tenants,group (default all), or instr, anatomy, pairs, iregimes, levers, batch, unused, args (under callgrind)")
	cgPID := fs.Int("callgrind-pid", 0, "with -only instr, anatomy, pairs, iregimes, levers, batch, unused, args or group: the pid of a redis-server run under valgrind --tool=callgrind")
	dumps := fs.Bool("profile", false, "with -callgrind-pid and -only iregimes: callgrind also dumps each measured round's counts to a file of its own, named for the regime (see its --callgrind-out-file), for callgrind_annotate")
	sources := fs.String("sources", "", "write acquire.lua and settle.lua as sent, and their SHA1s in shas, to this directory (for lineprof/lineprof.lua), and exit")
	regime := fs.Int("regime", 0, "with -only iregimes: only this regime, 1 to 4 (buckets full, in use, every limit, a tenant); 0 runs all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sources != "" {
		return writeSources(*sources, out)
	}
	if *regime < 0 || *regime > 4 {
		return fmt.Errorf("-regime %d: want 1 to 4 (buckets full, in use, every limit, a tenant), or 0 for all", *regime)
	}
	if !strings.HasPrefix(*addr, "127.") && !strings.HasPrefix(*addr, "localhost:") && !strings.HasPrefix(*addr, "[::1]:") {
		return fmt.Errorf("-redis %s: benchmarks run against loopback addresses only", *addr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 128})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	info, _ := rdb.Info(ctx, "server").Result()
	fmt.Fprintf(out, "redis %s, GOMAXPROCS %s\n\n", field(info, "redis_version"), os.Getenv("GOMAXPROCS"))
	b := &bench{rdb: rdb, out: out, dur: *dur, cgPID: *cgPID, dumps: *dumps, regime: *regime}
	parts := []struct {
		name string
		f    func(context.Context) error
	}{
		{"regimes", b.regimes}, {"throughput", b.throughput}, {"cost", b.cost}, {"growth", b.growth},
		{"saturated", b.saturated}, {"expiry", b.expiry}, {"memory", b.memory}, {"tenants", b.tenants}, {"group", b.group}, {"instr", b.instr}, {"anatomy", b.anatomy}, {"pairs", b.pairs}, {"iregimes", b.iregimes}, {"levers", b.levers}, {"batch", b.batch}, {"unused", b.unused}, {"args", b.args}, {"load", b.load}, {"flat", b.flat},
	}
	for _, p := range parts {
		if *only == "" && (p.name == "instr" || p.name == "anatomy" || p.name == "pairs" || p.name == "iregimes" || p.name == "levers" || p.name == "batch" || p.name == "unused" || p.name == "args") || *only != "" && !strings.Contains(","+*only+",", ","+p.name+",") {
			continue // instr needs a Redis under callgrind: only when asked
		}
		if err := p.f(ctx); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		fmt.Fprintln(out)
	}
	return nil
}

func (b *bench) pacer(cfg pacer.Config) (*pacer.Pacer, error) {
	b.names++
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("b%d-%d", time.Now().UnixNano(), b.names)
	}
	cfg.KeyPrefix = "llmpacer-bench"
	return pacer.New(b.rdb, cfg)
}

// ample is a budget no benchmark run can exhaust, with every limit set so
// that the script does all of its work.
var ample = pacer.Limits{RPM: 1 << 40, TPM: 1 << 45, RPD: 1 << 40, TPD: 1 << 46, Concurrency: 1 << 30}

// budgets are the two budgets the per-call figures are given for: a typical
// one, and one with every limit.
var budgets = []struct {
	name   string
	limits pacer.Limits
}{
	{"RPM + TPM", pacer.Limits{RPM: 1 << 40, TPM: 1 << 45}},
	{"all limits + concurrency", ample},
}

// parallel runs f from g goroutines for d and returns the calls per second.
func parallel(g int, d time.Duration, f func() error) (float64, error) {
	var n atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := f(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// throughput: script calls per second, acquire and settle counted
// separately, beside a trivial EVALSHA from the same client and goroutines.
func (b *bench) throughput(ctx context.Context) error {
	trivial := redis.NewScript("return 1")
	fmt.Fprintln(b.out, "## Script calls per second (same client, same goroutines; median of 3 alternating rounds)")
	fmt.Fprintln(b.out, "| budget | goroutines | trivial EVALSHA/s | acquire+settle pairs/s | script calls/s | ratio to trivial |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|---:|---:|")
	for _, c := range budgets {
		p, err := b.pacer(pacer.Config{Limits: c.limits})
		if err != nil {
			return err
		}
		for _, g := range []int{1, 8, 64} {
			var bases, ours, ratios []float64
			for round := 0; round < 3; round++ {
				base, err := parallel(g, b.dur, func() error { return trivial.Run(ctx, b.rdb, []string{"x"}).Err() })
				if err != nil {
					return err
				}
				pairs, err := parallel(g, b.dur, func() error {
					l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100})
					if err != nil {
						return err
					}
					if l == nil {
						return fmt.Errorf("ample budget refused a call")
					}
					return l.Settle(ctx, 60)
				})
				if err != nil {
					return err
				}
				bases, ours, ratios = append(bases, base), append(ours, pairs), append(ratios, 2*pairs/base)
			}
			fmt.Fprintf(b.out, "| %s | %d | %.0f | %.0f | %.0f | %.2f |\n", c.name, g, median(bases), median(ours), 2*median(ours), median(ratios))
		}
		_ = b.rdb.Del(ctx, keysOf(p)...).Err()
	}
	return nil
}

// median of three or more values.
func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// usec returns the server's usec per call and calls for EVALSHA since the
// last reset (usecTotal's, divided).
func (b *bench) usec(ctx context.Context) (float64, int64, error) {
	total, calls, err := b.usecTotal(ctx)
	if err != nil || calls == 0 {
		return 0, calls, err
	}
	return total / float64(calls), calls, nil
}

func (b *bench) reset(ctx context.Context) error { return b.rdb.ConfigResetStat(ctx).Err() }

// cost: server-side µs per call of a trivial script, redis_rate's GCRA, and
// acquire and settle, for a budget with every limit set and for a typical
// one (RPM and TPM). The machine is shared and noisy: each figure is the
// median of five rounds, the scripts measured in turn within each round.
func (b *bench) cost(ctx context.Context) error {
	const n, rounds = 10000, 5
	trivial := redis.NewScript("return 1")
	_ = trivial.Run(ctx, b.rdb, []string{"x"}).Err() // loaded: no EVAL fallback counted
	measure := func(f func() error) (float64, error) {
		if err := b.reset(ctx); err != nil {
			return 0, err
		}
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		u, _, err := b.usec(ctx)
		return u, err
	}
	allow, dropAllow := b.yardstick()
	defer dropAllow(ctx)
	cases := make([]struct {
		name string
		p    *pacer.Pacer
	}, len(budgets))
	for i := range cases {
		cases[i].name = budgets[i].name
		p, err := b.pacer(pacer.Config{Limits: budgets[i].limits})
		if err != nil {
			return err
		}
		warm(ctx, p)
		defer b.rdb.Del(ctx, keysOf(p)...)
		cases[i].p = p
	}
	// per[0] trivial, per[1] GCRA, then acquire, settle and pairs of each
	// case.
	per := make([][]float64, 2+3*len(cases))
	for round := 0; round < rounds; round++ {
		v, err := measure(func() error { return trivial.Run(ctx, b.rdb, []string{"x"}).Err() })
		if err != nil {
			return err
		}
		per[0] = append(per[0], v)
		if v, err = measure(func() error { return allow(ctx) }); err != nil {
			return err
		}
		per[1] = append(per[1], v)
		for i, c := range cases {
			acq, set, err := acquireThenSettle(ctx, c.p, n, measure)
			if err != nil {
				return err
			}
			pair, err := measure(func() error {
				l, err := c.p.TryAcquire(ctx, pacer.Request{Tokens: 100})
				if err != nil {
					return err
				}
				return l.Settle(ctx, 60)
			})
			if err != nil {
				return err
			}
			per[2+3*i] = append(per[2+3*i], acq)
			per[3+3*i] = append(per[3+3*i], set)
			per[4+3*i] = append(per[4+3*i], 2*pair) // usec_per_call averages the two scripts
		}
	}
	base, g := median(per[0]), median(per[1])
	fmt.Fprintf(b.out, "## Server-side cost (INFO commandstats usec_per_call; median of %d rounds of %d calls)\n", rounds, n)
	fmt.Fprintln(b.out, "| script | µs per call | ratio to trivial | ratio to GCRA |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|")
	row := func(name string, v float64) {
		fmt.Fprintf(b.out, "| %s | %.2f | %.1f | %.2f |\n", name, v, v/base, v/g)
	}
	row("trivial `return 1`", base)
	row("redis_rate Allow (GCRA that writes its key)", g)
	for i, c := range cases {
		acq, set := median(per[2+3*i]), median(per[3+3*i])
		row(c.name+": acquire (0 to 10,000 in flight)", acq)
		row(c.name+": settle (10,000 to 0 in flight)", set)
		row(c.name+": acquire + settle", acq+set)
		row(c.name+": acquire + settle, as pairs (1 in flight)", median(per[4+3*i]))
	}
	return nil
}

// warm runs one admission so that the scripts are loaded before anything is
// measured: an EVAL fallback is not what a figure should count.
func warm(ctx context.Context, p *pacer.Pacer) {
	if l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1}); err == nil && l != nil {
		_ = l.Settle(ctx, 1)
	}
}

// acquireThenSettle measures n acquires of 100 tokens on p, then the n
// settles of those leases (60 tokens used): the two scripts apart, with up
// to n leases in flight.
func acquireThenSettle(ctx context.Context, p *pacer.Pacer, n int, measure func(func() error) (float64, error)) (acq, set float64, err error) {
	leases := make([]*pacer.Lease, 0, n)
	acq, err = measure(func() error {
		l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100})
		leases = append(leases, l)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	i := 0
	set, err = measure(func() error { i++; return leases[i-1].Settle(ctx, 60) })
	return acq, set, err
}

// growth: acquire + settle cost with many leases in flight, and over many budgets.
func (b *bench) growth(ctx context.Context) error {
	const n = 5000
	pair := func(p *pacer.Pacer) error {
		l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100})
		if err != nil {
			return err
		}
		return l.Settle(ctx, 60)
	}
	fmt.Fprintln(b.out, "## Growth: µs per script call (acquire and settle averaged)")
	fmt.Fprintln(b.out, "| leases in flight | µs per call |")
	fmt.Fprintln(b.out, "|---:|---:|")
	for _, inflight := range []int{0, 1000, 10000, 100000} {
		p, err := b.pacer(pacer.Config{Limits: ample})
		if err != nil {
			return err
		}
		pipe := b.rdb.Pipeline()
		for i := 0; i < inflight; i++ {
			// Held leases, added as acquire.lua adds them (far expiry).
			pipe.ZAdd(ctx, keysOf(p)[1], redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: fmt.Sprintf("held-%d", i)})
			if i%1000 == 999 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		_ = pair(p)
		if err := b.reset(ctx); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := pair(p); err != nil {
				return err
			}
		}
		u, _, err := b.usec(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(b.out, "| %d | %.2f |\n", inflight, u)
		_ = b.rdb.Del(ctx, keysOf(p)...).Err()
	}
	fmt.Fprintln(b.out)
	fmt.Fprintln(b.out, "| budgets in use | µs per call |")
	fmt.Fprintln(b.out, "|---:|---:|")
	for _, budgets := range []int{1, 100, 10000} {
		ps := make([]*pacer.Pacer, budgets)
		for i := range ps {
			p, err := b.pacer(pacer.Config{Limits: ample})
			if err != nil {
				return err
			}
			ps[i] = p
			if err := pair(p); err != nil { // create its keys
				return err
			}
		}
		if err := b.reset(ctx); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := pair(ps[i%budgets]); err != nil {
				return err
			}
		}
		u, _, err := b.usec(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(b.out, "| %d | %.2f |\n", budgets, u)
	}
	return nil
}

// saturated: 64 goroutines compete for a budget that admits 2,000 calls a
// second. Reports Redis commands per admitted call and the share of the
// limit admitted.
func (b *bench) saturated(ctx context.Context) error {
	const (
		goroutines = 64
		cost       = 100
		tpm        = 12_000_000 // 200,000 tokens/s = 2,000 calls/s of 100 tokens
		burst      = 2_000
	)
	fmt.Fprintln(b.out, "## Saturated budget: 64 goroutines, TPM 12,000,000 (2,000 calls/s of 100 tokens), burst 2,000")
	fmt.Fprintln(b.out, "| concurrency limit | admitted/s | share of the binding limit | Redis commands per admitted call |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|")
	// With 16 slots and 5 ms calls the token limit binds (slots allow 3,200
	// calls/s); with 4 slots the slots bind (at most 800 calls/s).
	for _, conc := range []int64{0, 16, 4} {
		p, err := b.pacer(pacer.Config{Limits: pacer.Limits{Concurrency: conc}, Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: tpm, Window: time.Minute, Burst: burst}}, MaxWait: time.Minute})
		if err != nil {
			return err
		}
		if err := b.reset(ctx); err != nil {
			return err
		}
		var admitted atomic.Int64
		start := time.Now()
		stop := start.Add(3 * b.dur)
		var wg sync.WaitGroup
		var callErr atomic.Value
		for i := 0; i < goroutines; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					l, err := p.Acquire(ctx, pacer.Request{Tokens: cost})
					if err != nil {
						callErr.CompareAndSwap(nil, err)
						return
					}
					admitted.Add(1)
					if conc > 0 {
						time.Sleep(5 * time.Millisecond) // a call holds its slot for a while
					}
					if err := l.Settle(ctx, cost); err != nil {
						callErr.CompareAndSwap(nil, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start).Seconds()
		if err, _ := callErr.Load().(error); err != nil {
			return err
		}
		info, err := b.rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		cmds := int64(0)
		for _, line := range strings.Split(info, "\n") {
			if _, ok := scriptStat(line); ok {
				_, rest, _ := strings.Cut(line, "calls=")
				v, _, _ := strings.Cut(rest, ",")
				n, _ := strconv.ParseInt(v, 10, 64)
				cmds += n
			}
		}
		// Calls that fit the limit: the burst plus the refill over the run,
		// or what the slots allow when they bind.
		allowed := (burst + tpm/60.0*elapsed) / cost
		if bySlots := float64(conc) * elapsed / 0.005; conc > 0 && bySlots < allowed {
			allowed = bySlots
		}
		label := "none"
		if conc > 0 {
			label = fmt.Sprintf("%d (5 ms calls)", conc)
		}
		fmt.Fprintf(b.out, "| %s | %.0f | %.1f%% | %.2f |\n", label, float64(admitted.Load())/elapsed,
			100*float64(admitted.Load())/allowed, float64(cmds)/float64(admitted.Load()))
	}
	return nil
}

// expiry: 100,000 leases expire at once; the next acquire removes at most
// 100 of them, so its cost stays bounded.
func (b *bench) expiry(ctx context.Context) error {
	p, err := b.pacer(pacer.Config{Limits: pacer.Limits{Concurrency: 1 << 20, RPM: 1 << 40}})
	if err != nil {
		return err
	}
	pipe := b.rdb.Pipeline()
	past := float64(time.Now().Add(-time.Minute).UnixMilli())
	for i := 0; i < 100000; i++ {
		pipe.ZAdd(ctx, keysOf(p)[1], redis.Z{Score: past, Member: fmt.Sprintf("dead-%d", i)})
		if i%1000 == 999 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	// SLOWLOG with a zero threshold records every command's own duration.
	if err := b.rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		return err
	}
	defer b.rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000")
	_ = b.rdb.ConfigSet(ctx, "slowlog-max-len", "4096").Err()
	_ = b.rdb.Do(ctx, "SLOWLOG", "RESET").Err()
	// Admissions a millisecond apart: about one in 16 lands on a reaping
	// millisecond, as under steady traffic.
	const calls = 320
	for i := 0; i < calls; i++ {
		l, err := p.TryAcquire(ctx, pacer.Request{})
		if err != nil || l == nil {
			return fmt.Errorf("acquire after mass expiry: %v %v", l, err)
		}
		time.Sleep(time.Millisecond)
	}
	logs, err := b.rdb.SlowLogGet(ctx, 4096).Result()
	if err != nil {
		return err
	}
	var worst, sum time.Duration
	n := 0
	for _, e := range logs {
		if len(e.Args) > 0 && strings.EqualFold(e.Args[0], "evalsha") {
			n++
			sum += e.Duration
			worst = max(worst, e.Duration)
		}
	}
	left, _ := b.rdb.ZCard(ctx, keysOf(p)[1]).Result()
	fmt.Fprintln(b.out, "## Mass expiry: 100,000 leases expired at once, then 320 acquires 1 ms apart")
	fmt.Fprintln(b.out, "| acquires | mean µs | worst µs | expired leases removed |")
	fmt.Fprintln(b.out, "|---:|---:|---:|---:|")
	if n > 0 {
		fmt.Fprintf(b.out, "| %d | %.1f | %d | %d |\n", n, float64(sum.Microseconds())/float64(n), worst.Microseconds(), 100000+calls-left)
	}
	_ = b.rdb.Del(ctx, keysOf(p)...).Err()
	return nil
}

func field(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// keysOf returns p's Redis keys in the scripts' order (KEYS[1] to KEYS[4]),
// spelled from its Config as internal/wire spells them.
func keysOf(p *pacer.Pacer) []string {
	c := p.Config()
	return wire.Keys(wire.KeyTag(cmp.Or(c.KeyPrefix, wire.DefaultPrefix), c.Name, c.HashTag))
}

// tenantKeyOf returns the key of tenant's hash in p's budget.
func tenantKeyOf(p *pacer.Pacer, tenant string) string {
	return wire.TenantKey(strings.TrimSuffix(keysOf(p)[0], wire.StateSuffix), wire.TenantHash(tenant))
}
