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
	"github.com/llmpacer/llmpacer/internal/wire"
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
	return []string{"{llmpacer:" + name + "}:s", "{llmpacer:" + name + "}:l", "{llmpacer:" + name + "}:q", "{llmpacer:" + name + "}:d"}
}

// tenantKey returns tenant i's hash (i from 1), named as package pacer
// names it: 32 hex digits.
func (l lane) tenantKey(i int) string {
	return strings.TrimSuffix(l.keys()[0], ":s") + fmt.Sprintf(":t:%032x", i)
}

// allKeys returns every key a scenario may write, for cleaning up.
func (l lane) allKeys() []string {
	ks := l.keys()
	for i := 1; i <= 3; i++ {
		ks = append(ks, l.tenantKey(i))
	}
	return ks
}

// lease is an admission as its caller holds it.
type lease struct {
	id            string
	req           model.Request
	start, expiry int64
	charged       int64 // µs, the clock of its acquire's reply
	tenant        int   // its tenant (0: none)
	turnMs        int64 // its turn, ms on the Redis clock (wire.AcquireReply.TurnMs)
	open          bool  // not yet ended by the test
	// turn is when the call may start (µs), and used what it takes of
	// each rate as its caller sees it (a bucket's µs, a sliding window's
	// units): the charge, less what the caller gave back when it ended,
	// never more than the charge.
	turn int64
	used map[string]int64
}

// acquireArgs is an acquire as sent, kept for retries.
type acquireArgs struct {
	id           string
	req          model.Request
	batch        bool
	maxWait, ttl int64
	spacing      int64 // ms between slots freeing, as the caller computes it
	ticket       int64 // as sent: 0 first, then what a reply gave
	tenant       int   // the tenant charged (0: none)
	// cs are the charges it sent, which a queued waiter is admitted with.
	cs []model.Charge
}

// runner drives one scenario through a lane and the model.
type runner struct {
	t      *testing.T
	lane   lane
	sc     scenario
	keys   []string
	cfg    model.Config // the rates configured now
	fields []any        // their fields, as ARGV
	all    []string     // the fields of every rate of the scenario
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
	seen      map[string]int // replies by kind, e.g. "acquire 0 bucket"
	// version is the definition's version the callers run (sent when the
	// scenario is versioned).
	version int64
	// twin is a second miniredis (on a miniredis lane) that each batch's
	// calls run on one by one, from a copy of the keys: the batch must
	// leave every key, field, score and TTL as they do (see batchTwin).
	twin *miniredis.Miniredis
	trdb *redis.Client
	// slack is how many µs past the clock a reply's may lie: a batch's
	// calls may each take a µs of their own (see replyNow).
	slack int64
}

// runScenario runs data's scenario on l and the model, and returns how
// many replies of each kind it saw.
func runScenario(t *testing.T, l lane, data []byte, maxSteps int) map[string]int {
	sc := decode(data, maxSteps, l.scale)
	r := &runner{t: t, lane: l, sc: sc, keys: l.keys(), now: sc.start, seen: map[string]int{}, byID: map[string]*lease{},
		all: sc.cfg.Fields()}
	r.setConfig(sc.cfg)
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
		r.persist()
		r.countStacks(n)
		r.compareSnapshot()
		r.compareHash()
		r.compareSets()
		r.compareStacks()
		r.compareTenants()
		r.checkSlots()
	}
	r.comparePublished()
	if !r.back {
		r.checkBound(r.sc.cfg.Rates, r.leases)
		r.checkSliding(r.sc.cfg.Rates, r.leases)
		for i := 1; i <= r.sc.tenants; i++ {
			// A tenant's own rates, by its calls alone.
			var own []model.Rate
			for _, rt := range r.sc.cfg.Tenanted().Rates {
				if rt.Mark == '@' {
					own = append(own, rt)
				}
			}
			ls := slices.DeleteFunc(slices.Clone(r.leases), func(l *lease) bool { return l.tenant != i })
			r.checkBound(own, ls)
			r.checkSliding(own, ls)
		}
	}
	return r.seen
}

func (r *runner) setConfig(cfg model.Config) {
	r.cfg, r.fields = cfg, nil
	for _, f := range cfg.Fields() {
		r.fields = append(r.fields, f)
	}
}

// reconfigure reads a's bit 0 (halve every capacity) and bit 1 (leave rate
// a>>2&3 out): limits change when a fleet deploys new ones, and every
// script applies the arguments it brings, to levels stored under the old
// ones. a = 0 restores the scenario's rates.
func (r *runner) reconfigure(a byte) {
	cfg := r.sc.cfg
	cfg.Rates = slices.Clone(cfg.Rates)
	for i := range cfg.Rates {
		if a&1 != 0 {
			cfg.Rates[i].Cap = max(1, cfg.Rates[i].Cap/2)
		}
	}
	if k := int(a >> 2 & 3); a&2 != 0 && k < len(cfg.Rates) {
		cfg.Rates = slices.Delete(cfg.Rates, k, k+1)
	}
	r.setConfig(cfg)
	r.logf("  rates %v", r.fields)
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
	case s.op == opPause && s.a&0x80 != 0:
		r.stop(s.a, s.b, s.c)
	case s.op == opPause:
		r.pause(max(1, (1+int64(s.c%8192))/r.lane.scale), s.a, s.b)
	case s.op == opReconfigure:
		r.reconfigure(s.a)
	case s.op == opClock && s.a&0x80 != 0:
		r.define(s.a, s.b)
	case s.op == opClock && s.a&0x40 != 0:
		r.acquires(s)
	}
}

