package lua_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// The scripts against internal/model, the differential way: one sequence of
// acquires, settles, keepalives, pauses and clock steps goes to both, and
// every reply and, after every step, every bucket's TAT the snapshot script
// reports must agree, exactly: they are integers.
//
// On miniredis the test sets the clock (Mini.SetTime). A real Redis has a
// real clock, but every reply carries the clock the script read, and the
// model is a pure function of it; so the real lane is exact too, driven by
// the replies' clocks. It runs the same steps on a time axis compressed
// 10,000 times (a 70 s step is a 7 ms sleep, a 60 s window 6 ms; a step back
// is skipped), so leases expire and buckets refill within the test. What
// this lane adds is Redis's own Lua 5.1 against gopher-lua. It relies on no
// key of the budget expiring mid-run, which takes a second of idleness (see
// package model).
func TestScriptsMatchModel(t *testing.T) {
	// Three budgets, 100 random steps each (the same steps on both lanes).
	rng := rand.New(rand.NewPCG(1, 2))
	steps := make([]byte, 100*stepLen)
	var inputs [][]byte
	for _, h := range [][]byte{
		seedHeader(16, [3]byte{9, 0, 0}, [3]byte{39, 0, 0}, [3]byte{99, 0, 3}, [3]byte{99, 0, 3}, 2, 0),
		seedHeader(7, [3]byte{1, 3, 1}, [3]byte{19, 0, 1}, off, off, 0, 2),
		seedHeader(40, off, [3]byte{99, 1, 0}, [3]byte{2, 0, 2}, [3]byte{1, 3, 2}, 1, 3),
	} {
		for i := range steps {
			steps[i] = byte(rng.Uint32())
		}
		inputs = append(inputs, slices.Concat(h, steps))
	}
	t.Run("miniredis", func(t *testing.T) {
		b := redistest.Mini(t)
		rdb := b.Client(t)
		seen := map[string]int{}
		for _, in := range inputs {
			b.Mini.FlushAll()
			for k, n := range runScenario(t, lane{rdb: rdb, mini: b.Mini, scale: 1}, in, 100) {
				seen[k] += n
			}
		}
		// The steps must reach every kind of reply, or the comparison
		// proves little.
		for _, kind := range []string{"acquire 1 ", "acquire 1 later", "acquire 2 ", "acquire 0 pause",
			"acquire 0 concurrency", "acquire 0 rpm", "acquire 0 tpm", "acquire -1 tpm",
			"settle 1", "settle 0", "release 1", "cancel 1", "keepalive 1", "keepalive 0"} {
			if seen[kind] == 0 {
				t.Errorf("no %q reply in %v", kind, seen)
			}
		}
	})
	t.Run("redis", func(t *testing.T) {
		b := redistest.Real(t)
		rdb := b.Client(t)
		for _, in := range inputs {
			l := lane{rdb: rdb, scale: 10_000, name: redistest.Name(t)}
			t.Cleanup(func() { rdb.Del(context.Background(), l.keys()...) })
			runScenario(t, l, in, 100)
		}
	})
}

// FuzzScriptsMatchModel is TestScriptsMatchModel's miniredis lane on
// sequences the fuzzer makes. An input is a 16-byte header (the buckets, the
// concurrency limit, the batch floor) and then 8 bytes per step, decoded by
// decode; the seeds below are written step by step with seedStep, and
// testdata/fuzz keeps a few long sequences the fuzzer found.
func FuzzScriptsMatchModel(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	b := redistest.Mini(f)
	rdb := b.Client(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		b.Mini.FlushAll()
		runScenario(t, lane{rdb: rdb, mini: b.Mini, scale: 1}, data, 120)
	})
}

// The input format: see decode.
const (
	headerLen = 16
	stepLen   = 8
	// base is the first clock reading, in ms: divisible by 16, so a header's
	// start offset decides which admissions reap expired leases.
	base = 1_700_000_000_000
)

