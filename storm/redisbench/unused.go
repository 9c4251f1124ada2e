package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// unused: issue 23's goal that a budget pays nothing measurable (under 5%
// each) for the features it does not use, priced. For the two in-use
// regimes that use none of them (RPM + TPM; every limit and a concurrency
// limit: regimes(20)[1] and [2]), the driver (batch.go) sends the pairs
// a Pacer sends, with the scripts as shipped and with copies of them from
// which the code that such a budget's calls still run for one feature, or
// for all of them, is cut (stripped, below): singles (acquire.lua and
// settle.lua, one call each) and batches of 5 (acquires.lua and
// settles.lua, as a Pacer's group commit sends them). Under callgrind,
// instructions per pair: six budgets, each with 64 leases in flight;
// twelve rounds, in each of which every budget runs 250 pairs (its TATs
// set back between 10 and 40 s ahead first) with one of the six builds, a
// build on each, rotated so that every build runs twice on every budget
// and twice in every place of a round, each after a full collection of
// Redis's Lua state (see pairInstr), the server's timer slowed to hz 1
// (see below). In a run of the shipped scripts alone (UNUSED_NULL below),
// a budget's state and its place in a round each moved a figure by up to
// 1%, and a measure of singles still moves by up to 2% with the server's
// state over time, alike for every build: the rounds sample it.
//
// Every stripped build gives the budget the replies the shipped one does
// (the driver checks each is an admission or a settle, code 1;
// TestStrippedAsShipped compares replies and state on miniredis). Two
// features have no row: spend (a Spend rate is a bucket like any other:
// the scripts hold no code of its own, checked below) and a Group (Go-side
// only: a budget's own calls never run route.lua, checked below on a plain
// Pacer's pairs). UNUSED_NULL=1 makes every build the shipped one: the
// spread of its row is the noise of a figure.
func (b *bench) unused(ctx context.Context) error {
	if b.cgPID == 0 {
		return fmt.Errorf("-callgrind-pid is required: the pid of a redis-server run under valgrind --tool=callgrind")
	}
	for _, name := range strippedScripts {
		if src := strings.ToLower(lua.Source(name)); strings.Contains(src, "spend") || strings.Contains(src, "price") {
			return fmt.Errorf("%s.lua now mentions spend or a price: find what a budget without Spend rates runs for it, and cut it (see stripped)", name)
		}
	}
	routes, calls, err := b.routeCalls(ctx, regimes(20)[1].cfg, 64)
	if err != nil {
		return err
	}
	if routes != 0 {
		return fmt.Errorf("a plain Pacer's %d script calls ran route.lua %d times: a Group is not Go-side only", calls, routes)
	}
	// Redis's timer (serverCron) costs about 1.2M instructions a second at
	// hz 10 under callgrind, counted with the calls: about 1% of a pair of
	// singles (3 ms each), a share that moves with the machine's load. At
	// hz 1, a tenth of it; the old value comes back after.
	hz, err := b.rdb.ConfigGet(ctx, "hz").Result()
	if err != nil {
		return err
	}
	if err := b.rdb.ConfigSet(ctx, "hz", "1").Err(); err != nil {
		return err
	}
	defer b.rdb.ConfigSet(ctx, "hz", cmp.Or(hz["hz"], "10"))
	// UNUSED_NULL=1: every build the shipped one, each column still a
	// budget of its own: the spread between them is the noise.
	null := os.Getenv("UNUSED_NULL") != ""
	type build struct{ acq1, set1, acqs, sets *redis.Script }
	builds := make([]build, len(unusedRows))
	// Each build's batch scripts as a library too, sent by FCALL (as a
	// Pacer sends them on Redis 7): fns names their functions.
	fns := map[*redis.Script]string{}
	for i, v := range unusedRows {
		m := v.m
		if null {
			m = 0
		}
		var src [4]string
		for j, name := range strippedScripts {
			s, err := stripped(name, m)
			if err != nil {
				return err
			}
			src[j] = s
		}
		builds[i] = build{redis.NewScript(src[0]), redis.NewScript(src[1]), redis.NewScript(src[2]), redis.NewScript(src[3])}
		lib, err := lua.LibraryOf(src[2], src[3])
		if err != nil {
			return err
		}
		if err := b.rdb.FunctionLoad(ctx, lib.Text).Err(); err != nil && !strings.Contains(err.Error(), "already exists") {
			return fmt.Errorf("FUNCTION LOAD of %s: %w", unusedRows[i].name, err)
		}
		fns[builds[i].acqs], fns[builds[i].sets] = lib.Acquires, lib.Settles
	}
	// pairs: a multiple of 5 (batches of 5) whose script calls, as
	// singles (2 a pair) and as batches (2 for 5 pairs), are a multiple of
	// 50 (see pairInstr).
	rounds, pairs := 2*len(unusedRows), 250
	fmt.Fprintf(b.out, "## Unused features (issue 23): instructions per acquire + settle pair (callgrind; %d rounds of %d pairs, builds rotated over %d budgets, each after a full Lua collection; server hz 1), k instructions and %% of the shipped pair\n", rounds, pairs, len(unusedRows))
	if null {
		fmt.Fprintln(b.out, "UNUSED_NULL: every column is the shipped build, on a budget of its own (the noise)")
	}
	head, rule := "| regime | scripts |", "|---|---|"
	for _, v := range unusedRows {
		head += " " + v.name + " |"
		rule += "---:|"
	}
	fmt.Fprintln(b.out, head)
	fmt.Fprintln(b.out, rule)
	modes := []struct {
		name   string
		k      int
		format callFormat
		one    bool
	}{
		{"singles (acquire.lua, settle.lua)", 1, oneByOne, true},
		{"batches of 5 (acquires.lua, settles.lua)", 5, grouped, false},
		{"batches of 5 by FCALL (lua.Library)", 5, functions, false},
	}
	for _, r := range regimes(20)[1:3] {
		for _, md := range modes {
			scripts := func(i int) (*redis.Script, *redis.Script) {
				if md.one {
					return builds[i].acq1, builds[i].set1
				}
				return builds[i].acqs, builds[i].sets
			}
			ds := make([]*driver, len(builds))
			closeAll := func() {
				for _, d := range ds {
					if d != nil {
						d.close(ctx)
					}
				}
			}
			for i := range builds {
				acq, set := scripts(i)
				d, err := b.newDriver(ctx, r, acq, set, md.format)
				if err != nil {
					closeAll()
					return fmt.Errorf("%s, %s, %s: %w", r.name, md.name, unusedRows[i].name, err)
				}
				d.fns = fns
				ds[i] = d
			}
			// A Latin square, twice: in round r, budget i (the i-th
			// measured) runs build (i + r) mod 6, so that each build runs
			// as often on every budget and in every place of a round.
			// Every build leaves such a budget the state the shipped one
			// does.
			per := make([]float64, len(ds))
			for round := 0; round < rounds; round++ {
				for i, d := range ds {
					x := (i + round) % len(builds)
					d.acq, d.set = scripts(x)
					v, err := d.pairInstr(ctx, md.k, pairs)
					if err != nil {
						closeAll()
						return fmt.Errorf("%s, %s, %s: %w", r.name, md.name, unusedRows[x].name, err)
					}
					per[x] += v / float64(rounds)
				}
			}
			for _, d := range ds { // the shipped scripts settle what is left
				d.acq, d.set = scripts(0)
			}
			closeAll()
			line := fmt.Sprintf("| %s | %s |", r.name, md.name)
			for _, v := range per {
				line += fmt.Sprintf(" %.1f (%.1f%%) |", v/1000, 100*v/per[0])
			}
			fmt.Fprintln(b.out, line)
		}
	}
	fmt.Fprintln(b.out)
	fmt.Fprintln(b.out, "Spend: no row. The scripts hold no code of its own (a Spend rate is a bucket like any, its charge worked out in Go); checked: none of the four mentions spend or a price.")
	fmt.Fprintf(b.out, "A Group: no row. Go-side only (pacer.Group); a budget's own calls never run route.lua: checked, 0 of the %d script calls of 64 plain Pacer pairs.\n", calls)
	return nil
}