// newCall reads an acquire from a step: a's bits 0-1 (0: batch), 2-4 (TTL)
// and 5-7 (max wait, from c); b the tokens; k the model (k mod 3) and the
// input's share of the tokens (k / 3: none given apart, or a quarter, a
// half, three quarters or all of them).
func (r *runner) newCall(s step) acquireArgs {
	tenant := 0
	if r.sc.tenants > 0 && s.op <= 3 {
		tenant = int(s.op) % (r.sc.tenants + 1)
	}
	rates := r.cfg.Rates
	if tenant > 0 {
		rates = r.cfg.Tenanted().Rates
	}
	tok := int64(0)
	for _, rt := range rates {
		if rt.Mark != '%' && rt.Unit != wire.Requests && rt.Unit != wire.Spend && (tok == 0 || rt.Cap < tok) {
			tok = rt.Cap
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
	req := model.Request{Tokens: cost, Model: models[s.k%3]}
	if q := int64(s.k / 3); q > 0 {
		req.Input = cost * q / 4
		req.Output = cost - req.Input
	}
	return acquireArgs{
		tenant:  tenant,
		id:      "a" + strconv.Itoa(len(r.calls)),
		req:     req,
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

// config returns the rates a call of tenant (0: none) is charged.
func (r *runner) config(tenant int) model.Config {
	if tenant == 0 {
		return r.cfg
	}
	return r.cfg.Tenanted()
}

// keysOf returns the keys a call of tenant (0: none) runs its scripts on,
// and its tenant's key ("" for none) as the model names it.
func (r *runner) keysOf(tenant int) ([]string, string) {
	if tenant == 0 {
		return r.keys, ""
	}
	t := r.lane.tenantKey(tenant)
	return append(slices.Clone(r.keys), t), t
}

func (r *runner) acquire(c acquireArgs) {
	q := r.sending(c)
	// The waiters queued after the caller: one handed a slot by this
	// call is one the caller left free slots to as it left the queue.
	after := map[string]bool{}
	if c.ticket != 0 {
		q := r.queued()
		if i := slices.IndexFunc(q, func(e entry) bool { return e.id == c.id }); i >= 0 {
			for _, e := range q[i+1:] {
				after[e.id] = true
			}
		}
	}
	q.finish(r, r.evalKeys(q.keys, lua.Acquire, q.args...), after)
}

// acquires reads a's bits 0-2 (3 to 10 calls) and c's bit 0 (one of them
// an earlier call resent) from a step of opClock with a's bit 6 (and not
// 7): it sends several new calls at once, as a Pacer's group commit does,
// the i-th read from the step as newCall reads one, with a, b, c and k
// moved by i, in one acquires.lua call, tenants' and all; the model admits
// them one by one, in the order sent, each at its reply's clock.
func (r *runner) acquires(s step) {
	var batch []*asking
	n := 3 + int(s.a&7)
	for i := range n {
		v := s
		v.op = byte(i) % 4
		v.a = s.a ^ byte(i*0x3b)
		v.b = s.b + uint16(i)*0x1f3
		v.c = s.c + uint16(i)*0x77
		v.k = (s.k + byte(i)) % 15
		c := r.newCall(v)
		if i == n-1 && s.c&1 != 0 && len(r.calls) > 0 {
			c = r.calls[int(s.b)%len(r.calls)]
		}
		batch = append(batch, r.sending(c))
	}
	var calls []batchCall
	for _, q := range batch {
		calls = append(calls, batchCall{q.tkey, q.args})
	}
	got := r.sendBatch(lua.Acquire, lua.Acquires, 2, calls)
	r.slack = int64(len(batch))
	for i, q := range batch {
		q.finish(r, got[i], nil)
		r.queuedToo()
	}
	r.slack = 0
	r.seen["acquires"]++
	for _, q := range batch {
		if q.tkey != "" {
			r.seen["acquires with a tenant"]++
			break
		}
	}
}

// queuedToo adds to r.before the waiters queued since the step began: in
// a step of several calls, one may queue and a later one hand it a slot,
// and checkSlots must know it as queued.
func (r *runner) queuedToo() {
	for _, e := range r.queued() {
		if !slices.ContainsFunc(r.before, func(b entry) bool { return b.id == e.id }) {
			r.before = append(r.before, e)
		}
	}
}

// asking is an acquire as the runner sends it.
type asking struct {
	c             acquireArgs
	a             wire.Acquire
	cs            []model.Charge
	args          []any
	keys          []string
	tkey          string
	limit, bslots int64
}

// sending makes c's acquire, and records c as sent.
func (r *runner) sending(c acquireArgs) *asking {
	limit, bslots := r.slots()
	cs := r.config(c.tenant).Charges(c.req, c.batch, r.sc.floor)
	keys, tkey := r.keysOf(c.tenant)
	c.cs = cs
	r.calls = append(r.calls, c)
	a := wire.Acquire{ID: c.id, Batch: c.batch, MaxWait: time.Duration(c.maxWait) * time.Millisecond,
		TTL: time.Duration(c.ttl) * time.Millisecond, Limit: limit, BatchSlots: bslots, Spacing: c.spacing,
		Ticket: c.ticket, Charges: cs, Versioned: r.sc.versioned, Version: r.version}
	if c.tenant > 0 && !c.batch && r.sc.cfg.Share > 0 {
		// As package pacer sends it: over its share, the call leaves the
		// batch floor of the budget.
		a.OverShare, a.KeepPPM = true, r.sc.floor*1000
	}
	return &asking{c: c, a: a, cs: cs, args: a.Args(), keys: keys, tkey: tkey, limit: limit, bslots: bslots}
}

// finish checks q's reply got against the model, which it admits the call
// in, and follows the call's lease. after are the waiters queued after the
// caller before the call (nil: not known, in a batch: then the checks of
// the slot queue's order are left to the model's state).
func (q *asking) finish(r *runner, got []any, after map[string]bool) {
	r.t.Helper()
	c, a, cs, tkey, limit, bslots := q.c, q.a, q.cs, q.tkey, q.limit, q.bslots
	// What the model held for this caller before: a pending lease; and
	// every bucket field of the budget and of the tenant.
	wasPending := r.m.Pending(c.id)
	fieldsBefore := r.bucketFields(tkey)
	us := r.replyNow(got, 2, true)
	over := r.overShare(us, tkey, cs)
	now := us / 1000
	// Each sliding window's own wait before the call changes anything:
	// now, at the turn the scripts' reply gives, and a ms before it.
	waits := map[string][3]int64{}
	if len(got) == 7 {
		turn, _ := got[1].(int64)
		turn += now
		for _, ch := range cs {
			if strings.HasPrefix(ch.Field, "~") {
				waits[ch.Field] = [3]int64{r.m.SlidingWait(us, ch), r.m.SlidingWait(turn*1000, ch), r.m.SlidingWait((turn-1)*1000, ch)}
			}
		}
	}
	want := r.m.Acquire(us, model.Call{ID: c.id, Batch: c.batch, MaxWait: c.maxWait, TTL: c.ttl,
		Limit: limit, BatchSlots: bslots, Spacing: c.spacing, Ticket: c.ticket, Charges: cs,
		Tenant: tkey, OverShare: a.OverShare, KeepPPM: a.KeepPPM, Versioned: a.Versioned, Version: a.Version})
	if after != nil {
		for _, e := range r.queued() {
			delete(after, e.id)
		}
		if len(after) > 0 {
			r.seen["claim gives"]++
		}
	}
	r.logf("  acquire %+v v%d over=%v at %d = %v; model %+v", c, r.version, over, us, got, want)
	r.check(len(got) == 7 && got[0] == int64(want.Code) && got[1] == want.Wait && got[3] == want.Reason &&
		got[4] == want.Expiry && got[5] == want.Ticket && (got[6] == int64(wire.Lost)) == want.Lost,
		"acquire %+v = %v; model says %+v", c, got, want)
	if want.Code == 3 {
		// A stale caller loads the stored definition and runs it.
		r.seen["acquire 3"]++
		r.version = want.Ticket
		return
	}
	r.seen[r.kind(c, want, wasPending)]++
	r.checkTenantCall(c, a, cs, us, want, wasPending, over, fieldsBefore)
	if want.Code == 1 && !wasPending {
		r.countCharged(c, cs)
	}
	if limit > 0 && want.Code == 1 && want.Wait > 0 && want.Ticket == 0 {
		r.fail("acquire %+v = %+v: a slot held for a turn %d ms ahead", c, want, want.Wait)
	}
	if want.Code <= 1 && !wasPending && !over {
		// Over its share, a call has less of each rate than the rate
		// alone would give it.
		r.checkSlidingWait(c, us, want, waits)
	}
	r.track(c, want, us, cs, wasPending)
	if limit > 0 && want.Code == 1 && want.Ticket == 0 && after != nil {
		r.checkTaker(c, us)
	}
}

// countCharged counts, for the coverage check, an admission weighed by
// its model, one split into input and output rates, and one that
// reserved spend.
func (r *runner) countCharged(c acquireArgs, cs []model.Charge) {
	if _, ok := r.cfg.Weights[c.req.Model]; ok && c.req.Tokens > 0 {
		r.seen["weighted"]++
	}
	for i, rt := range r.cfg.Rates {
		switch {
		case (rt.Unit == wire.Input || rt.Unit == wire.Output) && c.req.Input+c.req.Output > 0:
			r.seen["split charged"]++
		case rt.Unit == wire.Spend && cs[i].Charge > 0:
			r.seen["spend charged"]++
		}
	}
}

// class names a reason for the coverage count: a bucket's field is
// "bucket", a sliding window's "sliding"; the others as they are.
func class(reason string) string {
	switch {
	case strings.HasPrefix(reason, "~"):
		return "sliding"
	case reason == "" || slices.Contains([]string{"pause", "concurrency", "quota", "stop", "probe"}, reason):
		return reason
	}
	return "bucket"
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
	case rep.Code == 0 && wasPending:
		return "acquire 0 claim " + class(rep.Reason)
	case rep.Code == 0 && rep.Ticket != 0:
		return "acquire 0 queued"
	case rep.Code > 0 && rep.Ticket != 0:
		return fmt.Sprintf("acquire %d pending", rep.Code)
	case rep.Code == 1 && rep.Wait > 0:
		return "acquire 1 later " + class(rep.Reason)
	case rep.Code == 1 && c.batch && r.sc.conc > 0:
		return "acquire 1 batch"
	}
	return strings.TrimSpace(fmt.Sprintf("acquire %d %s", rep.Code, class(rep.Reason)))
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
		// Held back by a pause or the rates: it comes back with its
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
	l := &lease{id: c.id, tenant: c.tenant, req: c.req, start: us/1000 + rep.Wait, charged: us, expiry: rep.Expiry, open: true,
		turn: us + rep.Wait*1000, turnMs: us/1000 + rep.Wait, used: map[string]int64{}}
	for _, ch := range cs {
		l.used[ch.Field] = ch.Charge
	}
	r.leases = append(r.leases, l)
	r.byID[c.id] = l
}

// leave sends settle for a waiter that gives up, as package pacer does: a
// cancel, since a slot freed may have admitted it meanwhile; charged at its
// ticket (a lower bound: its first denial), or its pending lease's; its
// turn not known (a sliding window gets nothing back).
func (r *runner) leave(w acquireArgs) {
	id := w.id
	limit, bslots := r.slots()
	tenant := w.tenant
	charged := w.ticket
	l := r.byID[id]
	if l != nil {
		charged, tenant = l.charged, l.tenant
	}
	keys, tkey := r.keysOf(tenant)
	deltas := r.config(tenant).Deltas(model.Canceled, w.req, 0, model.Usage{})
	got := r.evalKeys(keys, lua.Settle, wire.SettleArgs(id, charged, limit, bslots, deltas)...)
	us := r.replyNow(got, 1, true)
	queued := len(r.queued())
	want := r.m.SettleTenant(us, id, tkey, charged, limit, bslots, deltas)
	if len(r.queued()) < queued-1 {
		r.seen["leave gives"]++ // a slot kept for it went to the next
	}
	r.logf("  leave %s %v = %v; model %d", id, deltas, got, want)
	r.check(len(got) == 2 && got[0] == int64(want), "leave %s = %v; model says {%d now}", id, got, want)
	r.waiting = slices.DeleteFunc(r.waiting, func(w acquireArgs) bool { return w.id == id })
	if l != nil {
		l.open = false
		if want == 1 {
			for _, d := range deltas {
				if d.Us < 0 {
					l.used[d.Field] = max(0, l.used[d.Field]+d.Us)
				}
			}
		}
	}
	r.seen[fmt.Sprintf("leave %d", want)]++
}

// settle reads a's bits 0-1 (mode: settle, release, cancel, reject), 2-4
// (0: send a charge time 1 s early, as a caller that only knows a lower
// bound does; 7: the turn not known, as after a reply lost; mod 4: the
// input's share of a split usage, none to all in thirds, and its odd
// values half the input read from the cache), 5 (the usage split: input
// and output apart, as SettleUsage sends it) and 6-7 (both set: any lease,
// ended or not); b picks the lease; c the tokens used (bits 0-2: as
// reserved, fewer, more, or far more, which runs into the debt cap). The
// corrections are those package pacer sends for each way a lease ends.
//
// k (the op byte's high nibble) below 8 sends one settle.lua call. From 8
// the step ends k - 7 leases at once, as a Pacer's group commit does, in
// one settles.lua call, the i-th with b, c and a's mode moved by i; the
// model ends them one by one, in the order sent, each at its reply's
// clock.
func (r *runner) settle(s step) {
	if s.k < 8 {
		e := r.ending(s)
		e.finish(r, r.evalKeys(e.keys, lua.Settle, e.args...))
		return
	}
	var batch []*end
	for i := range int(s.k) - 7 {
		v := s
		v.a = s.a&^3 | (s.a+byte(i))&3
		v.b = s.b&0x8000 | (s.b+uint16(i)*0x35)&0x7fff
		v.c = s.c + uint16(i)*0x2f9
		batch = append(batch, r.ending(v))
	}
	var calls []batchCall
	for _, e := range batch {
		calls = append(calls, batchCall{e.tkey, e.args})
	}
	got := r.sendBatch(lua.Settle, lua.Settles, 1, calls)
	r.slack = int64(len(batch))
	for i, e := range batch {
		e.finish(r, got[i])
	}
	r.slack = 0
	r.seen["settles"]++
	for _, e := range batch {
		if e.tkey != "" {
			r.seen["settles with a tenant"]++
			break
		}
	}
}

// batchCall is one call of a batch: its tenant's hash ("": none) and its
// single script's ARGV.
type batchCall struct {
	tkey string
	args []any
}

// batchArgs returns the KEYS and ARGV of a batch of calls on the budget
// keys (see acquires.lua): each tenant's hash once, after the budget's,
// and each call's group.
func batchArgs(keys []string, calls []batchCall) ([]string, []any) {
	keys = keys[:len(keys):len(keys)]
	var args []any
	for _, c := range calls {
		t := slices.Index(keys, c.tkey) + 1
		if c.tkey == "" {
			t = 0
		} else if t == 0 {
			keys = append(keys, c.tkey)
			t = len(keys)
		}
		args = append(append(args, t, len(c.args)), c.args...)
	}
	return keys, args
}

// singleKeys returns the KEYS of the single script for c.
func (c batchCall) singleKeys(keys []string) []string {
	if c.tkey == "" {
		return keys
	}
	return append(keys[:len(keys):len(keys)], c.tkey)
}

// sendBatch sends calls in one call of many, checked against one by one
// with one on the twin (see batchTwin; at is where a reply holds its
// clock), and returns the replies, one a call.
func (r *runner) sendBatch(one, many *redis.Script, at int, calls []batchCall) [][]any {
	r.t.Helper()
	keys, args := batchArgs(r.keys, calls)
	twin := r.batchTwin(one, calls, at)
	flat := r.evalKeys(keys, many, args...)
	got, err := wire.SplitReplies(flat, len(calls), replyLen(many))
	r.check(err == nil, "batch reply: %v", err)
	twin(got)
	reps := make([][]any, len(calls))
	for i := range reps {
		if i < len(got) {
			reps[i], _ = got[i].([]any)
		}
	}
	return reps
}

// batchTwin copies every key of the lane's to the twin miniredis, and
// returns a function that, given a batch's replies got, runs calls one by
// one there, each with script at the clock its reply gave (got[i][at],
// in µs), and checks the replies, and the lane's keys after the batch,
// against theirs: every field, member, score and TTL, where the model
// compares the fields it models. Nothing on a real Redis lane, whose
// clock runs.
func (r *runner) batchTwin(script *redis.Script, calls []batchCall, at int) func(got []any) {
	if r.lane.mini == nil {
		return func([]any) {}
	}
	ctx := context.Background()
	if r.twin == nil {
		r.twin = miniredis.NewMiniRedis()
		if err := r.twin.Start(); err != nil {
			r.fail("twin: %v", err)
		}
		r.t.Cleanup(r.twin.Close)
		r.trdb = redis.NewClient(&redis.Options{Addr: r.twin.Addr()})
		r.t.Cleanup(func() { r.trdb.Close() })
	}
	r.twin.FlushAll()
	// (miniredis's DUMP takes strings only: each key is copied by type.)
	for _, k := range r.lane.allKeys() {
		switch typ := r.lane.rdb.Type(ctx, k).Val(); typ {
		case "none":
			continue
		case "hash":
			r.trdb.HSet(ctx, k, r.lane.rdb.HGetAll(ctx, k).Val())
		case "zset":
			r.trdb.ZAdd(ctx, k, r.lane.rdb.ZRangeWithScores(ctx, k, 0, -1).Val()...)
		default:
			r.fail("twin: key %s is a %s", k, typ)
		}
		if ttl := r.lane.rdb.PTTL(ctx, k).Val(); ttl > 0 {
			r.trdb.PExpire(ctx, k, ttl)
		}
	}
	return func(got []any) {
		r.t.Helper()
		var want []any
		for i, c := range calls {
			us := r.now * 1000
			if i < len(got) {
				if rep, _ := got[i].([]any); at < len(rep) {
					us, _ = rep[at].(int64)
				}
			}
			r.twin.SetTime(time.UnixMicro(us))
			v, err := script.Run(ctx, r.trdb, c.singleKeys(r.keys), c.args...).Slice()
			if err != nil {
				r.fail("twin: %v\nargs %v", err, c.args)
			}
			want = append(want, v)
		}
		r.check(fmt.Sprint(got) == fmt.Sprint(want), "batch replies %v; one by one %v", got, want)
		a, b := keyDump(r.lane.rdb, r.lane.allKeys()), keyDump(r.trdb, r.lane.allKeys())
		r.check(a == b, "after a batch:\n%s\none by one:\n%s", a, b)
	}
}

// keyDump prints keys as they stand: each hash's fields, each sorted
// set's members and scores, each key's TTL.
func keyDump(rdb redis.UniversalClient, keys []string) string {
	ctx := context.Background()
	var b strings.Builder
	for _, k := range keys {
		typ := rdb.Type(ctx, k).Val()
		fmt.Fprintf(&b, "%s %s ttl %v\n", k, typ, rdb.PTTL(ctx, k).Val())
		switch typ {
		case "hash":
			h := rdb.HGetAll(ctx, k).Val()
			for _, f := range slices.Sorted(maps.Keys(h)) {
				fmt.Fprintf(&b, "  %s=%q\n", f, h[f])
			}
		case "zset":
			fmt.Fprintf(&b, "  %v\n", rdb.ZRangeWithScores(ctx, k, 0, -1).Val())
		}
	}
	return b.String()
}

// end is one lease's settle as the runner sends it.
type end struct {
	l               *lease
	mode            string
	how             int
	charged, turnMs int64
	u               model.Usage
	deltas          []model.Delta
	limit, bslots   int64
	args            []any
	keys            []string
	tkey            string
}

// ending reads the settle step s describes (see settle).
func (r *runner) ending(s step) *end {
	l := r.pick(s.a&0xc0 == 0xc0, s.b)
	mode := [...]string{"settle", "release", "cancel", "reject"}[s.a&3]
	charged, turnMs := l.charged, l.turnMs
	switch s.a >> 2 & 7 {
	case 0:
		charged -= 1_000_000 / r.lane.scale
	case 7:
		turnMs = 0
	}
	v := int64(s.c >> 3)
	cost := l.req.Tokens
	used := [...]int64{cost, cost, v % (cost + 1), v % (cost + 1),
		cost + v%(cost+1), cost + v%(cost+1), cost + v%(cost+1), cost + v%256*50}[s.c&7]
	u := model.Usage{Tokens: used}
	if s.a&0x20 != 0 {
		q := int64(s.a >> 2 & 3)
		u = model.Usage{Input: used * q / 3, Split: true}
		u.Output = used - u.Input
		if s.a>>2&1 != 0 {
			u.CachedInput = u.Input / 2
		}
		mode += " usage"
	}
	how := map[string]int{"settle": model.Settled, "release": model.Released, "cancel": model.Canceled, "reject": model.Rejected}[strings.Fields(mode)[0]]
	deltas := r.config(l.tenant).Deltas(how, l.req, turnMs, u)
	limit, bslots := r.slots()
	keys, tkey := r.keysOf(l.tenant)
	return &end{l: l, mode: mode, how: how, charged: charged, turnMs: turnMs, u: u, deltas: deltas, limit: limit, bslots: bslots,
		args: wire.SettleArgs(l.id, charged, limit, bslots, deltas), keys: keys, tkey: tkey}
}

// finish checks e's reply got against the model, which it ends the lease
// in, and notes what the lease gave back.
func (e *end) finish(r *runner, got []any) {
	r.t.Helper()
	l := e.l
	us := r.replyNow(got, 1, true)
	before := r.m.Snapshot(us, r.all...).Values
	want := r.m.SettleTenant(us, l.id, e.tkey, e.charged, e.limit, e.bslots, e.deltas)
	if l.tenant > 0 && want == 1 && len(e.deltas) > 0 {
		r.seen["tenant settle"]++
	}
	r.countGiveBack(before, e.deltas, want)
	r.logf("  settle %s %s reserved=%+v used=%+v charged=%d turn=%d %v = %v; model %d", l.id, e.mode, l.req, e.u, e.charged, e.turnMs, e.deltas, got, want)
	r.check(len(got) == 2 && got[0] == int64(want), "settle %s %s = %v; model says {%d now}", l.id, e.mode, got, want)
	l.open = false
	r.waiting = slices.DeleteFunc(r.waiting, func(w acquireArgs) bool { return w.id == l.id })
	if want == 1 {
		for _, d := range e.deltas {
			if d.Us < 0 {
				l.used[d.Field] = max(0, l.used[d.Field]+d.Us)
			}
		}
	}
	r.seen[fmt.Sprintf("%s %d", e.mode, want)]++
}

// keepAlive reads a's bits 6-7 (both set: any lease, ended or not), b (the
// lease) and c (the TTL).
func (r *runner) keepAlive(s step) {
	l := r.pick(s.a&0xc0 == 0xc0, s.b)
	ttl := max(1, (1+2*int64(s.c))/r.lane.scale)
	limit, bslots := r.slots()
	got := r.eval(lua.KeepAlive, wire.KeepAliveArgs(l.id, time.Duration(ttl)*time.Millisecond, limit, bslots)...)
	us := r.replyNow(got, 1, true)
	queued := len(r.queued())
	code, expiry := r.m.KeepAlive(us, l.id, ttl, limit, bslots)
	if len(r.queued()) < queued {
		r.seen["keepalive gives"]++ // a slot an expired lease freed
	}
	r.logf("  keepalive %s %d = %v; model {%d %d}", l.id, ttl, got, code, expiry)
	r.check(len(got) == 3 && got[0] == int64(code) && got[2] == expiry,
		"keepalive %s %d = %v; model says {%d now %d}", l.id, ttl, got, code, expiry)
	if code == 1 {
		l.expiry = expiry
	}
	r.seen[fmt.Sprintf("keepalive %d", code)]++
}

// pause reads a's bits 0-1 (0: a plain pause; 1, 2, 3: a refusal that
// lowers the request rates, the token rates or both, of a window of a
// minute or less, as a 429 through Lease.Fail does), bit 2 (with a lowering: no pause,
// as a provider's headers lower the rates) and b (the refused call's
// tokens).
func (r *runner) pause(ms int64, a byte, tokens uint16) {
	var lowers []model.Lower
	if a&3 != 0 {
		if a&4 != 0 {
			ms = 0
		}
		lowers = r.cfg.Lowers(model.Request{Tokens: int64(tokens)}, func(_ int, rt model.Rate) bool {
			if rt.Window > 60_000/r.lane.scale || rt.Unit == wire.Spend {
				return false
			}
			return rt.Unit == wire.Requests && a&1 != 0 || rt.Unit != wire.Requests && a&2 != 0
		})
	}
	args := []any{ms}
	for _, l := range lowers {
		args = append(args, l.Field, l.Offset, l.Limit)
	}
	got := r.eval(lua.Pause, args...)
	us := r.replyNow(got, 1, true)
	var want int64
	switch {
	case a&3 == 0:
		want = r.m.Pause(us/1000, ms)
	case ms == 0:
		want = r.m.Throttle(us, ms, lowers)
		r.seen["lowering"]++
	default:
		want = r.m.Throttle(us, ms, lowers)
		r.seen["throttle"]++
	}
	r.logf("  pause %d %v = %v; model %d", ms, lowers, got, want)
	r.check(len(got) == 2 && got[0] == want, "pause %d %v = %v; model says {%d now}", ms, lowers, got, want)
}

// stop reads a's bit 6 (the kind: 0 quota, 1 an operator's stop) and bit
// 5 (a resume), b's bits 0-1 (the probe interval: none, 100 ms, 1 s, 5 s)
// and c (the stop's length).
func (r *runner) stop(a byte, b, c uint16) {
	kind := [...]string{"quota", "stop"}[a>>6&1]
	ms := max(1, (1+int64(c%8192))/r.lane.scale)
	if a&0x20 != 0 {
		ms = 0
	}
	every := [...]int64{0, 100, 1000, 5000}[b&3]
	if every > 0 {
		every = max(1, every/r.lane.scale)
	}
	got := r.eval(lua.Stop, ms, every, kind)
	now := r.replyNow(got, 1, true) / 1000
	want := r.m.Stop(now, ms, every, kind)
	r.logf("  stop %d %d %s = %v; model %d", ms, every, kind, got, want)
	r.check(len(got) == 2 && got[0] == want, "stop %d %d %s = %v; model says {%d now}", ms, every, kind, got, want)
	if ms == 0 {
		r.seen["resume"]++
	} else {
		r.seen["stop "+kind]++
	}
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
		return &lease{id: "nobody", start: r.now, expiry: r.now + 1, charged: r.now * 1000, used: map[string]int64{}}
	}
	// Mostly one of the latest: a caller ends its calls soon after it makes
	// them, so most of these find the lease still live.
	if x&0x8000 == 0 {
		open = open[max(0, len(open)-4):]
	}
	return open[int(x&0x7fff)%len(open)]
}

// compareSnapshot compares what snapshot.lua reports with the model: the
// pause, the slots held, and every rate's field as stored, byte for byte
// (a bucket's TAT, a sliding window's counts), for every rate of the
// scenario, configured now or not.
func (r *runner) compareSnapshot() {
	args := make([]any, len(r.all))
	for i, f := range r.all {
		args[i] = f
	}
	got := r.eval(lua.Snapshot, args...)
	us := r.replyNow(got, 0, true)
	want := r.m.Snapshot(us, r.all...)
	ok := len(got) == 3+len(r.all) && got[1] == want.PauseRemaining && got[2] == want.InFlight
	for i := 0; ok && i < len(r.all); i++ {
		ok = got[3+i] == want.Values[i]
	}
	r.check(ok, "snapshot %v = %v; model says {now %d %d %q}", r.all, got, want.PauseRemaining, want.InFlight, want.Values)
}

// persist takes the TTLs off a real Redis's keys after each step. The
// model never forgets a key (see internal/model's doc), while a real Redis
// drops one about a second after its last bucket is full and its last
// lease expired: on a loaded machine a step can take that long, and a
// tenant's hash vanished between a step and the comparison after it.
// miniredis expires keys only when told to.
func (r *runner) persist() {
	if r.lane.mini != nil {
		return
	}
	ctx := context.Background()
	if _, err := r.lane.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range r.lane.allKeys() {
			p.Persist(ctx, k)
		}
		return nil
	}); err != nil {
		r.fail("PERSIST: %v", err)
	}
}

