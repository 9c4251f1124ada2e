package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// batch: group commit priced (round 7, issue 23; see batchlua.go). For
// the in-use regimes (regimes.go), the keys and arguments a Pacer sends
// for an acquire of 100 tokens and its settle at 60 are recorded; a driver
// then keeps 64 leases in flight on a budget of its own with them (each
// lease its own id, each settle the charge time its acquire's reply gave),
// as runner does, sending today's scripts one call at a time, or the batch
// scripts k calls at a time. Under callgrind, per call:
//
//   - pair: steps of k acquires, then the settles of the k oldest leases
//     (64 in flight after each step), four rounds of 256 pairs, the TATs
//     set back between 10 and 40 s ahead before each round;
//   - acquire and settle apart: four rounds of 64 acquires, then 64
//     settles of the oldest (64 to 128 in flight), each in calls of k.
//
// Beside them the Pacer's own pair (runner, as iregimes) and the GCRA
// yardstick, in the same run. BATCH_ONLY=<first 4 letters of a build>:<k>
// (e.g. hand:16, land:5, func:1, floo:5) runs one row per regime; the floor
// rows run batch_floor.lua, the batches' commands alone. BATCH_K32=1 adds k = 32 to the
// hand-written build; BATCH_REGIME=<a regime name's start> (e.g. "a tenant") runs
// that regime alone; -callgrind-pid -1 is a dry run on a plain Redis
// (every count 1), to check the scripts run.
func (b *bench) batch(ctx context.Context) error {
	if b.cgPID == 0 {
		return fmt.Errorf("-callgrind-pid is required: the pid of a redis-server run under valgrind --tool=callgrind")
	}
	rate, dropRate := b.yardstick()
	defer dropRate(ctx)
	// The floor's library, if a row loaded it, goes with the keys.
	defer b.rdb.FunctionDelete(ctx, "llmpacer_bench_floor")
	if err := warmYardstick(ctx, rate); err != nil {
		return err
	}
	base, err := b.measureN(instrCalls / 4)(func() error { return rate(ctx) })
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "## Group commit (round 7): instructions per call (callgrind), ratio to redis_rate Allow (%.1fk)\n", base/1000)
	fmt.Fprintln(b.out, "| regime | scripts | k | acquire k (x) | settle k (x) | sum (x) | pair, interleaved k (x) |")
	fmt.Fprintln(b.out, "|---|---|---:|---:|---:|---:|---:|")
	x := func(v float64) string { return fmt.Sprintf("%.1f (%.2fx)", v/1000, v/base) }
	for _, r := range regimes(20)[1:] {
		if f := os.Getenv("BATCH_REGIME"); f != "" && !strings.HasPrefix(r.name, f) {
			continue
		}
		if os.Getenv("BATCH_ONLY") == "" {
			v, u, err := b.regimeInstr(ctx, r, b.measureN(instrCalls/4))
			if err != nil {
				return err
			}
			u.close(ctx)
			fmt.Fprintf(b.out, "| %s | Pacer, today's scripts (iregimes) | 1 | | | | %s |\n", r.name, x(v))
		}
		conc, tenants := r.cfg.Limits.Concurrency > 0, r.tenants > 0
		kinds := []struct {
			name     string
			acq, set *redis.Script
			format   callFormat
			ks       []int
		}{
			{"today's scripts, this driver", lua.Acquire, lua.Settle, oneByOne, []int{1}},
			{"crude batch (loop over the body)", redis.NewScript(batchSource("acquire", false, false)), redis.NewScript(batchSource("settle", false, false)), counted, []int{1, 2, 4, 8, 16}},
			{"hand-written shared read (one TIME, ZMSCORE, HMGET, ZADD or ZREM, HSET)", redis.NewScript(batchHand("acquire")), redis.NewScript(batchHand("settle")), counted, []int{1, 2, 4, 8, 16}},
			{"shared read by a redis.call wrapper (one TIME, HMGET, HSET, ZADD, ZREM)", redis.NewScript(batchSource("acquire", true, !conc)), redis.NewScript(batchSource("settle", true, !conc)), counted, []int{1, 2, 4, 8, 16}},
			// The floor of the functions' batches: their commands alone,
			// by FCALL (round 14; BATCH_ONLY=floo:5).
			{"floor: the batches' commands alone, by FCALL (batch_floor.lua)", floorAcquires, floorSettles, functions, []int{1, 2, 5, 16}},
			// What a Pacer sends by group commit (round 9 on; BATCH_ONLY=land:5).
			{"landed batch scripts (acquires.lua, settles.lua)", lua.Acquires, lua.Settles, grouped, []int{2, 5, 16}},
			// The same loaded as a library (lua.Library) and sent by FCALL
			// (BATCH_ONLY=func:5).
			{"functions: the landed batch scripts by FCALL (lua.Library)", lua.Acquires, lua.Settles, functions, []int{1, 2, 5, 16}},
		}
		if os.Getenv("BATCH_K32") != "" { // the hand-written build at k = 32 too (the asymptote)
			kinds[2].ks = append(kinds[2].ks, 32)
		}
		for _, kd := range kinds {
			if tenants && kd.format == counted {
				continue // the prototypes take no tenants' keys
			}
			for _, k := range kd.ks {
				if f := os.Getenv("BATCH_ONLY"); f != "" && f != fmt.Sprintf("%s:%d", kd.name[:4], k) {
					continue
				}
				da, ds := kd.acq, kd.set
				floor := da == floorAcquires
				if floor {
					// The budget is made by the shipped functions; the
					// floor's run on it.
					if err := b.rdb.FunctionLoadReplace(ctx, batchFloor).Err(); err != nil {
						return fmt.Errorf("FUNCTION LOAD of batch_floor.lua: %w", err)
					}
					da, ds = lua.Acquires, lua.Settles
				}
				d, err := b.newDriver(ctx, r, da, ds, kd.format)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", r.name, kd.name, err)
				}
				if floor {
					d.acq, d.set = kd.acq, kd.set
					d.fns = map[*redis.Script]string{kd.acq: "llmpacer_floor_acquires", kd.set: "llmpacer_floor_settles"}
				}
				acq, set, pair, err := d.measure(ctx, k)
				d.close(ctx)
				if err != nil {
					return fmt.Errorf("%s, %s, k=%d: %w", r.name, kd.name, k, err)
				}
				fmt.Fprintf(b.out, "| %s | %s | %d | %s | %s | %s | %s |\n", r.name, kd.name, k, x(acq), x(set), x(acq+set), x(pair))
			}
		}
	}
	return nil
}