// unusedRows are the builds unused prices: as shipped, less each feature
// alone, less all four.
var unusedRows = []struct {
	name string
	m    feature
}{
	{"shipped", 0},
	{"− tenants", fT},
	{"− sliding", fS},
	{"− stops, pause", fP},
	{"− definitions", fD},
	{"− all four", fT | fS | fP | fD},
}

// pairInstr returns the instructions per pair of n pairs (steps of k
// acquires, then the settles of the k oldest leases), after pushing the
// TATs back between 10 and 40 s ahead. n is a multiple of k, and its
// 2n/k script calls a multiple of 50.
//
// Redis 7.0 runs a step of Lua's collector every 50 script calls
// (LUA_GC_CYCLE_PERIOD), about 1.6M instructions with the builds loaded:
// a measure of 640 calls held 12 or 13 of them, and each figure moved by
// up to 2% with where the count stood. So every measure holds a whole
// number of them, and starts from a full collection.
func (d *driver) pairInstr(ctx context.Context, k, n int) (float64, error) {
	if n%k != 0 || 2*n/k%50 != 0 {
		return 0, fmt.Errorf("%d pairs in steps of %d: want a multiple of %d", n, k, 25*k)
	}
	if err := d.push(ctx); err != nil {
		return 0, err
	}
	if err := luaGC.Run(ctx, d.b.rdb, nil).Err(); err != nil {
		return 0, err
	}
	return d.b.measureN(n)(nil2(func() error {
		for i := 0; i < n/k; i++ {
			if err := d.acquire(ctx, k); err != nil {
				return err
			}
			if err := d.settle(ctx, k); err != nil {
				return err
			}
		}
		return nil
	}))
}

// luaGC runs a full collection of the server's Lua state.
var luaGC = redis.NewScript("collectgarbage('collect') return 0")

// routeCalls runs n pairs on a fresh Pacer of cfg (through a client of its
// own) and returns how many of its script calls ran route.lua, and how
// many script calls it made.
func (b *bench) routeCalls(ctx context.Context, cfg pacer.Config, n int) (routes, calls int64, err error) {
	rdb := redis.NewClient(b.rdb.Options())
	defer rdb.Close()
	c := &scriptCounter{sha: lua.Route.Hash(), src: lua.Source("route")}
	rdb.AddHook(c)
	b.names++
	cfg.Name = fmt.Sprintf("unused-%d-%d", time.Now().UnixNano(), b.names)
	cfg.KeyPrefix = "llmpacer-bench"
	p, err := pacer.New(rdb, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer rdb.Del(ctx, keysOf(p)...)
	for i := 0; i < n; i++ {
		l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100})
		if err != nil || l == nil {
			return 0, 0, fmt.Errorf("route check: %v %v", l, err)
		}
		if err := l.Settle(ctx, 60); err != nil {
			return 0, 0, err
		}
	}
	return c.route.Load(), c.calls.Load(), nil
}

// scriptCounter counts a client's script calls, and those of one script.
type scriptCounter struct {
	sha, src     string
	route, calls atomic.Int64
}

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *scriptCounter) count(cmd redis.Cmder) {
	switch cmd.Name() {
	case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall":
		c.calls.Add(1)
		if a := cmd.Args(); len(a) > 1 && (a[1] == c.sha || a[1] == c.src) {
			c.route.Add(1)
		}
	}
}

// A feature whose code stripped cuts.
type feature uint

const (
	fT feature = 1 << iota // tenants
	fS                     // sliding rates
	fP                     // stops and pauses
	fD                     // stored definitions
)

// strippedScripts are the scripts a budget's pairs run, in the order
// unused builds them.
var strippedScripts = []string{"acquire", "settle", "acquires", "settles"}

// A script file, and how many copies of it each script's source holds
// (see lua.Source: acquires.lua's holds the prelude twice, its own and
// acquire1's).
type file int

const (
	inPrelude file = iota
	inAcquire
	inSettle
	inBatch
	inAcquires
	inSettles
)

var copies = map[string][6]int{
	"acquire":  {1, 1, 0, 0, 0, 0},
	"settle":   {1, 0, 1, 0, 0, 0},
	"acquires": {2, 1, 0, 1, 1, 0},
	"settles":  {1, 0, 1, 1, 0, 1},
}

// A cut is one piece of a script's text, and what it becomes with the
// features m cut: from old, or, with to, from old to the end of the first
// to after it. edit(0, s) must give s back (checked): a template written
// for the cut reproduces the shipped text, the features' lines and
// arguments its conditions. A cut's text must occur in each script's
// source exactly as many times as the file that holds it does (copies),
// so that a change to the scripts stops the bench rather than leaving a
// feature's code in place unseen.
type cut struct {
	in      file
	old, to string
	edit    func(m feature, s string) string
}