// compareHash compares the state hash's pause, qb and qs (the stop) with
// the model's, as stored.
func (r *runner) compareHash() {
	h, err := r.lane.rdb.HMGet(context.Background(), r.keys[0], "pause", "qb", "qs", "dv").Result()
	if err != nil {
		r.fail("HMGET %s: %v", r.keys[0], err)
	}
	pause, qb, qs := r.m.Hash()
	for i, want := range []string{pause, qb, qs, r.m.Version()} {
		got, _ := h[i].(string)
		r.check(got == want, "state hash %s = %q; model says %q", []string{"pause", "qb", "qs", "dv"}[i], got, want)
	}
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
			if m := z.Member.(string); !strings.HasPrefix(m, "~") {
				got[m] = int64(z.Score)
			}
		}
		r.check(maps.Equal(got, want), "%s = %v; model says %v", r.keys[1+i], got, want)
	}
}

// stackLens returns the length of each bucket's give-back stack.
func (r *runner) stackLens() map[string]int {
	n := map[string]int{}
	for _, f := range r.all {
		t, _ := r.m.Stack(f)
		n[f] = len(t)
	}
	return n
}

// countStacks counts, for the coverage check, the steps that compacted a
// bucket's full stack (64 entries became at most 44, and the new one) or
// removed more than 8; n is each bucket's count before the step.
func (r *runner) countStacks(n map[string]int) {
	after := r.stackLens()
	for f := range n {
		switch {
		case n[f] == 64 && after[f] <= 45:
			r.seen["stack merged"]++
		case after[f] < n[f]-8:
			r.seen["stack popped"]++
		}
	}
}

