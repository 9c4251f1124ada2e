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

// Regimes (issue 23): what an acquire and its settle cost in Redis time,
// under the load pacing exists for, against one GCRA call that writes its
// key. Four regimes:
//
//   - RPM + TPM, buckets full: limits no run approaches, one lease in
//     flight, every TAT in the past;
//   - RPM + TPM in use: the TATs ahead of the clock, 64 leases in flight
//     (each pair acquires a lease and settles the one acquired 64 pairs
//     before, using 60 of its 100 tokens: a give-back on every settle);
//   - every limit and a concurrency limit, in use, 64 in flight;
//   - a tenant (one of 100, Share 0.1) in an in-use RPM + TPM budget, 64 in
//     flight.
//
// The yardstick is redis_rate v10's allowN script (gcra.lua, with v10's
// redis.replicate_commands() first) with its Allow arguments for 100 calls
// a second, burst 100, over 1,000 keys in turn: each call is admitted and
// writes its key, as a per-user limiter's does. gcra.lua alone runs beside
// it. Each figure is the median of five rounds of 10,000 calls (pairs),
// the scripts in turn within a round: INFO commandstats' usec for EVALSHA
// over the round, divided by the pairs.

// An in-use budget's TATs are kept between lo and hi ahead of the clock
// (set to mid when they leave that), within the minute buckets' span.
const lo, mid, hi = 10 * time.Second, 20 * time.Second, 40 * time.Second

type regime struct {
	name    string
	cfg     pacer.Config
	inUse   bool // TATs ahead of the clock
	flight  int  // leases in flight
	tenants int  // tenants the pairs go to in turn (0: none)
	// reset: push sets the TATs to mid before every round, not only when
	// they leave lo to hi, so that a round (which moves them up to 12 s)
	// ends by 32 s ahead: a call over its tenant's share finds no room
	// past 48 s (BatchFloor's 12 s of the minute are kept for tenants
	// within theirs).
	reset bool
}

// regimes returns the four regimes, their in-use buckets' limits divided
// by slow (1; more under callgrind, where a pair takes far longer, so that
// each call still charges more than a pair's time).
func regimes(slow int64) []regime {
	// In use: 1,000 requests and 100,000 tokens a second, so that a call of
	// 100 tokens charges 1 ms of each bucket (0.4 ms given back when it
	// settles), more than a pair takes: the TATs run ahead of the clock,
	// further with each call, as under traffic the limit holds back, and
	// the give-back stacks fill. The day buckets alike (0.864 ms a call).
	inUse := pacer.Limits{RPM: 60_000 / slow, TPM: 6_000_000 / slow}
	every := pacer.Limits{RPM: 60_000 / slow, TPM: 6_000_000 / slow, RPD: 100_000_000 / slow, TPD: 10_000_000_000 / slow, Concurrency: 1000}
	return []regime{
		{name: "RPM + TPM, buckets full (1 in flight)", cfg: pacer.Config{Limits: pacer.Limits{RPM: 1 << 40, TPM: 1 << 45}}, flight: 1},
		{name: "RPM + TPM in use, 64 in flight", cfg: pacer.Config{Limits: inUse}, inUse: true, flight: 64},
		{name: "every limit + concurrency, in use, 64 in flight", cfg: pacer.Config{Limits: every}, inUse: true, flight: 64},
		{name: "a tenant (1 of 100, Share 0.1), RPM + TPM in use, 64 in flight", cfg: pacer.Config{Limits: inUse, Tenants: pacer.Tenants{Share: 0.1}}, inUse: true, flight: 64, tenants: 100},
	}
}

// usecTotal returns the server's total usec and calls for EVALSHA and
// FCALL (a Pacer's batches on Redis 7) since the last reset.
func (b *bench) usecTotal(ctx context.Context) (float64, int64, error) {
	info, err := b.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	var calls int64
	var total float64
	seen := false
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			rest, ok = strings.CutPrefix(line, "cmdstat_fcall:")
		}
		if !ok {
			continue
		}
		seen = true
		for _, kv := range strings.Split(strings.TrimSpace(rest), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				c, _ := strconv.ParseInt(v, 10, 64)
				calls += c
			case "usec":
				u, _ := strconv.ParseFloat(v, 64)
				total += u
			}
		}
	}
	if !seen {
		return 0, 0, fmt.Errorf("no cmdstat_evalsha in INFO commandstats")
	}
	return total, calls, nil
}

// runner keeps one regime's budget in its state between rounds: its
// leases in flight, and its TATs ahead of the clock.
type runner struct {
	b      *bench
	r      regime
	p      *pacer.Pacer
	ring   []*pacer.Lease
	next   int
	tenant int
}

func (u *runner) pair(ctx context.Context) error {
	req := pacer.Request{Tokens: 100}
	if u.r.tenants > 0 {
		req.Tenant = tenantID(u.tenant % u.r.tenants)
		u.tenant++
	}
	l, err := u.p.TryAcquire(ctx, req)
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("%s: refused a call", u.r.name)
	}
	old := u.ring[u.next]
	u.ring[u.next] = l
	u.next = (u.next + 1) % len(u.ring)
	if old != nil {
		return old.Settle(ctx, 60)
	}
	return nil
}