// Operations, the low nibble of a step's first byte.
const (
	opRetry       = 6 // resend an earlier acquire, same id and arguments
	opSettle      = 7 // 7 to 10: settle, release or cancel a lease
	opKeepAlive   = 11
	opPause       = 12
	opReconfigure = 15 // configure other buckets from now on
	// 0 to 5 and 13 acquire; 14 only moves the clock.
)

// scenario is a decoded input: one budget's configuration and its steps.
type scenario struct {
	start       int64
	buckets     model.Buckets
	conc, floor int64
	steps       []step
}

// step is one operation. a, b and c are read by the operation (see
// runner.do); ms is the clock step before it, negative for a step back.
type step struct {
	op   byte
	ms   int64
	a    byte
	b, c uint16
}

// decode reads a scenario from data, never failing: missing bytes read as
// zero. The header is the start offset (2 bytes), three bytes per bucket
// (capacity, refill and window selectors; a capacity selector divisible by 5
// leaves the limit unconfigured), the concurrency selector and the floor
// selector. Each step is op, clock (2 bytes), a, b (2), c (2). The clock's
// top 3 bits pick the size of the step (0-1: none, the same ms; 2-4: under
// 1 s; 5-6: under 8.2 s; 7: up to 70 s), its other 13 the amount; an op
// byte of 0xf0 or more steps the clock back instead, by up to 2 s.
// Durations are divided by scale.
func decode(data []byte, maxSteps int, scale int64) scenario {
	r := reader{data: data}
	sc := scenario{start: base + int64(r.u16())}
	for i := range sc.buckets {
		sc.buckets[i] = decodeBucket(i, r.byte(), r.byte(), r.byte(), scale)
	}
	if c := r.byte(); c%3 != 0 {
		sc.conc = 1 + int64(c%6)
	}
	sc.floor = [...]int64{200, 0, 500, 999}[r.byte()%4]
	for len(sc.steps) < maxSteps && r.off < len(data) {
		k, clock := r.byte(), r.u16()
		s := step{op: k & 0x0f, a: r.byte(), b: r.u16(), c: r.u16()}
		v := int64(clock & 0x1fff)
		switch class := clock >> 13; {
		case k >= 0xf0:
			s.ms = -(v % 2000)
		case class >= 2 && class <= 4:
			s.ms = v % 1000
		case class == 5 || class == 6:
			s.ms = v
		case class == 7:
			s.ms = v * 70_000 / 0x1fff
		}
		s.ms /= scale
		sc.steps = append(sc.steps, s)
	}
	return sc
}

func decodeBucket(i int, capSel, refillSel, windowSel byte, scale int64) model.Bucket {
	if capSel%5 == 0 {
		return model.Bucket{Cap: 0, Refill: 0, Window: 1}
	}
	c := int64(capSel)
	capacity := [...]int64{1 + c%12, 50 * (1 + c%200), 1 + c%100, 500 * (1 + c%200)}[i]
	return model.Bucket{
		Cap:    capacity,
		Refill: [...]int64{capacity, max(1, capacity/2), max(1, capacity/10), 2 * capacity}[refillSel%4],
		Window: max(1, [...]int64{60_000, 1_000, 10_000, 86_400_000}[windowSel%4]/scale),
	}
}

type reader struct {
	data []byte
	off  int
}

func (r *reader) byte() byte {
	if r.off >= len(r.data) {
		r.off++
		return 0
	}
	r.off++
	return r.data[r.off-1]
}

func (r *reader) u16() uint16 { return uint16(r.byte())<<8 | uint16(r.byte()) }

// lane is one Redis the scenario runs on.
type lane struct {
	rdb  redis.Scripter
	mini *miniredis.Miniredis // set: the test sets the clock; nil: it runs by itself
	// scale divides every duration of the scenario.
	scale int64
	name  string // the budget's name; "" for "model"
}