// countGiveBack counts, for the coverage check, each give-back that moved
// a bucket by all it asked, by part of it, or not at all; a sliding
// window's give-backs and debts; a settle that gave back to some buckets
// and charged a debt to others (input less, output more than reserved, or
// the reverse); and spend corrections. before are the fields' values
// before the settle.
func (r *runner) countGiveBack(before []string, deltas []model.Delta, code int) {
	if code != 1 {
		return
	}
	after := r.m.Snapshot(0, r.all...).Values
	if slices.ContainsFunc(deltas, func(d model.Delta) bool { return d.Us < 0 }) &&
		slices.ContainsFunc(deltas, func(d model.Delta) bool { return d.Us > 0 }) {
		r.seen["settle mixed"]++
	}
	at := func(vs []string, f string) int64 {
		v, _ := strconv.ParseInt(vs[slices.Index(r.all, f)], 10, 64)
		return v
	}
	for _, d := range deltas {
		i := slices.Index(r.cfg.Fields(), d.Field)
		if i < 0 {
			continue // a tenant's: see compareTenants
		}
		if u := r.cfg.Rates[i].Unit; u == wire.Spend {
			r.seen["spend corrected"]++
		}
		switch moved := at(before, d.Field) - at(after, d.Field); {
		case d.Sliding && d.Us < 0:
			r.seen["sliding giveback"]++
		case d.Sliding:
			r.seen["sliding debt"]++
		case d.Us >= 0:
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
// <field>.h, see model.DecodeStack) with the model's.
func (r *runner) compareStacks() {
	var fields, rings []string
	for _, f := range r.all {
		switch {
		case strings.HasPrefix(f, "~"):
			rings = append(rings, f+".r")
		case !strings.HasPrefix(f, "@") && !strings.HasPrefix(f, "%"):
			fields = append(fields, f+".h")
		}
	}
	for _, f := range rings {
		r.compareRing(r.keys[0], strings.TrimSuffix(f, ".r"), r.m.Ring(strings.TrimSuffix(f, ".r")))
	}
	if len(fields) == 0 {
		return
	}
	h, err := r.lane.rdb.HMGet(context.Background(), r.keys[0], fields...).Result()
	if err != nil {
		r.fail("HMGET %s: %v", r.keys[0], err)
	}
	for i, v := range h {
		var got []int64
		if v != nil {
			times, headrooms, err := model.DecodeStack(v.(string))
			r.check(err == nil, "%s: %v", fields[i], err)
			for k := range times {
				got = append(got, times[k], headrooms[k])
			}
		}
		var want []int64
		times, headrooms := r.m.Stack(strings.TrimSuffix(fields[i], ".h"))
		for k := range times {
			want = append(want, times[k], headrooms[k])
		}
		r.check(slices.Equal(got, want), "%s = %v; model says %v", fields[i], got, want)
	}
}

// compareRing compares a sliding window's ring fields in key's hash with
// what the model says: a field missing or "" holds zeros.
func (r *runner) compareRing(key, field string, want [wire.SlidingRingFields]string) {
	names := make([]string, wire.SlidingRingFields)
	for i := range names {
		names[i] = field + ".r" + strconv.Itoa(i)
	}
	h, err := r.lane.rdb.HMGet(context.Background(), key, names...).Result()
	if err != nil {
		r.fail("HMGET %s: %v", key, err)
	}
	zeros := (wire.SlidingState{}).Ring(0)
	for i, v := range h {
		got, _ := v.(string)
		if got == "" {
			got = zeros
		}
		r.check(got == want[i], "%s %s = %q; model says %q", key, names[i], got, want[i])
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
// (see slots.lua's give): admitted it ('<id>:1:<expiry>:<charged µs>';
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
			// A retry of its first attempt (ticket 0) that the rates held
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
			l = &lease{id: id, req: w.req, start: turn, charged: at, expiry: expiry, open: true,
				turn: turn * 1000, turnMs: turn, used: map[string]int64{}}
			for _, ch := range w.cs {
				l.used[ch.Field] = ch.Charge
			}
			r.leases = append(r.leases, l)
			r.byID[id] = l
			r.seen[fmt.Sprintf("handed %d", code)]++
		case w.tenant > 0:
			r.seen["handed tenant 0"]++ // told to take the slot it is owed
			continue
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
	return r.evalKeys(r.keys, s, args...)
}

// evalKeys runs s with keys.
func (r *runner) evalKeys(keys []string, s *redis.Script, args ...any) []any {
	r.t.Helper()
	v, err := s.Run(context.Background(), r.lane.rdb, keys, args...).Slice()
	if err != nil {
		h, _ := r.lane.rdb.HGetAll(context.Background(), r.keys[0]).Result()
		r.fail("script error: %v\nargs %v\nstate hash %q", err, args, h)
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
	// A batch's calls may each take a µs of their own after the clock
	// (see acquires.lua): up to slack µs.
	n, _ := now.(int64)
	r.check(ok && (r.lane.mini == nil || n >= want && n <= want+r.slack), "reply %v: clock at [%d]; want %d", got, i, want)
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
	r.t.Fatalf("%s\nrates %v weights %v prices %v conc %d floor %d\nmodel %v\nlast steps:\n%s",
		fmt.Sprintf(format, args...), r.fields, r.cfg.Weights, r.cfg.Prices, r.sc.conc, r.sc.floor, &r.m, strings.Join(tail, "\n"))
}