// batchFloor is batch_floor.lua: the floor of the batch functions, their
// commands alone. floorAcquires and floorSettles stand for its functions
// in a driver (their text is never sent: d.fns names the functions).
//
//go:embed batch_floor.lua
var batchFloor string

var floorAcquires, floorSettles = redis.NewScript("return 'floor acquires'"), redis.NewScript("return 'floor settles'")

// lease is one lease in flight: its id and its acquire's now_us.
type lease struct {
	id string
	us int64
	t  int // its tenant (an index in driver.tks)
}

// callFormat is how a driver sends its calls.
type callFormat int

const (
	// oneByOne: one script call per call, with the recorded KEYS and ARGV
	// (acquire.lua, settle.lua).
	oneByOne callFormat = iota
	// counted: k calls in one script call, ARGV k, then each call's
	// argument count and arguments (the prototypes of batchlua.go).
	counted
	// grouped: k calls in one script call, ARGV k groups, each t n args...
	// (t, the index in KEYS of the call's tenant's hash: 0, none; n, its
	// argument count), KEYS the budget's four (the landed acquires.lua and
	// settles.lua).
	grouped
	// functions: as grouped, sent by FCALL to the library's functions
	// (lua.AcquiresFunction, lua.SettlesFunction), loaded first.
	functions
)

// driver sends the recorded calls of one regime's budget.
type driver struct {
	b        *bench
	r        regime
	ak, sk   []string
	aa, sa   []any
	acq, set *redis.Script
	format   callFormat
	// fns names the function of each script sent by FCALL that is not
	// the landed one (see unused); the landed ones need no entry.
	fns    map[*redis.Script]string
	fifo   []lease
	next   int
	fields []string
	// tks holds the keys of the regime's tenants' hashes (none without
	// tenants): call i goes to tenant i mod len(tks), as runner's do.
	tks []string
}