func (l lane) keys() []string {
	name := l.name
	if name == "" {
		name = "model"
	}
	return []string{"{llmpacer:" + name + "}:s", "{llmpacer:" + name + "}:l"}
}

// lease is an admission as its caller holds it.
type lease struct {
	id                  string
	cost, start, expiry int64
	charged             int64 // µs, the clock of its acquire's reply
	open                bool  // not yet ended by the test
	// turn is when the call may start (µs), and used what it takes of each
	// bucket (µs) as its caller sees it: the charge, less what the caller
	// gave back when it ended, never more than the charge.
	turn int64
	used [4]int64
}

// acquireArgs is an acquire as sent, kept for retries.
type acquireArgs struct {
	id           string
	cost         int64
	batch        bool
	maxWait, ttl int64
	spacing      int64 // ms between slot waiters, as the caller computes it
}

// runner drives one scenario through a lane and the model.
type runner struct {
	t      *testing.T
	lane   lane
	sc     scenario
	keys   []string
	bk     model.Buckets // the buckets configured now
	fields []any         // their fields, as ARGV
	m      model.Budget
	now    int64 // the clock set on miniredis
	last   int64 // the now_ms of the latest reply
	leases []*lease
	calls  []acquireArgs
	log    []string
	seen   map[string]int // replies by kind, e.g. "acquire 0 tpm"
}

// runScenario runs data's scenario on l and the model, and returns how
// many replies of each kind it saw.
func runScenario(t *testing.T, l lane, data []byte, maxSteps int) map[string]int {
	sc := decode(data, maxSteps, l.scale)
	r := &runner{t: t, lane: l, sc: sc, keys: l.keys(), now: sc.start, seen: map[string]int{}}
	r.setBuckets(sc.buckets)
	if l.mini != nil {
		l.mini.SetTime(time.UnixMilli(r.now))
	}
	back := false
	for i, s := range sc.steps {
		r.clock(s.ms)
		back = back || s.ms < 0
		r.logf("#%d %+dms", i, s.ms)
		r.do(s)
		r.compareSnapshot()
	}
	if !back {
		r.checkBound()
	}
	return r.seen
}

func (r *runner) setBuckets(bk model.Buckets) {
	r.bk, r.fields = bk, nil
	for i, b := range bk {
		if b.Cap > 0 {
			r.fields = append(r.fields, model.Name(i))
		}
	}
}

// reconfigure reads a's bit 0 (halve every capacity) and bit 1 (leave bucket
// a>>2&3 unconfigured): limits change when a fleet deploys new
// ones, and every script applies the arguments it brings, to levels stored
// under the old ones. a = 0 restores the scenario's buckets.
func (r *runner) reconfigure(a byte) {
	bk := r.sc.buckets
	for i := range bk {
		if a&1 != 0 && bk[i].Cap > 0 {
			bk[i].Cap = max(1, bk[i].Cap/2)
		}
	}
	if a&2 != 0 {
		bk[a>>2&3] = model.Bucket{Cap: 0, Refill: 0, Window: 1}
	}
	r.setBuckets(bk)
	r.logf("  buckets %v", bk)
}

