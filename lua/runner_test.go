package lua_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// lane is one Redis the scenario runs on.
type lane struct {
	rdb  redis.UniversalClient
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
	return []string{"{llmpacer:" + name + "}:s", "{llmpacer:" + name + "}:l", "{llmpacer:" + name + "}:q"}
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
	spacing      int64 // ms between slots freeing, as the caller computes it
	ticket       int64 // as sent: 0 first, then what a reply gave
	// cs are the charges it sent, which a queued waiter is admitted with.
	cs []model.Charge
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
	back   bool  // the clock has stepped back: the promises are void
	leases []*lease
	byID   map[string]*lease
	calls  []acquireArgs
	// waiting are the callers that have a ticket: queued for a slot, or
	// holding a pending lease; in the order they got it.
	waiting   []acquireArgs
	before    []entry // the model's slot queue before the current step
	sub       *redis.PubSub
	published []string // what the model says the scripts published
	log       []string
	seen      map[string]int // replies by kind, e.g. "acquire 0 tpm"
}

// runScenario runs data's scenario on l and the model, and returns how
// many replies of each kind it saw.
func runScenario(t *testing.T, l lane, data []byte, maxSteps int) map[string]int {
	sc := decode(data, maxSteps, l.scale)
	r := &runner{t: t, lane: l, sc: sc, keys: l.keys(), now: sc.start, seen: map[string]int{}, byID: map[string]*lease{}}
	r.setBuckets(sc.buckets)
	if l.mini != nil {
		l.mini.SetTime(time.UnixMilli(r.now))
	}
	ctx := context.Background()
	r.sub = l.rdb.Subscribe(ctx, r.keys[2])
	defer r.sub.Close()
	if _, err := r.sub.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	for i, s := range sc.steps {
		r.clock(s.ms)
		r.back = r.back || s.ms < 0
		r.logf("#%d %+dms", i, s.ms)
		r.before = r.queued()
		n := r.stackLens()
		r.do(s)
		r.countStacks(n)
		r.compareSnapshot()
		r.compareSets()
		r.compareStacks()
		r.checkSlots()
	}
	r.comparePublished()
	if !r.back {
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
	case (s.op == opClaim || s.op == opClaim+1) && len(r.waiting) > 0:
		r.acquire(r.waiting[int(s.b)%len(r.waiting)])
	case s.op == opLeave && len(r.waiting) > 0:
		r.leave(r.waiting[int(s.b)%len(r.waiting)])
	case s.op <= opRetry || s.op == opLeave:
		r.acquire(r.newCall(s))
	case s.op <= opSettle+3:
		r.settle(s)
	case s.op == opKeepAlive:
		r.keepAlive(s)
	case s.op == opPause:
		r.pause(max(1, (1+int64(s.c%8192))/r.lane.scale), s.a, s.b)
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

// slots returns the concurrency limit and the slots a batch call may use.
func (r *runner) slots() (limit, bslots int64) {
	if r.sc.conc == 0 {
		return 0, 0
	}
	return r.sc.conc, model.Slots(r.sc.conc, true, r.sc.floor)
}

func (r *runner) acquire(c acquireArgs) {
	prio := 0
	if c.batch {
		prio = 1
	}
	limit, bslots := r.slots()
	cs := model.Charges(r.bk, c.cost, c.batch, r.sc.floor)
	c.cs = cs
	r.calls = append(r.calls, c)
	args := append([]any{c.id, prio, c.maxWait, c.ttl, limit, bslots, c.spacing, c.ticket}, r.fields...)
	for _, ch := range cs {
		args = append(args, ch.Charge, ch.Allow)
	}
	// What the model held for this caller before: a pending lease.
	wasPending := r.m.Pending(c.id)
	got := r.eval(lua.Acquire, args...)
	us := r.replyNow(got, 2, true)
	want := r.m.Acquire(us, model.Call{ID: c.id, Batch: c.batch, MaxWait: c.maxWait, TTL: c.ttl,
		Limit: limit, BatchSlots: bslots, Spacing: c.spacing, Ticket: c.ticket, Charges: cs})
	r.logf("  acquire %+v at %d = %v; model %+v", c, us, got, want)
	r.check(len(got) == 6 && got[0] == int64(want.Code) && got[1] == want.Wait && got[3] == want.Reason &&
		got[4] == want.Expiry && got[5] == want.Ticket,
		"acquire %+v = %v; model says %+v", c, got, want)
	r.seen[r.kind(c, want, wasPending)]++
	if limit > 0 && want.Code == 1 && want.Wait > 0 && want.Ticket == 0 {
		r.fail("acquire %+v = %+v: a slot held for a turn %d ms ahead", c, want, want.Wait)
	}
	r.track(c, want, us, cs, wasPending)
	if limit > 0 && want.Code == 1 && want.Ticket == 0 {
		r.checkTaker(c, us)
	}
}

// kind names a reply for the coverage count.
func (r *runner) kind(c acquireArgs, rep model.Reply, wasPending bool) string {
	switch {
	case rep.Code == 1 && wasPending:
		return "acquire 1 claim"
	case rep.Code == 2 && rep.Ticket == 0 && c.ticket != 0:
		return "acquire 2 handed"
	case rep.Code == 0 && wasPending && rep.Ticket != 0:
		return "acquire 0 claim queued"
	case rep.Code == 0 && rep.Ticket != 0:
		return "acquire 0 queued"
	case rep.Code > 0 && rep.Ticket != 0:
		return fmt.Sprintf("acquire %d pending", rep.Code)
	case rep.Code == 1 && rep.Wait > 0:
		return "acquire 1 later"
	case rep.Code == 1 && c.batch && r.sc.conc > 0:
		return "acquire 1 batch"
	}
	return fmt.Sprintf("acquire %d %s", rep.Code, rep.Reason)
}

// track updates what the caller holds after an acquire's reply: its
// ticket, and the lease it was admitted (charged: code 1 but for a claim).
func (r *runner) track(c acquireArgs, rep model.Reply, us int64, cs []model.Charge, wasPending bool) {
	r.waiting = slices.DeleteFunc(r.waiting, func(w acquireArgs) bool { return w.id == c.id })
	switch {
	case rep.Ticket != 0:
		c.ticket = rep.Ticket
		r.waiting = append(r.waiting, c)
	case rep.Code == 0 && rep.Reason != "concurrency" && c.ticket != 0:
		// Held back by a pause or the buckets: it comes back with its
		// ticket later, as package pacer does.
		r.waiting = append(r.waiting, c)
	}
	if rep.Code != 1 {
		return
	}
	if l := r.byID[c.id]; l != nil && wasPending {
		l.expiry = rep.Expiry // a claim: charged at its admission
		return
	}
	l := &lease{id: c.id, cost: c.cost, start: us/1000 + rep.Wait, charged: us, expiry: rep.Expiry, open: true,
		turn: us + rep.Wait*1000}
	for _, ch := range cs {
		l.used[ch.Bucket] = ch.Charge
	}
	r.leases = append(r.leases, l)
	r.byID[c.id] = l
}

// leave sends settle for a waiter that gives up, as package pacer does: a
// cancel, since a slot freed may have admitted it meanwhile; charged at its
// ticket (a lower bound: its first denial), or its pending lease's.
func (r *runner) leave(w acquireArgs) {
	id := w.id
	limit, bslots := r.slots()
	charged := w.ticket
	if l := r.byID[id]; l != nil {
		charged = l.charged
	}
	deltas := model.Deltas(r.bk, model.Canceled, w.cost, 0)
	args := []any{id, charged, limit, bslots}
	for _, d := range deltas {
		args = append(args, model.Name(d.Bucket), d.Us)
	}
	got := r.eval(lua.Settle, args...)
	us := r.replyNow(got, 1, true)
	want := r.m.Settle(us, id, charged, limit, bslots, deltas)
	r.logf("  leave %s %v = %v; model %d", id, deltas, got, want)
	r.check(len(got) == 2 && got[0] == int64(want), "leave %s = %v; model says {%d now}", id, got, want)
	r.waiting = slices.DeleteFunc(r.waiting, func(w acquireArgs) bool { return w.id == id })
	if l := r.byID[id]; l != nil {
		l.open = false
	}
	r.seen[fmt.Sprintf("leave %d", want)]++
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
	limit, bslots := r.slots()
	args := []any{l.id, charged, limit, bslots}
	for _, d := range deltas {
		args = append(args, model.Name(d.Bucket), d.Us)
	}
	got := r.eval(lua.Settle, args...)
	us := r.replyNow(got, 1, true)
	before := r.m.Snapshot(us).TATs
	want := r.m.Settle(us, l.id, charged, limit, bslots, deltas)
	r.countGiveBack(before, deltas)
	r.logf("  settle %s %s reserved=%d used=%d charged=%d %v = %v; model %d", l.id, mode, l.cost, used, charged, deltas, got, want)
	r.check(len(got) == 2 && got[0] == int64(want), "settle %s %s = %v; model says {%d now}", l.id, mode, got, want)
	l.open = false
	r.waiting = slices.DeleteFunc(r.waiting, func(w acquireArgs) bool { return w.id == l.id })
	if want == 1 {
		for _, d := range deltas {
			if d.Us < 0 {
				l.used[d.Bucket] = max(0, l.used[d.Bucket]+d.Us)
			}
		}
	}
	r.seen[fmt.Sprintf("%s %d", mode, want)]++
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

// pause reads a's bits 0-1 (0: a plain pause; 1, 2, 3: a refusal that
// lowers rpm, tpm or both, as Throttled does) and b (the refused call's
// tokens).
func (r *runner) pause(ms int64, a byte, tokens uint16) {
	which := [][]int{nil, {model.RPM}, {model.TPM}, {model.RPM, model.TPM}}[a&3]
	lowers := model.Lowers(r.bk, int64(tokens), which...)
	args := []any{ms}
	for _, l := range lowers {
		args = append(args, model.Name(l.Bucket), l.Offset, l.Limit)
	}
	got := r.eval(lua.Pause, args...)
	us := r.replyNow(got, 1, true)
	var want int64
	if a&3 == 0 {
		want = r.m.Pause(us/1000, ms)
	} else {
		want = r.m.Throttle(us, ms, lowers)
		r.seen["throttle"]++
	}
	r.logf("  pause %d %v = %v; model %d", ms, lowers, got, want)
	r.check(len(got) == 2 && got[0] == want, "pause %d %v = %v; model says {%d now}", ms, lowers, got, want)
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
// pause, the slots held and every bucket's TAT, exactly (they are
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

// compareSets compares every member and score of the lease set and the
// slot queue with the model's (the sentinels aside).
func (r *runner) compareSets() {
	leases, queue := r.m.Sets()
	for i, want := range []map[string]int64{leases, queue} {
		zs, err := r.lane.rdb.ZRangeWithScores(context.Background(), r.keys[1+i], 0, -1).Result()
		if err != nil {
			r.fail("ZRANGE %s: %v", r.keys[1+i], err)
		}
		got := map[string]int64{}
		for _, z := range zs {
			if m := z.Member.(string); m != "~" {
				got[m] = int64(z.Score)
			}
		}
		r.check(maps.Equal(got, want), "%s = %v; model says %v", r.keys[1+i], got, want)
	}
}

// stackLens returns the length of each bucket's give-back stack.
func (r *runner) stackLens() (n [4]int) {
	for i := range n {
		t, _ := r.m.Stack(i)
		n[i] = len(t)
	}
	return n
}

// countStacks counts, for the coverage check, the steps that merged a
// bucket's oldest entries (64 became 49) or removed more than 8; n is each
// bucket's count before the step.
func (r *runner) countStacks(n [4]int) {
	after := r.stackLens()
	for i := range 4 {
		switch {
		case n[i] == 64 && after[i] == 49:
			r.seen["stack merged"]++
		case after[i] < n[i]-8:
			r.seen["stack popped"]++
		}
	}
}

// countGiveBack counts, for the coverage check, each give-back that moved
// a bucket by all it asked, by part of it, or not at all.
func (r *runner) countGiveBack(before [4]int64, deltas []model.Delta) {
	after := r.m.Snapshot(0).TATs
	for _, d := range deltas {
		if d.Us >= 0 {
			continue
		}
		switch moved := before[d.Bucket] - after[d.Bucket]; {
		case moved == -d.Us:
			r.seen["giveback all"]++
		case moved > 0:
			r.seen["giveback part"]++
		default:
			r.seen["giveback none"]++
		}
	}
}

// compareStacks compares each bucket's give-back stack (the state hash's
// <bucket>.h, 14-byte entries of two 7-byte big-endian integers) with the
// model's.
func (r *runner) compareStacks() {
	fields := []string{"rpm.h", "tpm.h", "rpd.h", "tpd.h"}
	h, err := r.lane.rdb.HMGet(context.Background(), r.keys[0], fields...).Result()
	if err != nil {
		r.fail("HMGET %s: %v", r.keys[0], err)
	}
	for i, v := range h {
		var got []int64
		if v != nil {
			b := []byte(v.(string))
			r.check(len(b)%14 == 0, "%s is %d bytes; want 14 per entry", fields[i], len(b))
			for k := 0; k+7 <= len(b); k += 7 {
				var x int64
				for _, c := range b[k : k+7] {
					x = x<<8 | int64(c)
				}
				got = append(got, x)
			}
		}
		var want []int64
		times, headrooms := r.m.Stack(i)
		for k := range times {
			want = append(want, times[k], headrooms[k])
		}
		r.check(slices.Equal(got, want), "%s = %v; model says %v", fields[i], got, want)
	}
}

// comparePublished reads what the scripts published, up to a marker the
// test publishes last, and compares it with what the model says.
func (r *runner) comparePublished() {
	ctx := context.Background()
	if err := r.lane.rdb.Publish(ctx, r.keys[2], "~end").Err(); err != nil {
		r.fail("publish: %v", err)
	}
	var got []string
	for {
		msg, err := r.sub.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			r.fail("receive: %v", err)
		}
		m, ok := msg.(*redis.Message)
		if !ok {
			continue
		}
		if m.Payload == "~end" {
			break
		}
		got = append(got, m.Payload)
	}
	want := r.published
	r.check(slices.Equal(got, want), "published %q; model says %q", got, want)
}

// handed tracks what a message says a freed slot did for each waiter
// (see prelude.lua's give): admitted it ('<id>:1:<expiry>:<charged µs>';
// for a pending lease, its claim), made it a pending lease (2), or sent it
// back to acquire (0).
func (r *runner) handed(msg string) {
	for _, e := range strings.Fields(msg) {
		f := strings.Split(e, ":")
		if len(f) != 4 {
			r.fail("published %q: want <id>:<code>:<expiry>:<µs>", e)
		}
		id := f[0]
		code, _ := strconv.ParseInt(f[1], 10, 64)
		expiry, _ := strconv.ParseInt(f[2], 10, 64)
		at, _ := strconv.ParseInt(f[3], 10, 64)
		i := slices.IndexFunc(r.waiting, func(w acquireArgs) bool { return w.id == id })
		if i < 0 {
			// A retry of its first attempt (ticket 0) that the buckets held
			// back left it in the queue, forgotten here: its process would
			// still listen.
			j := len(r.calls) - 1
			for j >= 0 && r.calls[j].id != id {
				j--
			}
			if j < 0 {
				r.fail("handed %s, which never called", id)
			}
			r.waiting = append(r.waiting, r.calls[j])
			i = len(r.waiting) - 1
		}
		w := r.waiting[i]
		l := r.byID[id]
		switch {
		case code == 1 && l != nil:
			l.expiry = expiry
			r.seen["handed claim"]++
		case code == 1 || code == 2:
			turn := expiry - w.ttl
			l = &lease{id: id, cost: w.cost, start: turn, charged: at, expiry: expiry, open: true, turn: turn * 1000}
			for _, ch := range w.cs {
				l.used[ch.Bucket] = ch.Charge
			}
			r.leases = append(r.leases, l)
			r.byID[id] = l
			r.seen[fmt.Sprintf("handed %d", code)]++
		default:
			r.seen["handed 0"]++
			continue // it comes back with its ticket
		}
		// An admitted waiter stays among the waiting: one that missed the
		// message comes back with its ticket (its fallback timer), or
		// gives up; a pending one claims its slot at its turn.
		if code == 2 {
			r.waiting[i].ticket = (expiry - w.ttl) * 1000
		}
	}
}

// queued returns the model's slot queue, in order.
func (r *runner) queued() []entry {
	ids, scores := r.m.Queued()
	es := make([]entry, len(ids))
	for i := range ids {
		es[i] = entry{ids[i], scores[i]}
	}
	return es
}

type entry struct {
	id    string
	score int64
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