// push keeps the budget's TATs between lo and hi ahead of the clock, as a
// budget drawn by its traffic has them, without running into its limit.
func (u *runner) push(ctx context.Context) error {
	if !u.r.inUse {
		return nil
	}
	t, err := u.b.rdb.Time(ctx).Result()
	if err != nil {
		return err
	}
	now := t.UnixMicro()
	key := keysOf(u.p)[0]
	l := u.r.cfg.Limits
	for _, f := range []string{"rpm", "tpm", "rpd", "tpd"} {
		if f == "rpd" && l.RPD == 0 || f == "tpd" && l.TPD == 0 {
			continue
		}
		v, err := u.b.rdb.HGet(ctx, key, f).Int64()
		if err != nil && err != redis.Nil {
			return err
		}
		if u.r.reset || v < now+lo.Microseconds() || v > now+hi.Microseconds() {
			if err := u.b.rdb.HSet(ctx, key, f, now+mid.Microseconds()).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) newRunner(ctx context.Context, r regime) (*runner, error) {
	p, err := b.pacer(r.cfg)
	if err != nil {
		return nil, err
	}
	u := &runner{b: b, r: r, p: p, ring: make([]*pacer.Lease, r.flight)}
	warm(ctx, p)
	if err := u.push(ctx); err != nil {
		return nil, err
	}
	for i := 0; i < 2*r.flight+r.tenants; i++ { // leases in flight, stacks and tenants' hashes filled
		if err := u.pair(ctx); err != nil {
			return nil, err
		}
	}
	return u, nil
}

func (u *runner) close(ctx context.Context) {
	for _, l := range u.ring {
		if l != nil {
			_ = l.Settle(ctx, 60)
		}
	}
	u.b.dropTenants(ctx, u.p, u.r.tenants)
}

// gcraRunner runs redis_rate's allowN with Allow's arguments for
// redis_rate.PerSecond(100) over keys in turn, and checks that each call
// is admitted (so that it writes its key).
func (b *bench) gcraRunner(src string, keys int) (func(context.Context) error, func(context.Context)) {
	s := redis.NewScript(src)
	prefix := fmt.Sprintf("llmpacer-bench:rate:%d:", time.Now().UnixNano())
	i := 0
	call := func(ctx context.Context) error {
		v, err := s.Run(ctx, b.rdb, []string{prefix + strconv.Itoa(i%keys)}, 100, 100, float64(1), 1).Slice()
		i++
		if err != nil {
			return err
		}
		if n, _ := v[0].(int64); n != 1 {
			return fmt.Errorf("GCRA yardstick refused a call: %v", v)
		}
		return nil
	}
	drop := func(ctx context.Context) {
		for k := 0; k < keys; k++ {
			b.rdb.Del(ctx, prefix+strconv.Itoa(k))
		}
	}
	return call, drop
}

// yardstick returns the GCRA call every cost is set against: redis_rate
// v10's Allow (see regimes), and a function that deletes its keys.
func (b *bench) yardstick() (func(context.Context) error, func(context.Context)) {
	return b.gcraRunner("redis.replicate_commands()\n"+gcraSrc, 1000)
}

// warmYardstick writes each of the yardstick's keys once and loads its
// script, so that what is measured after is a call on a key in use.
func warmYardstick(ctx context.Context, allow func(context.Context) error) error {
	for i := 0; i < 1000; i++ {
		if err := allow(ctx); err != nil {
			return err
		}
	}
	return nil
}

// regimes: the table of issue 23.
func (b *bench) regimes(ctx context.Context) error {
	const n, rounds = 10000, 5
	measure := func(f func() error) (float64, error) {
		if err := b.reset(ctx); err != nil {
			return 0, err
		}
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		total, _, err := b.usecTotal(ctx)
		return total / n, err
	}
	rate, dropRate := b.yardstick()
	defer dropRate(ctx)
	gcra, dropGCRA := b.gcraRunner(gcraSrc, 1000)
	defer dropGCRA(ctx)
	for i := 0; i < 1000; i++ { // keys written, scripts loaded
		if err := rate(ctx); err != nil {
			return err
		}
		if err := gcra(ctx); err != nil {
			return err
		}
	}
	rs := regimes(1)
	us := make([]*runner, len(rs))
	for i, r := range rs {
		u, err := b.newRunner(ctx, r)
		if err != nil {
			return err
		}
		defer u.close(ctx)
		us[i] = u
	}
	per := make([][]float64, 2+len(rs))
	for round := 0; round < rounds; round++ {
		for i, f := range []func(context.Context) error{rate, gcra} {
			v, err := measure(func() error { return f(ctx) })
			if err != nil {
				return err
			}
			per[i] = append(per[i], v)
		}
		for i, u := range us {
			if err := u.push(ctx); err != nil {
				return err
			}
			v, err := measure(func() error { return u.pair(ctx) })
			if err != nil {
				return fmt.Errorf("%s: %w", u.r.name, err)
			}
			per[2+i] = append(per[2+i], v)
		}
	}
	base := median(per[0])
	fmt.Fprintf(b.out, "## Regimes (issue 23): Redis time per acquire+settle pair, INFO commandstats usec; median of %d rounds of %d\n", rounds, n)
	fmt.Fprintln(b.out, "| script | µs per call or pair | ratio to redis_rate Allow |")
	fmt.Fprintln(b.out, "|---|---:|---:|")
	fmt.Fprintf(b.out, "| redis_rate v10 allowN (Allow, PerSecond(100), 1,000 keys; writes its key) | %.2f | 1.00 |\n", base)
	fmt.Fprintf(b.out, "| gcra.lua, same arguments | %.2f | %.2f |\n", median(per[1]), median(per[1])/base)
	for i, r := range rs {
		v := median(per[2+i])
		fmt.Fprintf(b.out, "| %s | %.2f | %.2fx |\n", r.name, v, v/base)
	}
	return nil
}

// iregimes: the regimes in instructions per pair (callgrind; see instr),
// which repeat from run to run where microseconds do not: four rounds of
// instrCalls/4 pairs each, after the GCRA yardstick's calls.
func (b *bench) iregimes(ctx context.Context) error {
	if b.cgPID == 0 {
		return fmt.Errorf("-callgrind-pid is required: the pid of a redis-server run under valgrind --tool=callgrind")
	}
	const n = instrCalls / 4
	measure := b.measureN(n)
	rate, dropRate := b.yardstick()
	defer dropRate(ctx)
	if err := warmYardstick(ctx, rate); err != nil {
		return err
	}
	b.label = "allow"
	base, err := measure(func() error { return rate(ctx) })
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "## Regimes (issue 23) in instructions per pair (callgrind, 4 rounds of %d pairs each)\n", n)
	fmt.Fprintln(b.out, "| script | k instructions | ratio to redis_rate Allow | stack bytes after |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|")
	fmt.Fprintf(b.out, "| redis_rate v10 allowN (writes its key) | %.1f | 1.00 | |\n", base/1000)
	for i, r := range regimes(20) {
		if b.regime != 0 && b.regime != i+1 {
			continue
		}
		b.label = fmt.Sprintf("regime%d", i+1)
		v, u, err := b.regimeInstr(ctx, r, measure)
		if err != nil {
			return err
		}
		// The stacks' length moves with the machine's speed (how far the
		// TATs run ahead between two pushes): shown, so that two runs are
		// compared knowing it.
		stack, err := u.stackBytes(ctx)
		u.close(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(b.out, "| %s | %.1f | %.2fx | %d |\n", r.name, v/1000, v/base, stack)
	}
	return nil
}

// regimeInstr returns regime r's instructions per pair, four rounds of
// measure averaged, the TATs kept ahead between them (a compaction of the
// stacks comes every few dozen calls, so one short round would count one
// more or one fewer of them), and its runner, still open.
func (b *bench) regimeInstr(ctx context.Context, r regime, measure func(func() error) (float64, error)) (float64, *runner, error) {
	u, err := b.newRunner(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	var v float64
	for round := 0; round < 4; round++ {
		if err := u.push(ctx); err != nil {
			u.close(ctx)
			return 0, nil, err
		}
		x, err := measure(func() error { return u.pair(ctx) })
		if err != nil {
			u.close(ctx)
			return 0, nil, fmt.Errorf("%s: %w", r.name, err)
		}
		v += x / 4
	}
	return v, u, nil
}

// measureN returns a function that counts the instructions of n calls of
// f under callgrind, per call.
func (b *bench) measureN(n int) func(func() error) (float64, error) {
	return func(f func() error) (float64, error) {
		if b.cgPID < 0 { // a dry run on a plain Redis (batch's checks): no counts
			for i := 0; i < n; i++ {
				if err := f(); err != nil {
					return 0, err
				}
			}
			return 1, nil
		}
		if err := exec.Command("callgrind_control", "-z", strconv.Itoa(b.cgPID)).Run(); err != nil {
			return 0, fmt.Errorf("callgrind_control -z: %w", err)
		}
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		v, err := b.dumpInstr(n)
		if err == nil && b.dumps {
			// Dumping zeroes the counts too: the next round starts with -z
			// anyway.
			if out, err := exec.Command("callgrind_control", "-d", b.label, strconv.Itoa(b.cgPID)).CombinedOutput(); err != nil {
				return 0, fmt.Errorf("callgrind_control -d: %w: %s", err, out)
			}
		}
		return v, err
	}
}

// stackBytes returns the mean length of the budget's give-back stacks as
// the runner left them (its state hash's '.h' fields).
func (u *runner) stackBytes(ctx context.Context) (int, error) {
	m, err := u.b.rdb.HGetAll(ctx, keysOf(u.p)[0]).Result()
	if err != nil {
		return 0, err
	}
	sum, n := 0, 0
	for k, v := range m {
		if strings.HasSuffix(k, ".h") {
			sum, n = sum+len(v), n+1
		}
	}
	if n == 0 {
		return 0, nil
	}
	return sum / n, nil
}