// swap is a cut that becomes new once any feature of by is cut.
func swap(in file, by feature, old, new string) cut {
	return cut{in: in, old: old, edit: func(m feature, s string) string {
		if m&by != 0 {
			return new
		}
		return s
	}}
}

// tpl is a cut written as a template: its shipped text is f(0).
func tpl(in file, f func(m feature) string) cut {
	return cut{in: in, old: f(0), edit: func(m feature, _ string) string { return f(m) }}
}

// span is a cut from old to the end of the first to after it.
func span(in file, old, to string, f func(m feature, s string) string) cut {
	return cut{in: in, old: old, to: to, edit: f}
}

// cutErr is the panic of once and spanOnce, which stripped recovers.
type cutErr struct{ error }

// once replaces old, which must occur in s exactly once.
func once(s, old, new string) string {
	if n := strings.Count(s, old); n != 1 {
		panic(cutErr{fmt.Errorf("%q: %d matches, want 1", old, n)})
	}
	return strings.Replace(s, old, new, 1)
}

// spanOnce replaces the text from old, which must occur in s exactly
// once, to the end of the first to after it.
func spanOnce(s, old, to, new string) string {
	if n := strings.Count(s, old); n != 1 {
		panic(cutErr{fmt.Errorf("%q: %d matches, want 1", old, n)})
	}
	i := strings.Index(s, old)
	j := strings.Index(s[i:], to)
	if j < 0 {
		panic(cutErr{fmt.Errorf("%q: no %q after it", old, to)})
	}
	return s[:i] + new + s[i+j+len(to):]
}

// has says whether m cuts every feature named in cond ("T", "S", "P",
// "D", or several joined by '&').
func has(m feature, cond string) bool {
	for _, c := range strings.Split(cond, "&") {
		if m&map[string]feature{"T": fT, "S": fS, "P": fP, "D": fD}[c] == 0 {
			return false
		}
	}
	return true
}

// list joins a parameter, argument or value list, leaving out each item
// written "<item>|<cond>" whose cond m cuts (see has).
func list(m feature, items ...string) string {
	var out []string
	for _, it := range items {
		v, cond, ok := strings.Cut(it, "|")
		if ok && has(m, cond) {
			continue
		}
		out = append(out, v)
	}
	return strings.Join(out, ", ")
}

// dropped lists the items of list(m, items...) that m leaves out.
func dropped(m feature, items ...string) string {
	var out []string
	for _, it := range items {
		if v, cond, ok := strings.Cut(it, "|"); ok && has(m, cond) {
			out = append(out, v)
		}
	}
	return strings.Join(out, ", ")
}

// when returns s if c, else "".
func when(c bool, s string) string {
	if c {
		return s
	}
	return ""
}

// stripped returns lua.Source(name) with the code that a budget using
// none of the features m still runs for them cut: their fields' reads
// and checks, their locals, arguments and closures, their branches in the
// loops over a call's buckets. Only code such a budget's calls run, or
// code that names what is cut (left in place, it would reach for a local
// no longer there), is cut: the code of a call that uses a feature (a
// tenant's, a sliding rate's, one met by a stop) may be left, unreached.
// What a budget without them runs is otherwise the shipped text: its
// replies and its state are the shipped scripts' (TestStrippedAsShipped).
//
// Cutting 'pause' from acquire's read moves every later value of h (and
// of the fields' names) down one: after the cuts, the indices of
// acquire.lua's text are renumbered (pauseShift).
func stripped(name string, m feature) (src string, err error) {
	n, ok := copies[name]
	if !ok {
		return "", fmt.Errorf("stripped: no script %q", name)
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(cutErr)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("stripped %s.lua: %w (the scripts changed: update storm/redisbench/unused.go)", name, e.error)
		}
	}()
	s := lua.Source(name)
	for _, c := range cuts {
		want := n[c.in]
		if got := strings.Count(s, c.old); got != want {
			return "", fmt.Errorf("stripped %s.lua: %d matches of %q, want %d (the scripts changed: update storm/redisbench/unused.go)", name, got, c.old, want)
		}
		var b strings.Builder
		rest := s
		for i := 0; i < want; i++ {
			at := strings.Index(rest, c.old)
			end := at + len(c.old)
			if c.to != "" {
				j := strings.Index(rest[at:], c.to)
				if j < 0 {
					return "", fmt.Errorf("stripped %s.lua: no %q after %q", name, c.to, c.old)
				}
				end = at + j + len(c.to)
			}
			matched := rest[at:end]
			if c.edit(0, matched) != matched {
				return "", fmt.Errorf("stripped: the cut at %q does not give the shipped text back", c.old)
			}
			b.WriteString(rest[:at])
			b.WriteString(c.edit(m, matched))
			rest = rest[end:]
		}
		b.WriteString(rest)
		s = b.String()
	}
	if m&fP != 0 && n[inAcquire] > 0 {
		return pauseShift(name, s)
	}
	return s, nil
}

var (
	// shiftable: an index of acquire.lua's h or names past 'pause'.
	shiftable = regexp.MustCompile(`\b(h|names)\[2 \+ (n \+ )?k\]`)
	// unshifted: one that pauseShift does not renumber, which must not be
	// left once 'pause' is cut (the pause itself, 'qs' and 'dv' are cut
	// cuts' own business).
	unshifted = regexp.MustCompile(`\bh\[2\]|\b(h|names)\[[34] \+ 2 \* n\]`)
)

// acquire.lua's first and last lines, which pauseShift renumbers between.
const acquireFirst, acquireLast = "-- acquire.lua: admit one call against every limit of a budget", "return {0, wait, us, reason, 0, 0, xr}"

// pauseShift renumbers acquire.lua's indices of h and names past 'pause'
// (h[2]), once the read of 'pause' is cut: h[2 + k] becomes h[1 + k].
func pauseShift(name, s string) (string, error) {
	if strings.Count(s, acquireFirst) != 1 || strings.Count(s, acquireLast) != 1 {
		return "", fmt.Errorf("stripped %s.lua: acquire.lua's first or last line is not there once (update storm/redisbench/unused.go)", name)
	}
	i := strings.Index(s, acquireFirst)
	j := strings.Index(s, acquireLast)
	body := s[i:j]
	if len(shiftable.FindAllString(body, -1)) == 0 {
		return "", fmt.Errorf("stripped %s.lua: no index of h past 'pause' to renumber (update storm/redisbench/unused.go)", name)
	}
	body = shiftable.ReplaceAllString(body, "${1}[1 + ${2}k]")
	if x := unshifted.FindString(body); x != "" {
		return "", fmt.Errorf("stripped %s.lua: %s left as it was with 'pause' cut (update storm/redisbench/unused.go)", name, x)
	}
	return s[:i] + body + s[j:], nil
}