func (r *runner) clock(ms int64) {
	if r.lane.mini != nil {
		r.now += ms
		r.lane.mini.SetTime(time.UnixMilli(r.now))
	} else if ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

func (r *runner) do(s step) {
	switch {
	case s.op == opRetry && len(r.calls) > 0:
		r.acquire(r.calls[int(s.b)%len(r.calls)])
	case s.op <= opRetry || s.op == 13:
		r.acquire(r.newCall(s))
	case s.op <= opSettle+3:
		r.settle(s)
	case s.op == opKeepAlive:
		r.keepAlive(s)
	case s.op == opPause:
		r.pause(max(1, (1+int64(s.c%8192))/r.lane.scale))
	case s.op == opReconfigure:
		r.reconfigure(s.a)
	}
}

// newCall reads an acquire from a step: a's bits 0-1 (0: batch), 2-4 (TTL)
// and 5-7 (max wait, from c); b the cost.
func (r *runner) newCall(s step) acquireArgs {
	tok := int64(0)
	for i, bk := range r.bk {
		if (i == model.TPM || i == model.TPD) && bk.Cap > 0 && (tok == 0 || bk.Cap < tok) {
			tok = bk.Cap
		}
	}
	if tok == 0 {
		tok = 1000
	}
	c := int64(s.c)
	maxWait := [...]int64{0, 0, 0, c % 60_001, c % 60_001, c % 60_001, c * 10, c % 1000}[s.a>>5]
	ttl := [...]int64{1, 1000, 5000, 30_000, 60_000, 60_000, 120_000, 300_000}[s.a>>2&7]
	cost := int64(s.b) % (tok + tok/16 + 1)
	if s.b&0x8000 != 0 {
		cost = int64(s.b&0x7fff) % (tok/8 + 1)
	}
	return acquireArgs{
		id:      "a" + strconv.Itoa(len(r.calls)),
		cost:    cost,
		batch:   s.a&3 == 0,
		maxWait: maxWait / r.lane.scale,
		ttl:     max(1, ttl/r.lane.scale),
		spacing: max(1, (1+int64(s.c%500))/r.lane.scale),
	}
}

func (r *runner) acquire(c acquireArgs) {
	r.calls = append(r.calls, c)
	prio := 0
	if c.batch {
		prio = 1
	}
	slots := int64(0)
	if r.sc.conc > 0 {
		slots = model.Slots(r.sc.conc, c.batch, r.sc.floor)
	}
	cs := model.Charges(r.bk, c.cost, c.batch, r.sc.floor)
	args := append([]any{c.id, prio, c.maxWait, c.ttl, slots, c.spacing}, r.fields...)
	for _, ch := range cs {
		args = append(args, ch.Charge, ch.Allow)
	}
	got := r.eval(lua.Acquire, args...)
	us := r.replyNow(got, 2, true)
	code, wait, reason, expiry := r.m.Acquire(us, c.id, c.batch, c.maxWait, c.ttl, slots, c.spacing, cs)
	r.logf("  acquire %+v at %d = %v; model {%d %d %q %d}", c, us, got, code, wait, reason, expiry)
	r.check(len(got) == 5 && got[0] == int64(code) && got[1] == wait && got[3] == reason && got[4] == expiry,
		"acquire %+v = %v; model says {%d %d now %q %d}", c, got, code, wait, reason, expiry)
	now := us / 1000
	kind := fmt.Sprintf("acquire %d %s", code, reason)
	if code == 1 && wait > 0 {
		kind = "acquire 1 later"
	}
	r.seen[kind]++
	if code == 1 {
		start := now + wait
		l := &lease{id: c.id, cost: c.cost, start: start, charged: us, expiry: expiry, open: true,
			turn: us + wait*1000}
		for _, ch := range cs {
			l.used[ch.Bucket] = ch.Charge
		}
		r.leases = append(r.leases, l)
	}
}

// settle reads a's bits 0-1 (mode: settle, release, cancel, reject), 2-4
// (0: send a charge time 1 s early, as a caller that only knows a lower
// bound does) and 6-7 (both set: any lease, ended or not); b picks the
// lease; c the tokens used (bits 0-2: as reserved, fewer, more, or far
// more, which runs into the debt cap). The corrections are those package
// lease sends for each way a lease ends.
func (r *runner) settle(s step) {
	l := r.pick(s.a&0xc0 == 0xc0, s.b)
	mode := [...]string{"settle", "release", "cancel", "reject"}[s.a&3]
	charged := l.charged
	if s.a>>2&7 == 0 {
		charged -= 1_000_000 / r.lane.scale
	}
	v := int64(s.c >> 3)
	used := [...]int64{l.cost, l.cost, v % (l.cost + 1), v % (l.cost + 1),
		l.cost + v%(l.cost+1), l.cost + v%(l.cost+1), l.cost + v%(l.cost+1), l.cost + v%256*50}[s.c&7]
	how := map[string]int{"settle": model.Settled, "release": model.Released, "cancel": model.Canceled, "reject": model.Rejected}[mode]
	deltas := model.Deltas(r.bk, how, l.cost, used)
	args := []any{l.id, charged}
	for _, d := range deltas {
		args = append(args, model.Name(d.Bucket), d.Us)
	}
	got := r.eval(lua.Settle, args...)
	us := r.replyNow(got, 1, true)
	want := r.m.Settle(us, l.id, charged, deltas)
	r.logf("  settle %s %s reserved=%d used=%d charged=%d %v = %v; model %d", l.id, mode, l.cost, used, charged, deltas, got, want)
	r.check(len(got) == 2 && got[0] == int64(want), "settle %s %s = %v; model says {%d now}", l.id, mode, got, want)
	l.open = false
	if want == 1 {
		for _, d := range deltas {
			if d.Us < 0 {
				l.used[d.Bucket] = max(0, l.used[d.Bucket]+d.Us)
			}
		}
	}
	r.seen[fmt.Sprintf("%s %d", mode, want)]++
}

// checkBound checks the promise the budget makes, whatever order its
// give-backs arrive in: what the calls whose turn falls in any interval
// [t, t+d] use of a bucket never exceeds a full bucket plus d's refill. In
// µs of the bucket's time: the span (and its slack) plus d. Calls that
// overrun their reservation count their reservation: a debt is charged
// after the fact. A clock that steps back voids the promise, so such runs
// are not checked.
func (r *runner) checkBound() {
	for i, bk := range r.sc.buckets {
		if bk.Cap == 0 {
			continue
		}
		wb := bk.Wire(i)
		calls := slices.Clone(r.leases)
		slices.SortFunc(calls, func(x, y *lease) int { return cmp.Compare(x.turn, y.turn) })
		for j := range calls {
			var sum int64
			for k := j; k < len(calls); k++ {
				sum += calls[k].used[i]
				if bound := wb.Span + wb.Slack + calls[k].turn - calls[j].turn; sum > bound {
					r.fail("%s: the calls whose turns lie in [%d, %d] use %d µs of the bucket; bound %d (span %d + slack %d + %d)",
						wb.Field, calls[j].turn, calls[k].turn, sum, bound, wb.Span, wb.Slack, calls[k].turn-calls[j].turn)
				}
			}
		}
	}
}

// keepAlive reads a's bits 6-7 (both set: any lease, ended or not), b (the
// lease) and c (the TTL).
func (r *runner) keepAlive(s step) {
	l := r.pick(s.a&0xc0 == 0xc0, s.b)
	ttl := max(1, (1+2*int64(s.c))/r.lane.scale)
	got := r.eval(lua.KeepAlive, l.id, ttl)
	now := r.replyNow(got, 1, true) / 1000
	code, expiry := r.m.KeepAlive(now, l.id, ttl)
	r.logf("  keepalive %s %d = %v; model {%d %d}", l.id, ttl, got, code, expiry)
	r.check(len(got) == 3 && got[0] == int64(code) && got[2] == expiry,
		"keepalive %s %d = %v; model says {%d now %d}", l.id, ttl, got, code, expiry)
	if code == 1 {
		l.expiry = expiry
	}
	r.seen[fmt.Sprintf("keepalive %d", code)]++
}

func (r *runner) pause(ms int64) {
	got := r.eval(lua.Pause, ms)
	now := r.replyNow(got, 1, true) / 1000
	want := r.m.Pause(now, ms)
	r.logf("  pause %d = %v; model %d", ms, got, want)
	r.check(len(got) == 2 && got[0] == want, "pause %d = %v; model says {%d now}", ms, got, want)
}

// pick returns a lease the test has not ended and that has not expired
// (any lease if all, or if none is left), or a lease nobody holds.
func (r *runner) pick(all bool, x uint16) *lease {
	var open []*lease
	for _, l := range r.leases {
		if l.open && l.expiry > r.last {
			open = append(open, l)
		}
	}
	if all || len(open) == 0 {
		open = r.leases
	}
	if len(open) == 0 {
		return &lease{id: "nobody", start: r.now, expiry: r.now + 1, charged: r.now * 1000}
	}
	// Mostly one of the latest: a caller ends its calls soon after it makes
	// them, so most of these find the lease still live.
	if x&0x8000 == 0 {
		open = open[max(0, len(open)-4):]
	}
	return open[int(x&0x7fff)%len(open)]
}

// compareSnapshot compares what snapshot.lua reports with the model: the
// pause, the leases in flight and every bucket's TAT, exactly (they are
// integers, and the model is a pure function of the clock the replies
// carry).
func (r *runner) compareSnapshot() {
	got := r.eval(lua.Snapshot, r.fields...)
	us := r.replyNow(got, 0, true)
	want := r.m.Snapshot(us)
	ok := len(got) == 3+len(r.fields) && got[1] == want.PauseRemaining && got[2] == want.InFlight
	j := 3
	var tats []string
	for i := 0; ok && i < 4; i++ {
		if r.bk[i].Cap == 0 {
			continue
		}
		w := ""
		if want.Stored[i] {
			w = strconv.FormatInt(want.TATs[i], 10)
		}
		tats = append(tats, w)
		ok = got[j] == w
		j++
	}
	r.check(ok, "snapshot = %v; model says {now %d %d us %v}", got, want.PauseRemaining, want.InFlight, tats)
}

// eval runs s with the budget's keys, as a worker in any language would.
func (r *runner) eval(s *redis.Script, args ...any) []any {
	r.t.Helper()
	v, err := s.Run(context.Background(), r.lane.rdb, r.keys, args...).Slice()
	if err != nil {
		r.fail("script error: %v", err)
	}
	return v
}

// replyNow returns the clock at got[i] (µs if micro, else ms) and checks it
// against the clock set on miniredis.
func (r *runner) replyNow(got []any, i int, micro bool) int64 {
	r.t.Helper()
	now, ok := any(nil), false
	if i < len(got) {
		now = got[i]
		_, ok = now.(int64)
	}
	want := r.now
	if micro {
		want *= 1000
	}
	r.check(ok && (r.lane.mini == nil || now == want), "reply %v: clock at [%d]; want %d", got, i, want)
	v := now.(int64)
	r.last = v
	if micro {
		r.last = v / 1000
	}
	return v
}

func (r *runner) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *runner) check(ok bool, format string, args ...any) {
	r.t.Helper()
	if !ok {
		r.fail(format, args...)
	}
}