// newDriver records a Pacer's acquire and settle for r, and starts a
// budget of their keys with 64 leases in flight and stacks filled (two
// rounds of pairs, one call at a time), its TATs ahead of the clock.
func (b *bench) newDriver(ctx context.Context, r regime, acq, set *redis.Script, format callFormat) (*driver, error) {
	if format == functions {
		if err := b.rdb.FunctionLoadReplace(ctx, lua.Library).Err(); err != nil {
			return nil, fmt.Errorf("FUNCTION LOAD: %w", err)
		}
	}
	rdb := redis.NewClient(b.rdb.Options())
	defer rdb.Close()
	ra := &recorder{sha: lua.Acquire.Hash(), src: lua.Source("acquire")}
	rs := &recorder{sha: lua.Settle.Hash(), src: lua.Source("settle")}
	rdb.AddHook(ra)
	rdb.AddHook(rs)
	b.names++
	cfg := r.cfg
	cfg.Name = fmt.Sprintf("batch-%d-%d", time.Now().UnixNano(), b.names)
	cfg.KeyPrefix = "llmpacer-bench"
	p, err := pacer.New(rdb, cfg)
	if err != nil {
		return nil, err
	}
	req := pacer.Request{Tokens: 100}
	if r.tenants > 0 {
		req.Tenant = tenantID(0)
	}
	// The second pair is recorded: from its first reply on, a Pacer's
	// acquires carry the loss line (the latest xp it saw), as under load.
	for range 2 {
		ra.keys, ra.args, rs.keys, rs.args = nil, nil, nil, nil
		l, err := p.TryAcquire(ctx, req)
		if err != nil || l == nil {
			return nil, fmt.Errorf("record: %v %v", l, err)
		}
		if err := l.Settle(ctx, 60); err != nil {
			return nil, err
		}
	}
	if ra.args == nil || rs.args == nil {
		return nil, fmt.Errorf("batch: the Pacer's acquire and settle were not recorded")
	}
	d := &driver{b: b, r: r, ak: ra.keys, aa: ra.args, sk: rs.keys, sa: rs.args, acq: acq, set: set, format: format}
	d.fields = []string{"rpm", "tpm"}
	if r.cfg.Limits.RPD > 0 {
		d.fields = append(d.fields, "rpd", "tpd")
	}
	for i := range r.tenants {
		d.tks = append(d.tks, tenantKeyOf(p, tenantID(i)))
	}
	if err := d.push(ctx); err != nil {
		return nil, err
	}
	for i := 0; i < 2*r.flight+r.tenants; i++ { // and every tenant's hash made
		if err := d.acquire(ctx, 1); err != nil {
			return nil, err
		}
		if len(d.fifo) > r.flight {
			if err := d.settle(ctx, 1); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// acquire admits k calls, in one batch script call or k single ones.
func (d *driver) acquire(ctx context.Context, k int) error {
	groups, ts := make([][]any, k), make([]int, k)
	for i := range groups {
		d.next++
		a := append([]any(nil), d.aa...)
		a[0] = fmt.Sprintf("%s-%d", d.aa[0], d.next)
		groups[i] = a
		if len(d.tks) > 0 {
			ts[i] = d.next % len(d.tks)
		}
	}
	replies, err := d.run(ctx, d.acq, d.ak, groups, ts)
	if err != nil {
		return err
	}
	for i, v := range replies {
		r, _ := v.([]any)
		if len(r) < 3 {
			return fmt.Errorf("acquire reply %v", v)
		}
		if c, _ := r[0].(int64); c != 1 {
			return fmt.Errorf("acquire refused: %v", r)
		}
		us, _ := r[2].(int64)
		d.fifo = append(d.fifo, lease{groups[i][0].(string), us, ts[i]})
	}
	return nil
}

// settle ends the k oldest leases in flight.
func (d *driver) settle(ctx context.Context, k int) error {
	groups, ts := make([][]any, k), make([]int, k)
	for i := range groups {
		l := d.fifo[i]
		a := append([]any(nil), d.sa...)
		a[0], a[1] = l.id, strconv.FormatInt(l.us, 10)
		groups[i], ts[i] = a, l.t
	}
	d.fifo = d.fifo[k:]

	replies, err := d.run(ctx, d.set, d.sk, groups, ts)
	if err != nil {
		return err
	}
	for _, v := range replies {
		r, _ := v.([]any)
		if c, _ := r[0].(int64); len(r) < 2 || c != 1 {
			return fmt.Errorf("settle reply %v", v)
		}
	}
	return nil
}

// run sends groups as one batch call, or one call each (see callFormat);
// ts[i] is group i's tenant (an index in d.tks; unread without tenants).
func (d *driver) run(ctx context.Context, s *redis.Script, keys []string, groups [][]any, ts []int) ([]any, error) {
	if d.format == oneByOne {
		out := make([]any, len(groups))
		for i, g := range groups {
			ks := keys
			if len(d.tks) > 0 {
				ks = append(keys[:4:4], d.tks[ts[i]])
			}
			v, err := s.Run(ctx, d.b.rdb, ks, g...).Result()
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	var args []any
	switch d.format {
	case counted:
		args = []any{len(groups)}
		for _, g := range groups {
			args = append(args, len(g))
			args = append(args, g...)
		}
	case grouped, functions:
		keys = keys[:min(len(keys), 4):min(len(keys), 4)]
		at := map[int]int{} // a tenant's index in KEYS
		for i, g := range groups {
			t := 0
			if len(d.tks) > 0 {
				if t = at[ts[i]]; t == 0 {
					keys = append(keys, d.tks[ts[i]])
					t = len(keys)
					at[ts[i]] = t
				}
			}
			args = append(args, t, len(g))
			args = append(args, g...)
		}
	}
	if d.format == grouped || d.format == functions {
		// The landed scripts reply in one flat array (wire.SplitReplies).
		width, fn := wire.SettleReplyLen, lua.SettlesFunction
		if s == d.acq {
			width, fn = wire.AcquireReplyLen, lua.AcquiresFunction
		}
		if f, ok := d.fns[s]; ok {
			fn = f
		}
		var v any
		var err error
		if d.format == functions {
			v, err = d.b.rdb.FCall(ctx, fn, keys, args...).Result()
		} else {
			v, err = s.Run(ctx, d.b.rdb, keys, args...).Result()
		}
		if err != nil {
			return nil, err
		}
		// (Scripts before 622762f replied with a table a call: so that
		// the same command measures them, such a reply is taken as is.)
		if a, _ := v.([]any); len(a) == len(groups) && len(a) > 0 {
			if _, nested := a[0].([]any); nested {
				return a, nil
			}
		}
		return wire.SplitReplies(v, len(groups), width)
	}
	v, err := s.Run(ctx, d.b.rdb, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != len(groups) {
		return nil, fmt.Errorf("batch: %d replies for %d calls", len(v), len(groups))
	}
	return v, nil
}

// push keeps the TATs between lo and hi ahead of the clock (runner.push).
func (d *driver) push(ctx context.Context) error {
	t, err := d.b.rdb.Time(ctx).Result()
	if err != nil {
		return err
	}
	now := t.UnixMicro()
	for _, f := range d.fields {
		v, err := d.b.rdb.HGet(ctx, d.ak[0], f).Int64()
		if err != nil && err != redis.Nil {
			return err
		}
		if v < now+lo.Microseconds() || v > now+hi.Microseconds() {
			if err := d.b.rdb.HSet(ctx, d.ak[0], f, now+mid.Microseconds()).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// measure returns instructions per acquire and per settle (apart), and
// per pair (interleaved), in calls of k.
func (d *driver) measure(ctx context.Context, k int) (acq, set, pair float64, err error) {
	const rounds, pairs, phase = 4, 256, 64
	for round := 0; round < rounds; round++ {
		if err := d.push(ctx); err != nil {
			return 0, 0, 0, err
		}
		v, err := d.b.measureN(pairs / k * k)(nil2(func() error {
			for i := 0; i < pairs/k; i++ {
				if err := d.acquire(ctx, k); err != nil {
					return err
				}
				if err := d.settle(ctx, k); err != nil {
					return err
				}
			}
			return nil
		}))
		if err != nil {
			return 0, 0, 0, err
		}
		pair += v / rounds
	}
	for round := 0; round < rounds; round++ {
		if err := d.push(ctx); err != nil {
			return 0, 0, 0, err
		}
		v, err := d.b.measureN(phase / k * k)(nil2(func() error {
			for i := 0; i < phase/k; i++ {
				if err := d.acquire(ctx, k); err != nil {
					return err
				}
			}
			return nil
		}))
		if err != nil {
			return 0, 0, 0, err
		}
		acq += v / rounds
		v, err = d.b.measureN(phase / k * k)(nil2(func() error {
			for i := 0; i < phase/k; i++ {
				if err := d.settle(ctx, k); err != nil {
					return err
				}
			}
			return nil
		}))
		if err != nil {
			return 0, 0, 0, err
		}
		set += v / rounds
	}
	return acq, set, pair, nil
}

// nil2 turns a function run once into one measureN may call n times: the
// first call runs it, the others do nothing (measureN divides the
// instructions by n, the calls f makes).
func nil2(f func() error) func() error {
	done := false
	return func() error {
		if done {
			return nil
		}
		done = true
		return f()
	}
}

func (d *driver) close(ctx context.Context) {
	for len(d.fifo) > 0 {
		_ = d.settle(ctx, 1)
	}
	d.b.rdb.Del(ctx, d.ak...)
	for _, k := range d.tks {
		d.b.rdb.Del(ctx, k)
	}
}