// cuts, in the order of the scripts' text. T tenants, S sliding rates, P
// stops and pauses, D stored definitions.
var cuts = []cut{
	// prelude.lua: tcover, made for a call that names a tenant, behind a
	// check every call makes, and TIDLE (acquires.lua's tenant code alone
	// reads it).
	span(inPrelude, "local TIDLE = 60000\nlocal tcover\nif KEYS[5] then\n",
		"      redis.call('HSET', tkey, unpack(args, 1, j))\n    end\n  end\nend\n",
		func(m feature, s string) string { return when(m&fT == 0, s) + when(m&fT != 0, "local tcover\n") }),
	// slib: sliding.lua's factory, one closure every script makes.
	span(inPrelude, "local function slib()\n", "end\nlocal function glib(",
		func(m feature, s string) string {
			if m&fS != 0 {
				return "local slib\nlocal function glib("
			}
			return s
		}),

	// acquire.lua's read: the fields 'pause', 'qs' (the stop) and 'dv'
	// (the definition's copy), the tenant's key, SK (a lost sliding
	// rate's), and the locals they fill.
	tpl(inAcquire, func(m feature) string {
		dv := "4 + 2 * n"
		if m&fP != 0 {
			dv = "2 + 2 * n"
		}
		s := "local function read(" + list(m, "n", "myv", "tkey|T", "us", "now", "cover", "SK|S") + ")\n" +
			"  local names = {" + list(m, "'xp'", "'pause'|P") + "}\n" +
			"  for k = 1, n do names[2 + k], names[2 + n + k] = ARGV[8 + k], ARGV[8 + k] .. '.h' end\n" +
			when(m&fP == 0, "  names[3 + 2 * n] = 'qs'\n") +
			when(m&fD == 0, "  if myv then names["+dv+"] = 'dv' end\n") +
			"  local h = redis.call('HMGET', KEYS[1], unpack(names))\n" +
			"  local xr = (h[1] or 0) + 0\n"
		if l := list(m, "dvw|D", "th|T", "stop|P"); l != "" {
			s += "  local " + l + " = " + list(m, "nil|D", "nil|T", "false|P") + "\n"
		}
		return s
	}),
	span(inAcquire, "  if myv then\n    local dv = h[4 + 2 * n]\n",
		"      dvw = dv -- the copy was wrong: the definition changed under it\n    end\n  end\n",
		func(m feature, s string) string {
			switch {
			case m&fD != 0:
				return ""
			case m&fP != 0:
				return once(s, "h[4 + 2 * n]", "h[2 + 2 * n]")
			}
			return s
		}),
	span(inAcquire, "  if tkey then\n    local byte, tn = string.byte, {'xp', 'qb'}\n",
		"        h[2 + k], i = th[i + 1], i + 1\n      end\n    end\n  end\n",
		func(m feature, s string) string { return when(m&fT == 0, s) }),
	swap(inAcquire, fP, "  if h[3 + 2 * n] then\n"+
		"    local u, p, e, kind = string.match(h[3 + 2 * n], '^(%d+) (%d+) (%d+) (%a+)$')\n"+
		"    if u and u + 0 > now then stop = {u + 0, p + 0, e + 0, kind} end\n"+
		"  end\n", ""),
	tpl(inAcquire, func(m feature) string {
		return "  return " + list(m, "nil|D", "h", "names", "xr", "dvw|D", "th|T", "stop|P") + "\nend\n"
	}),

	// room: its tenant's key, the sliding rates' table and functions, the
	// share's locals; the loop that finds the sliding rates and works out
	// a share; in the loop over the buckets, the share's and a tenant's
	// checks and the sliding rates' branch.
	tpl(inAcquire, func(m feature) string {
		s := "local function room(" + list(m, "n", "h", "us", "now", "xr", "tkey|T", "slib|S", "byte|T&S", "floor|T&S") + ")\n"
		if l := list(m, "sl|S", "share|T", "swait|T", "keep|T"); l != "" {
			s += "  local " + l + " = " + list(m, "{}|S", "false|T", "0|T", "nil|T") + "\n"
		}
		return s + when(m&fS == 0, "  local sread, sfit, swrite\n") +
			"  local tats, froms = {0, 0, 0, 0}, {0, 0, 0, 0}\n"
	}),
	span(inAcquire, "  for k = 1, n do\n    local f = ARGV[8 + k]\n    local b = byte(f, 1)\n    if b == 126 then\n",
		"    if ppm then keep = ppm / 1000000 end\n  end\n",
		func(m feature, s string) string {
			if m&(fT|fS) == fT|fS {
				return ""
			}
			if m&(fT|fS) != 0 { // a tenant's sliding rate
				s = once(s, "    elseif b == 64 and byte(f, 2) == 126 then\n"+
					"      sl[k] = string.match(f, '^@~(%d+):') + 0\n"+
					"      if not sread then sread, sfit, swrite = slib() end\n", "")
			}
			if m&fT != 0 {
				s = spanOnce(s, "    elseif b == 37 then\n", "        if past > swait then swait = past end\n      end\n", "")
				s = spanOnce(s, "  -- keep (see ARGV[2]) matters only to a call over its share.\n", "    if ppm then keep = ppm / 1000000 end\n  end\n", "")
			}
			if m&fS != 0 {
				s = spanOnce(s, "    if b == 126 then\n", "    elseif b == 37 then\n", "    if b == 37 then\n")
			}
			return s
		}),
	tpl(inAcquire, func(m feature) string {
		t, sl := m&fT != 0, m&fS != 0
		s := "  local wait, reason, step = 0, '', 0\n" +
			"  for k = 1, n do\n" +
			"    local field = ARGV[8 + k]\n" +
			when(!t, "    local b = byte(field, 1)\n    if b ~= 37 then\n") +
			"      local charge, allow = ARGV[7 + n + 2 * k] + 0, ARGV[8 + n + 2 * k] + 0\n" +
			"      if charge > allow then return {-1, 0, us, field, 0, 0, xr} end\n" +
			when(!t, "      if keep and b ~= 64 then allow = allow - floor(allow * keep) end\n")
		if !sl {
			s += "      local g, w = sl[k], 0\n" +
				"      if g then\n" +
				"        local cur = floor(now * 1000 / g)\n"
			if t {
				s += "        local st = sread(h[2 + k], cur, KEYS[1], field)\n" +
					"        local j = sfit(st, cur, charge, allow)\n" +
					"        if j > cur then w = j * g - now * 1000 end\n"
			} else {
				s += "        local st = sread(h[2 + k], cur, b == 64 and tkey or KEYS[1], field)\n" +
					"        if charge > allow then\n" +
					"          w = swait\n" +
					"        else\n" +
					"          local j = sfit(st, cur, charge, allow)\n" +
					"          if j > cur then w = j * g - now * 1000 end\n" +
					"        end\n"
			}
			s += "        sl[n + k] = st\n" +
				"        if w > wait then wait, reason, step = w, field, g end\n" +
				"      else\n"
		}
		return s + "        local tat = h[2 + k]\n" +
			"        tat = tat and tat + 0 or us -- parsed once: a parse is a strtod\n" +
			"        if tat - us < 0 then tat = us end\n" +
			"        froms[k], tats[k] = tat, tat + charge\n" +
			"        " + when(sl, "local ") + "w = tats[k] - us - allow\n" +
			"        if w > wait then wait, reason, step = w, field, charge end\n" +
			when(!sl, "      end\n") +
			when(!t, "    end\n") +
			"  end\n" +
			"  return " + list(m, "nil", "wait / 1000", "reason", "step / 1000", "share|T", "sl|S", "tats", "froms", "swrite|S") + "\nend\n"
	}),

	// admit: its arguments for a tenant, a sliding rate, the definition's
	// copy and a stop's probe; the tenant's key, fields and expiry, and
	// the sliding rates' branch, in its loop; the copy's and the probe's
	// writes.
	tpl(inAcquire, func(m feature) string {
		return "local function admit(" + admitArgs(m, "pend") + ")\n" +
			"  local " + list(m, "fmt", "floor|S", "max", "leases") + " = " + list(m, "string.format", "math.floor|S", "math.max", "KEYS[2]") + "\n"
	}),
	tpl(inAcquire, func(m feature) string {
		t, sl := m&fT != 0, m&fS != 0
		out, j, ms := "out", "j", "m"
		if t {
			out, j, ms = "args", "a", "ms"
		}
		s := "  local turn, args, ms, a = us + wait * 1000, {}, expiry, 0\n" +
			when(!t, "  local tkey = KEYS[5]\n  local targs, tms, ta = tkey and {}, 0, 0\n") +
			"  for k = 1, n do\n" +
			"    local " + list(m, "g|S", "f") + " = " + list(m, "sl[k]|S", "ARGV[8 + k]") + "\n" +
			when(!t, "    local b = byte(f, 1)\n"+
				"    local out, j, m = args, a, ms\n"+
				"    if b == 64 or b == 37 then out, j, m = targs, ta, tms end\n")
		if !sl {
			s += "    if g then\n" +
				"      local jt = floor((now + wait) * 1000 / g)\n" +
				"      " + j + " = swrite(sl[n + k], floor(now * 1000 / g), jt, ARGV[7 + n + 2 * k] + 0, " + out + ", " + j + ")\n" +
				"      if (jt + SK + 1) * g / 1000 > " + ms + " then " + ms + " = (jt + SK + 1) * g / 1000 end\n" +
				"    else\n"
		}
		s += "      " + out + "[" + j + " + 1], " + out + "[" + j + " + 2] = f, fmt('%d', tats[k])\n" +
			"      " + j + " = " + j + " + 2\n" +
			when(!t, "      if b ~= 37 then\n") +
			"        " + out + "[" + j + " + 1], " + out + "[" + j + " + 2] = names[2 + n + k], push(h[2 + n + k], us, max(froms[k] - turn, 0))\n" +
			"        " + j + " = " + j + " + 2\n" +
			when(!t, "      end\n") +
			"      if tats[k] / 1000 > " + ms + " then " + ms + " = tats[k] / 1000 end\n" +
			when(!sl, "    end\n") +
			when(!t, "    if out == targs then ta, tms = j, m else a, ms = j, m end\n") +
			"  end\n" +
			when(!t, "  if tkey then tcover(tkey, now, (th[1] or 0) + 0, max(tms, now), targs, ta) end\n") +
			when(m&fD == 0, "  if dvw then args[a + 1], args[a + 2] = 'dv', dvw; a = a + 2 end\n") +
			when(m&fP == 0, "  if probe then\n"+
				"    args[a + 1], args[a + 2] = 'qs', probe\n"+
				"    cover(now, (h[1] or 0) + 0, ms, args, a + 2)\n"+
				"    return {1, 0, us, 'probe', expiry, 0, xr}\n"+
				"  end\n") +
			"  cover(now, (h[1] or 0) + 0, ms, args, a)\n"
		return s
	}),

	// acquire.lua's main block: the tenant's key, read's, room's and
	// admit's arguments and results for the features, the definition's
	// reply, the pause's and the stop's checks. A local no longer filled
	// stays declared (nil): the paths of calls that use the feature, not
	// taken, still name it.
	swap(inAcquire, fT, "local tkey, probe = KEYS[5], nil\n", "local probe\n"),
	tpl(inAcquire, func(m feature) string {
		s := ""
		if l := dropped(m, "r|D", "dvw|D", "th|T", "stop|P"); l != "" {
			s = "local " + l + "\n"
		}
		return s + "local " + list(m, "r|D", "h", "names", "xr", "dvw|D", "th|T", "stop|P") +
			" = read(" + list(m, "n", "myv", "tkey|T", "us", "now", "cover", "SK|S") + ")\n" +
			when(m&fD == 0, "if r then return r end\n")
	}),
	tpl(inAcquire, func(m feature) string {
		return "    " + list(m, "r", "wait", "reason", "step", "share|T", "sl|S", "tats", "froms", "swrite|S") +
			" = room(" + list(m, "n", "h", "us", "now", "xr", "tkey|T", "slib|S", "byte|T&S", "floor|T&S") + ")\n"
	}),
	swap(inAcquire, fP, "    local pause = h[2] and h[2] + 0\n    if stop or (pause and pause > now) or wait > 0 then\n",
		"    local pause\n    if wait > 0 then\n"),
	tpl(inAcquire, func(m feature) string { return "  reply = admit(" + admitArgs(m, "conc and not slot") + ")\n" }),

	// settle.lua's givetat: a share's check (and the field it reads).
	span(inSettle, "local function givetat(field, tat, s, r, t, us, hv)\n", "  if r <= 0 then return nil end\n",
		func(m feature, s string) string {
			if m&fT == 0 {
				return s
			}
			s = once(s, "local function givetat(field, tat, s, r, t, us, hv)\n", "local function givetat(tat, s, r, t, us, hv)\n")
			s = once(s, "  if byte(field, 1) ~= 37 then\n", "")
			return once(s, "      if d < r then r = d end\n    end\n  end\n  if r <= 0", "      if d < r then r = d end\n    end\n  if r <= 0")
		}),
	// correct: the pass, the shares' caps and checks, a tenant's cover.
	span(inSettle, "local function correct(st, pass, fields, delta, caps, m, t, us, now)\n",
		"    cover(now, (h[1] or 0) + 0, max(ms, now), args, j)\n  end\nend\n",
		func(m feature, s string) string {
			if m&fT == 0 {
				return s
			}
			s = once(s, "local function correct(st, pass, fields, delta, caps, m, t, us, now)\n", "local function correct(st, fields, delta, m, t, us, now)\n")
			s = once(s, "      local to, ns = givetat(fields[k], tat, s, -delta[k], t, us)\n", "      local to, ns = givetat(tat, s, -delta[k], t, us)\n")
			s = once(s, "      if byte(fields[k], 1) ~= 37 then\n"+
				"        args[j + 1], args[j + 2] = names[o + 2 * k], push(s, us, tat - us)\n"+
				"        j = j + 2\n"+
				"      end\n", "      args[j + 1], args[j + 2] = names[o + 2 * k], push(s, us, tat - us)\n      j = j + 2\n")
			s = once(s, "      -- A share's cap (see prelude.lua): at most 2 × allow past now.\n"+
				"      if caps[k] and tat - us - 2 * caps[k] > 0 then tat = us + 2 * caps[k] end\n", "")
			return once(s, "  elseif pass == 2 then\n    tcover(st, now, (h[1] or 0) + 0, max(ms, now), args, j)\n", "")
		}),
	// settle.lua's main block: the pass over a tenant's hash, the share's
	// caps, the sliding rates' fields and branch.
	tpl(inSettle, func(m feature) string {
		t, sl := m&fT != 0, m&fS != 0
		st := "st"
		if t {
			st = "state"
		}
		s := when(!t, "local tkey = KEYS[5]\n"+
			"for pass = 1, tkey and 2 or 1 do\n"+
			"  local st = pass == 2 and tkey or state\n") +
			"  local " + list(m, "fields", "delta", "caps|T", "m") + " = " + list(m, "{}", "{}", "{}|T", "0") + "\n" +
			when(!sl, "  local sfields, svals = nil, nil\n") +
			"  for k = 1, n do\n" +
			"    local f, v = ARGV[3 + 2 * k], ARGV[4 + 2 * k]\n" +
			when(!(t && sl), "    local b = byte(f, 1)\n")
		sliding := "      sfields, svals = sfields or {}, svals or {}\n" +
			"      sfields[#sfields + 1], svals[#svals + 1] = f, v\n"
		mine := "    local mine = b ~= 64 and b ~= 37\n" +
			"    if pass == 2 then mine = not mine end\n"
		switch {
		case !t && !sl:
			s += mine + "    if not mine then\n    elseif b == 126 or b == 64 and byte(f, 2) == 126 then\n" + sliding + "    else\n"
		case t && !sl:
			s += "    if b == 126 then\n" + sliding + "    else\n"
		case !t && sl:
			s += mine + "    if mine then\n"
		}
		s += "      m = m + 1\n" +
			"      fields[m] = f\n"
		if t {
			s += "      delta[m] = v + 0\n"
		} else {
			s += "      local u, a = nil, nil\n" +
				"      if b == 37 then u, a = string.match(v, '^(-?%d+):(%d+)$') end\n" +
				"      if u then delta[m], caps[m] = u + 0, a + 0 else delta[m] = v + 0 end\n"
		}
		s += when(!(t && sl), "    end\n") + "  end\n"
		if !sl {
			s += "  if sfields then\n" +
				"    local _, _, _, slides = slib()\n" +
				"    slides(" + st + ", " + when(t, "1") + when(!t, "pass") + ", sfields, svals, now, cover, tcover)\n" +
				"  end\n"
		}
		return s + "  -- A charge time after now counts as now.\n" +
			"  if m > 0 then correct(" + list(m, st, "pass|T", "fields", "delta", "caps|T", "m", "math.min(charged, us)", "us", "now") + ") end\n" +
			when(!t, "end\n")
	}),

	// batch.lua: each group's tenant, and the KEYS made for a call's
	// tenant; kind's check for a tenant's sliding rate, and with neither
	// feature kinds itself (the batches read a field's kind only to find
	// those two); the tenants' tables, tread and tset (two closures every
	// batch makes), hset's loop over the tenants and its new tables.
	tpl(inBatch, func(m feature) string { return "local " + list(m, "calls", "lens", "tks|T", "c") + "\n" }),
	tpl(inBatch, func(m feature) string {
		t := m&fT != 0
		return "local function begin()\n" +
			"  state, leases, queue, A = KEYS[1], KEYS[2], KEYS[3], ARGV\n" +
			"  " + list(m, "calls", "lens", "tks|T", "c") + " = " + list(m, "{}", "{}", "{}|T", "0") + "\n" +
			"  local i, m = 1, #A\n" +
			"  while i <= m do\n" +
			"    local " + list(m, "t|T", "n") + " = " + list(m, "A[i] + 0|T", "A[i + 1] + 0") + "\n" +
			"    c = c + 1\n" +
			"    calls[c], lens[c] = i + 1, n\n" +
			when(!t, "    tks[c] = t > 0 and KEYS[t]\n") +
			"    i = i + n + 2\n" +
			"  end\n" +
			"  forget()\n" +
			"end\n"
	}),
	tpl(inBatch, func(m feature) string {
		return "local function keys(c) return {" + list(m, "state", "leases", "queue", "KEYS[4]", "tks[c] or nil|T") + "} end\n"
	}),
	tpl(inBatch, func(m feature) string {
		if m&(fT|fS) == fT|fS {
			return "local hnames = {}\n" +
				"local function kind(f)\n" +
				"  hnames[f] = f .. '.h'\n" +
				"end\n"
		}
		return "local kinds, hnames = {}, {}\n" +
			"local function kind(f)\n" +
			"  local b = byte(f, 1)\n" +
			when(m&(fT|fS) == 0, "  if (b == 64 or b == 37) and byte(f, 2) == 126 then b = 126 end\n") +
			"  kinds[f], hnames[f] = b, f .. '.h'\n" +
			"  return b\n" +
			"end\n"
	}),
	swap(inBatch, fT, "local tgs, tl, nt\n", ""),
	span(inBatch, "-- tread returns tenant tk's table, its fields of want[1..w] read.",
		"  tl[nt] = tk\n  return g\nend\n", func(m feature, s string) string { return when(m&fT == 0, s) }),
	span(inBatch, "-- tset changes field f of a tenant's table g", "  g[x], g[x + 1], g[f] = f, num or false, v\nend\n",
		func(m feature, s string) string { return when(m&fT == 0, s) }),
	span(inBatch, "  for y = 1, nt do\n", "    if xp then redis.call('PEXPIRE', tk, fmt('%d', g.xp - now)) end\n  end\n",
		func(m feature, s string) string { return when(m&fT == 0, s) }),
	swap(inBatch, fT, "  tgs, nt = false, 0\n", ""),

	// acquires.lua's tables for fast: the tenant's fields to read, and
	// the fields 'pause' and 'qs'.
	tpl(inAcquires, func(m feature) string {
		want := "{'xp', 'pause', 'qs'}"
		if m&fP != 0 {
			want = "{'xp'}"
		}
		return "local " + list(m, "want", "twant|T", "tats", "froms") + " = " + list(m, want, "{'xp'}|T", "{}", "{}") + "\n"
	}),
	// acquires.lua's fast: the fields 'pause', 'qs' and 'dv' and their
	// checks, the tenant's fields, share and keep, a sliding rate's check
	// (and with neither, the field's kind).
	span(inAcquires, "local function fast(o, len, score, tk)\n  if score or ids[A[o + 1]] or A[o + 8] ~= '0' then return false end\n", "  return true, n, tats, froms, xr, tg\nend\n",
		func(m feature, s string) string {
			w := "3"
			if m&fP != 0 {
				w = "1"
			}
			s = once(s, "    sn, w, tw = false, 3, 1", "    "+list(m, "sn", "w", "tw|T")+" = "+list(m, "false", w, "1|T"))
			s = once(s, "  local w, tw = sw, stw\n", "  local "+list(m, "w", "tw|T")+" = "+list(m, "sw", "stw|T")+"\n")
			s = once(s, "    sn, sw, stw, sv = n, w, tw, myv\n", "    "+list(m, "sn", "sw", "stw|T", "sv")+" = "+list(m, "n", "w", "tw|T", "myv")+"\n")
			if m&fT != 0 {
				s = once(s, "local function fast(o, len, score, tk)\n", "local function fast(o, len, score)\n")
				s = once(s, "  if same then\n    if tw > 1 and not tk then return false end\n  else\n", "  if not same then\n")
				s = once(s, "      if b == 64 or b == 37 then\n"+
					"        -- A tenant's bucket, or its share: in its hash.\n"+
					"        if not tk then return false end\n"+
					"        tw = tw + 1\n"+
					"        twant[tw] = f\n"+
					"        if b == 64 then\n"+
					"          tw = tw + 1\n"+
					"          twant[tw] = hnames[f]\n"+
					"        end\n"+
					"      else\n"+
					"        want[w + 1], want[w + 2] = f, hnames[f]\n"+
					"        w = w + 2\n"+
					"      end\n", "      want[w + 1], want[w + 2] = f, hnames[f]\n      w = w + 2\n")
				s = spanOnce(s, "  local tg, keep = tk and tread(tk, twant, tw), nil\n",
					"      keep = lastkeep\n    end\n  end\n", "")
				s = once(s, "    local b = kinds[f]\n"+
					"    if b ~= 37 then\n"+
					"      local charge, allow = A[o + 7 + n + 2 * k] + 0, A[o + 8 + n + 2 * k] + 0\n"+
					"      if charge > allow then return false end\n"+
					"      if keep and b ~= 64 then allow = allow - floor(allow * keep) end\n"+
					"      local tat\n"+
					"      if b == 64 then tat = tg[f] else tat = got[f] end\n",
					"      local charge, allow = A[o + 7 + n + 2 * k] + 0, A[o + 8 + n + 2 * k] + 0\n"+
						"      if charge > allow then return false end\n"+
						"      local tat = got[f]\n")
				s = once(s, "      if tats[k] - us - allow > 0 then return false end\n    end\n  end\n",
					"      if tats[k] - us - allow > 0 then return false end\n  end\n")
				s = once(s, "  return true, n, tats, froms, xr, tg\n", "  return true, n, tats, froms, xr\n")
			}
			if m&fS != 0 {
				s = once(s, "      if b == 126 then return false end\n", "")
			}
			if m&(fT|fS) == fT|fS {
				s = once(s, "      local b = kinds[f] or kind(f)\n", "      if not hnames[f] then kind(f) end\n")
			}
			if m&fP != 0 {
				s = once(s, "  if got.qs then\n"+
					"    local u = string.match(got.qs, '^(%d+) %d+ %d+ %a+$')\n"+
					"    if u and u + 0 > now then return false end\n"+
					"  end\n"+
					"  if got.pause and got.pause + 0 > now then return false end\n", "")
			}
			if m&fD != 0 {
				s = once(s, "    if myv then\n      w = w + 1\n      want[w] = 'dv'\n    end\n", "")
				s = once(s, "  if myv and got.dv ~= myv then return false end\n", "")
			}
			return s
		}),
	// acquires.lua's main loop: the call's tenant, its fields and expiry.
	swap(inAcquires, fT, "  local tk = tks[x]\n  local ok, n, tats, froms, xr, tg = fast(o, len, scores[x - base], tk)\n",
		"  local ok, n, tats, froms, xr = fast(o, len, scores[x - base])\n"),
	span(inAcquires, "    local ms, tms = expiry, 0\n",
		"      if need > (tg.xp or 0) + 0 then tset(tg, 'xp', need + max(ceil((need - now) / 4), TIDLE), true) end\n    end\n",
		func(m feature, s string) string {
			if m&fT == 0 {
				return s
			}
			s = once(s, "    local ms, tms = expiry, 0\n", "    local ms = expiry\n")
			s = once(s, "      local b, h = kinds[f], hnames[f]\n      local v = tats[k]\n"+
				"      -- (froms[k] is never before us: the headroom is >= 0.)\n"+
				"      if b == 64 or b == 37 then\n"+
				"        tset(tg, f, v, true)\n"+
				"        if b == 64 then hpush(tg, tk, h, froms[k] - us) end\n"+
				"        if v / 1000 > tms then tms = v / 1000 end\n"+
				"      else\n", "      local h = hnames[f]\n      local v = tats[k]\n      -- (froms[k] is never before us: the headroom is >= 0.)\n")
			s = once(s, "        if v / 1000 > ms then ms = v / 1000 end\n      end\n    end\n",
				"        if v / 1000 > ms then ms = v / 1000 end\n    end\n")
			return spanOnce(s, "    if tk then\n", "TIDLE), true) end\n    end\n", "")
		}),

	// settles.lua's write: a held header's tenant, and the hash it is in
	// (the state's, with no tenant).
	tpl(inSettles, func(m feature) string {
		if m&fT != 0 {
			return "    local hv, f = e[1], e[2]\n" +
				"    if hv.held then\n" +
				"      local s = got[f]\n" +
				"      if byte(s, 1) == 255 then s = sub(s, 15) end\n" +
				"      s = head(hv[1], hv[2]) .. s\n" +
				"      set(f, s)\n"
		}
		return "    local hv, g, f, tk = e[1], e[2], e[3], e[4]\n" +
			"    if hv.held then\n" +
			"      local s = g[f]\n" +
			"      if byte(s, 1) == 255 then s = sub(s, 15) end\n" +
			"      s = head(hv[1], hv[2]) .. s\n" +
			"      if tk then tset(g, f, s) else set(f, s) end\n"
	}),
	// give: its hash and tenant, the level of heads that keeps the state's
	// stacks apart from a tenant's, a tenant's writes.
	span(inSettles, "local function give(g, tk, f, r, t)\n", "    if tk then tset(g, hf, ns) else set(hf, ns) end\n  end\nend\n",
		func(m feature, s string) string {
			if m&fT == 0 {
				return s
			}
			s = once(s, "local function give(g, tk, f, r, t)\n", "local function give(f, r, t)\n")
			s = once(s, "  local hs = heads[g]\n"+
				"  if not hs then\n"+
				"    hs = {}\n"+
				"    heads[g] = hs\n"+
				"  end\n"+
				"  local hv = hs[hf]\n"+
				"  if not hv then\n"+
				"    hv = {}\n"+
				"    hs[hf] = hv\n"+
				"  end\n", "  local hv = heads[hf]\n"+
				"  if not hv then\n"+
				"    hv = {}\n"+
				"    heads[hf] = hv\n"+
				"  end\n")
			s = once(s, "  local to, ns = givetat(f, g[f], g[hf], r, t, us, hv)\n", "  local to, ns = givetat(got[f], got[hf], r, t, us, hv)\n")
			s = once(s, "  if tk then tset(g, f, to, true) else set(f, to, true) end\n", "  set(f, to, true)\n")
			s = once(s, "      held[nh] = {hv, g, hf, tk}\n", "      held[nh] = {hv, hf}\n")
			s = once(s, "    hs[hf] = nil\n", "    heads[hf] = nil\n")
			return once(s, "    if tk then tset(g, hf, ns) else set(hf, ns) end\n", "    set(hf, ns)\n")
		}),
	swap(inSettles, fT, "local fields, back, want, twant = {}, {}, {}, {}\n", "local fields, back, want = {}, {}, {}\n"),
	// settles.lua's fast: the tenant's and the sliding rates' checks (and
	// with neither, the field's kind).
	span(inSettles, "local function fast(o, len, score, tk)\n  local cl = A[o + 3]\n", "  return true, fields, back, m\nend\n",
		func(m feature, s string) string {
			if m&fT != 0 {
				s = once(s, "local function fast(o, len, score, tk)\n", "local function fast(o, len, score)\n")
				s = once(s, "    if b == 64 or b == 37 then\n"+
					"      -- A tenant's bucket, or its share ('<µs>:<allow>' or '<µs>').\n"+
					"      if not tk then return false end\n"+
					"      if b == 37 then v = string.match(v, '^(-?%d+):%d+$') or v end\n"+
					"    end\n", "")
			}
			if m&fS != 0 {
				s = once(s, "    if b == 126 then return false end\n", "")
			}
			if m&(fT|fS) == fT|fS {
				s = once(s, "    local b = kinds[f] or kind(f)\n", "    if not hnames[f] then kind(f) end\n")
			}
			return s
		}),
	// settles.lua's main loop: the lease's tenant, its fields and writes.
	swap(inSettles, fT, "  local tk = tks[x]\n  local ok, fields, back, m = fast(o, len, score, tk)\n",
		"  local ok, fields, back, m = fast(o, len, score)\n"),
	span(inSettles, "    local w, tw, same = sw, stw, m == sm\n",
		"      if b == 64 or b == 37 then give(tg, tk, f, back[k], t) else give(got, false, f, back[k], t) end\n",
		func(m feature, s string) string {
			if m&fT == 0 {
				return s
			}
			s = once(s, "    local w, tw, same = sw, stw, m == sm\n", "    local w, same = sw, m == sm\n")
			s = once(s, "      w, tw = 0, 0\n", "      w = 0\n")
			s = once(s, "      sm, sw, stw = m, w, tw\n", "      sm, sw = m, w\n")
			s = once(s, "        local b = kinds[f]\n"+
				"        sf[k] = f\n"+
				"        if b == 64 then\n"+
				"          twant[tw + 1], twant[tw + 2] = f, hnames[f]\n"+
				"          tw = tw + 2\n"+
				"        elseif b == 37 then\n"+
				"          tw = tw + 1\n"+
				"          twant[tw] = f\n"+
				"        else\n"+
				"          want[w + 1], want[w + 2] = f, hnames[f]\n"+
				"          w = w + 2\n"+
				"        end\n", "        sf[k] = f\n        want[w + 1], want[w + 2] = f, hnames[f]\n        w = w + 2\n")
			s = once(s, "    local tg = tw > 0 and tread(tk, twant, tw)\n", "")
			return once(s, "      local b = kinds[f]\n"+
				"      if b == 64 or b == 37 then give(tg, tk, f, back[k], t) else give(got, false, f, back[k], t) end\n",
				"      give(f, back[k], t)\n")
		}),
}

// admitArgs is admit's parameter list (pend: "pend"), or its call's (pend:
// the call's expression).
func admitArgs(m feature, pend string) string {
	return list(m, "n", "h", "names", "th|T", "sl|S", "tats", "froms", "swrite|S", "id", "now", "us", "xr", "wait",
		"reason", "expiry", "score", pend, "dvw|D", "probe|P", "cover", "tcover|T", "push", "byte|T", "PENDING", "REAP_AFTER", "SK|S")
}