func (r *runner) fail(format string, args ...any) {
	r.t.Helper()
	tail := r.log[max(0, len(r.log)-30):]
	r.t.Fatalf("%s\nbuckets %v conc %d floor %d\nmodel %v\nlast steps:\n%s",
		fmt.Sprintf(format, args...), r.bk, r.sc.conc, r.sc.floor, &r.m, strings.Join(tail, "\n"))
}

// seedStep encodes one step: ms is the clock step (0 to 70,000; a negative
// one steps back up to 1,999 ms).
func seedStep(op byte, ms int64, a byte, b, c uint16) []byte {
	var clock uint16
	switch {
	case ms < 0:
		op |= 0xf0
		clock = uint16(-ms)
	case ms == 0:
	case ms < 1000:
		clock = 2<<13 | uint16(ms)
	case ms <= 0x1fff:
		clock = 5<<13 | uint16(ms)
	default:
		clock = 7<<13 | uint16((ms*0x1fff+69_999)/70_000)
	}
	s := []byte{op, 0, 0, a, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(s[1:], clock)
	binary.BigEndian.PutUint16(s[4:], b)
	binary.BigEndian.PutUint16(s[6:], c)
	return s
}

// Acquire's a byte: priority, TTL and max-wait selectors.
const (
	interactive = 1 // bits 0-1; 0 is batch
	ttl1ms      = 0 << 2
	ttl1s       = 1 << 2
	ttl5s       = 2 << 2
	ttl60s      = 4 << 2
	waitNone    = 0 << 5
	waitC       = 3 << 5 // max wait = c ms
	waitC10     = 6 << 5 // max wait = 10·c ms
	// settle's a byte: mode in bits 0-1, bit 2 keeps the current expiry.
	modeSettle  = 0 | 1<<2
	modeRelease = 1 | 1<<2
	modeCancel  = 2 | 1<<2
	// settle's c: how the tokens used compare with those reserved, in
	// bits 0-2; the rest, shifted left 3, is v (see runner.settle).
	usedFewer   = 2 // v mod (reserved+1)
	usedFarMore = 7 // reserved + 50·(v mod 256)
)

// seedHeader encodes a header: the start offset (ms after base), the
// capacity, refill and window selectors of each bucket (see decodeBucket),
// the concurrency and the floor selectors.
func seedHeader(start uint16, rpm, tpm, rpd, tpd [3]byte, conc, floor byte) []byte {
	h := []byte{byte(start >> 8), byte(start)}
	for _, b := range [][3]byte{rpm, tpm, rpd, tpd} {
		h = append(h, b[:]...)
	}
	return append(h, conc, floor)
}

// Bucket selectors for seedHeader.
var (
	off     = [3]byte{0, 0, 0}  // not configured
	rpm2    = [3]byte{1, 0, 0}  // 2 per minute
	tpm1000 = [3]byte{19, 0, 0} // 1000 per minute
)

func fuzzSeeds() [][]byte {
	seq, header := slices.Concat[[]byte], seedHeader
	return [][]byte{
		// Reservations: a turn ahead, a queue behind it, a refund, a retry,
		// a keepalive, an overrun capped at one bucket of debt.
		seq(header(1, rpm2, tpm1000, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 600, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 600, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitNone, 100, 0),
			seedStep(opSettle, 30_000, modeSettle, 0, usedFewer|100<<3),
			seedStep(opRetry, 0, 0, 1, 0),
			seedStep(opKeepAlive, 10, 0, 0, 60_000),
			seedStep(opSettle, 70_000, modeSettle, 0, usedFarMore|200<<3),
			seedStep(0, 5, interactive|ttl5s|waitC10, 900, 6_000),
			seedStep(14, 70_000, 0, 0, 0)),
		// Concurrency 2: the third caller queues along qc, leases expire,
		// a retried id of an expired lease, hold time measured.
		seq(header(3, [3]byte{11, 0, 0}, off, off, [3]byte{3, 0, 0}, 1, 0),
			seedStep(0, 0, interactive|ttl5s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl5s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl5s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl5s|waitC, 10, 1000),
			seedStep(opSettle, 700, modeRelease, 0, 0),
			seedStep(0, 1, interactive|ttl5s|waitC, 10, 1000),
			seedStep(14, 6_000, 0, 0, 0),
			seedStep(opRetry, 0, 0, 1, 0),
			seedStep(opSettle, 0, modeSettle|0x80, 1, 0),
			seedStep(0, 3, interactive|ttl1ms|waitNone, 10, 0)),
		// Batch floor 50%: batch calls stop at half the bucket and space
		// along qb; an interactive call still gets in.
		seq(header(5, off, tpm1000, off, off, 0, 2),
			seedStep(0, 0, ttl5s|waitC, 333, 30_000),
			seedStep(0, 0, ttl5s|waitC, 333, 30_000),
			seedStep(0, 0, ttl5s|waitC, 333, 29_940), // its turn on the bound
			seedStep(0, 0, interactive|ttl5s|waitNone, 333, 0),
			seedStep(0, 200, ttl5s|waitC, 333, 30_000),
			seedStep(0, 0, ttl5s|waitC, 333, 30_000),
			seedStep(opSettle, 10, modeCancel, 0, 0),
			seedStep(0, 7_000, ttl5s|waitC, 333, 30_000)),
		// Batch waits that are not whole ms: qb is stored rounded up.
		seq(header(11, off, [3]byte{6, 2, 0}, off, off, 0, 2),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 3, ttl5s|waitC10, 50, 60_000)),
		// Calls that end at once (hold 0): concurrency waiters are spaced
		// at least 1 ms apart.
		seq(header(13, off, tpm1000, off, off, 5, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(opSettle, 0, modeSettle, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000)),
		// 104 leases expire together; a minute later one admission reaps
		// 100 of them, in the sorted set's order (expiry, then id as bytes:
		// a0, a1, a10, a100, ...), so a ms later a retry of a0 is admitted
		// anew and one of a99 is still answered 2.
		seq(header(0, off, tpm1000, off, off, 0, 0),
			seedStep(0, 1, interactive|ttl1ms|waitNone, 0, 0),
			bytes.Repeat(seedStep(0, 0, interactive|ttl1ms|waitNone, 0, 0), 103),
			seedStep(14, 60_000, 0, 0, 0),
			seedStep(0, 15, interactive|ttl1ms|waitNone, 0, 0),
			seedStep(opRetry, 1, 0, 0, 0),
			seedStep(opRetry, 0, 0, 99, 0),
			seedStep(opRetry, 0, 0, 96, 0)),
		// Boundaries: a keepalive and a settle on the very ms their lease
		// expires, a slot free on the ms its lease expires.
		seq(header(9, off, tpm1000, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl1s|waitNone, 10, 0),
			seedStep(opKeepAlive, 1_000, 0, 0, 500),
			seedStep(0, 0, interactive|ttl1s|waitNone, 10, 0),
			seedStep(0, 0, interactive|ttl1s|waitNone, 10, 0),
			seedStep(opSettle, 1_000, modeSettle|0xc0, 1, 0),
			seedStep(0, 0, interactive|ttl1s|waitNone, 10, 0)),
		// A give-back that reaches Redis late: RPM 60 with a burst of 5 (1
		// a second); a call at 0 whose cancel lands at 1.3 s, after another
		// caller took the burst refilled by 1.15 s. It must give nothing
		// back, or a sixth call fits in 150 ms (see checkBound).
		seq(header(0, [3]byte{4, 3, 2}, off, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0),
			seedStep(0, 1150, interactive|ttl60s|waitNone, 0, 0),
			bytes.Repeat(seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0), 4),
			seedStep(opSettle, 150, modeCancel, 0x8000, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0)),
		// Pauses, reaping on ms divisible by 16, a clock stepping back.
		seq(header(0, rpm2, tpm1000, [3]byte{7, 1, 2}, [3]byte{4, 3, 1}, 2, 3),
			seedStep(0, 0, interactive|ttl1ms|waitNone, 1, 0),
			seedStep(0, 16, interactive|ttl1ms|waitNone, 1, 0),
			seedStep(opRetry, 0, 0, 0, 0),
			seedStep(opPause, 1, 0, 0, 2000),
			seedStep(0, 5, interactive|ttl60s|waitC, 1, 60_000),
			seedStep(opPause, 0, 0, 0, 100),
			seedStep(0, 2_500, interactive|ttl60s|waitC, 1, 60_000),
			seedStep(0, -1_000, interactive|ttl60s|waitC, 1, 60_000),
			seedStep(opSettle, 0, modeSettle, 0, 3),
			seedStep(opKeepAlive, 0, 0x80, 0, 1)),
	}
}
