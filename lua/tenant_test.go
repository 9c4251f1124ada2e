package lua_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// Tenants and definitions in the differential test: a scenario's calls are
// charged to up to three tenants, whose hashes (KEYS[5]) the runner
// compares with the model's field by field after every step; define steps
// store definitions, and callers that run an older one are told so.

// define reads a's bits 0-1 (0: read only; 1 and 3: store the next
// version; 2: store version b mod 4 + 1, often not newer than the stored
// one) and bit 2 (the callers run the definition stored now; without it
// they run theirs until a call is told it is stale).
func (r *runner) define(a byte, b uint16) {
	var arg any
	var v int64
	switch a & 3 {
	case 0:
		arg, v = 0, 0
	case 2:
		v = int64(b%4) + 1
		arg = v
	default:
		arg, v = "next", -1
	}
	def := fmt.Sprintf(`{"step":%d}`, len(r.log))
	got := r.eval(lua.Define, arg, def)
	stored, version, text := r.m.Define(v, def)
	r.logf("  define %v %s = %v; model {%d %d %q}", arg, def, got, stored, version, text)
	r.check(len(got) == 3 && got[0] == int64(stored) && got[1] == version && got[2] == text,
		"define %v = %v; model says {%d %d %q}", arg, got, stored, version, text)
	if a&4 != 0 {
		r.version = version
	}
	r.seen[fmt.Sprintf("define %d", stored)]++
}

// compareTenants compares every field of every tenant's hash with the
// model's, byte for byte (TATs, give-back stacks, sliding counts, shares,
// qb and xp), and the definition key's version and text.
func (r *runner) compareTenants() {
	ctx := context.Background()
	for i := 1; i <= r.sc.tenants; i++ {
		key := r.lane.tenantKey(i)
		got, err := r.lane.rdb.HGetAll(ctx, key).Result()
		if err != nil {
			r.fail("HGETALL %s: %v", key, err)
		}
		// A sliding window's ring fields are compared apart: one missing
		// or "" holds zeros.
		maps.DeleteFunc(got, func(f, v string) bool { return strings.HasPrefix(f, "@~") && strings.Contains(f, ".r") })
		for f := range r.m.Tenant(key) {
			if strings.HasPrefix(f, "@~") {
				r.compareRing(key, f, r.m.TenantRing(key, f))
			}
		}
		want := r.m.Tenant(key)
		if want == nil {
			want = map[string]string{}
		}
		canonStacks(got)
		canonStacks(want)
		r.check(maps.Equal(got, want), "tenant %d's hash = %q; model says %q", i, got, want)
	}
	d, err := r.lane.rdb.HMGet(ctx, r.keys[3], "v", "def").Result()
	if err != nil {
		r.fail("HMGET %s: %v", r.keys[3], err)
	}
	v, text := r.m.Definition()
	wantV := ""
	if v != 0 {
		wantV = strconv.FormatInt(v, 10)
	}
	gotV, _ := d[0].(string)
	gotText, _ := d[1].(string)
	r.check(gotV == wantV && gotText == text, "definition %q %q; model says %q %q", gotV, gotText, wantV, text)
}

// bucketFields returns the model's bucket fields of the state hash and of
// tenant key's hash (marked "tenant "), without qb and xp.
func (r *runner) bucketFields(key string) map[string]string {
	m := r.m.Buckets("")
	if key != "" {
		for f, v := range r.m.Buckets(key) {
			m["tenant "+f] = v
		}
	}
	return m
}

// overShare reports whether a call of charges cs, of the tenant of key,
// is over its share at us: a share ('%') whose TAT (us if missing or past)
// its charge would take past its allowance. It reads the model before the
// call.
func (r *runner) overShare(us int64, key string, cs []model.Charge) bool {
	if key == "" {
		return false
	}
	h := r.m.Tenant(key)
	for _, ch := range cs {
		if !strings.HasPrefix(ch.Field, "%") {
			continue
		}
		tat, err := strconv.ParseInt(h[ch.Field], 10, 64)
		if err != nil || tat < us {
			tat = us
		}
		if tat+ch.Charge-us > ch.Allow {
			return true
		}
	}
	return false
}

// checkTenantCall checks, after an acquire, the promises that bind a
// budget and its tenants: all or nothing (a call refused, or answered
// without a charge, changes no bucket of either hash; one admitted
// charges every rate it has a charge for); a call over its share never
// reserves a later turn, and with priority 0:<ppm> leaves ppm millionths
// of every budget bucket; a share a call charged lies at most twice the
// call's allowance past now. before are the bucket fields before the call.
func (r *runner) checkTenantCall(c acquireArgs, a wire.Acquire, cs []model.Charge, us int64, rep model.Reply,
	wasPending, over bool, before map[string]string) {
	key := ""
	if c.tenant > 0 {
		key = r.lane.tenantKey(c.tenant)
	}
	after := r.bucketFields(key)
	charged := rep.Code == 1 && !wasPending
	if !charged {
		// With a concurrency limit, the script first hands free slots to
		// the waiters before the caller (see give), charging the budget's
		// buckets for them; never a tenant's, whose waiters keep no
		// request. Then only the tenant's fields must stay as they were.
		b, a := before, after
		if r.sc.conc > 0 {
			b, a = tenantFields(before), tenantFields(after)
		}
		if !maps.Equal(b, a) {
			r.fail("acquire %+v = %+v changed the buckets: %q before, %q after", c, rep, before, after)
		}
	}
	name := func(f string) string {
		if strings.HasPrefix(f, "@") || strings.HasPrefix(f, "%") {
			return "tenant " + f
		}
		return f
	}
	if charged {
		for _, ch := range cs {
			if ch.Charge > 0 && !strings.HasPrefix(ch.Field, "%") && before[name(ch.Field)] == after[name(ch.Field)] {
				r.fail("acquire %+v = %+v left %s uncharged (%q)", c, rep, ch.Field, after[name(ch.Field)])
			}
		}
	}
	if c.tenant == 0 {
		return
	}
	r.seen[fmt.Sprintf("tenant acquire %d", rep.Code)]++
	for _, ch := range cs {
		if !charged || !strings.HasPrefix(ch.Field, "%") {
			continue
		}
		if tat, err := strconv.ParseInt(after[name(ch.Field)], 10, 64); err == nil && tat-us > 2*ch.Allow {
			r.fail("%s of tenant %d lies %d µs past now; at most twice its allowance %d", ch.Field, c.tenant, tat-us, ch.Allow)
		}
	}
	if !over {
		return
	}
	r.seen[fmt.Sprintf("over share %d", rep.Code)]++
	if rep.Code == 0 && rep.Reason != "concurrency" && rep.Wait > 0 && c.maxWait > 0 {
		r.seen["over share waits"]++
	}
	if !charged {
		return
	}
	if rep.Wait != 0 {
		r.fail("acquire %+v over its share reserved a turn %d ms ahead", c, rep.Wait)
	}
	if !a.OverShare {
		return
	}
	for _, ch := range cs {
		if strings.HasPrefix(ch.Field, "@") || strings.HasPrefix(ch.Field, "%") || strings.HasPrefix(ch.Field, "~") {
			continue
		}
		allow := ch.Allow - int64(math.Floor(float64(ch.Allow)*(float64(a.KeepPPM)/1e6)))
		if tat, _ := strconv.ParseInt(after[ch.Field], 10, 64); tat-us > allow {
			r.fail("acquire %+v over its share took %s to %d µs past now; it may use %d of %d", c, ch.Field, tat-us, allow, ch.Allow)
		}
	}
}

// A tenant's hash expires when the tenant is idle, sooner than a lease
// charged to it may end: its TTL covers its buckets, not the budget's
// leases. A settle that finds it gone must not write it back without a
// TTL, or every tenant whose lease ends after its hash expired leaves a key
// in Redis forever.
func TestTenantHashNeverLosesItsTTL(t *testing.T) {
	b := redistest.Mini(t)
	rdb := b.Client(t)
	ctx := context.Background()
	start := time.UnixMilli(base)
	b.Mini.SetTime(start)
	l := lane{rdb: rdb, scale: 1}
	keys := append(l.keys(), l.tenantKey(1))
	cfg := model.Config{
		Rates:  []model.Rate{{Unit: wire.Tokens, Cap: 1000, Refill: 1000, Window: 60_000}},
		Tenant: []model.Rate{{Unit: wire.Tokens, Cap: 100, Window: 1000, Sliding: true}, {Unit: wire.Requests, Cap: 5, Refill: 5, Window: 1000}},
		Share:  0.5,
	}.Tenanted()
	for _, end := range []int{model.Canceled, model.Settled} {
		req := model.Request{Tokens: 50}
		id := fmt.Sprintf("x%d", end)
		args := wire.Acquire{ID: id, TTL: 5 * time.Minute, Charges: cfg.Charges(req, false, 0)}.Args()
		rep, err := lua.Acquire.Run(ctx, rdb, keys, args...).Slice()
		if err != nil || rep[0] != int64(1) {
			t.Fatalf("acquire = %v, %v; want admitted", rep, err)
		}
		// The tenant's hash expires (a minute and a second after its
		// TATs, see tcover in prelude.lua); the lease lives on.
		b.Mini.FastForward(70 * time.Second)
		start = start.Add(70 * time.Second)
		b.Mini.SetTime(start)
		if b.Mini.Exists(keys[4]) {
			t.Fatalf("the tenant's hash outlived its TTL")
		}
		used := model.Usage{Tokens: 20}
		if end == model.Settled {
			used.Tokens = 80 // a debt: written with its TTL
		}
		d := cfg.Deltas(end, req, rep[2].(int64)/1000, used)
		if _, err := lua.Settle.Run(ctx, rdb, keys, wire.SettleArgs(id, rep[2].(int64), 0, 0, d)...).Result(); err != nil {
			t.Fatal(err)
		}
		if b.Mini.Exists(keys[4]) && b.Mini.TTL(keys[4]) <= 0 {
			h, _ := rdb.HGetAll(ctx, keys[4]).Result()
			t.Errorf("after the %v settle, the tenant's hash %q has no TTL", end, h)
		}
	}
}

// tenantFields returns the fields of fs that are a tenant's ('@', '%').
func tenantFields(fs map[string]string) map[string]string {
	out := map[string]string{}
	for f, v := range fs {
		if strings.HasPrefix(f, "@") || strings.HasPrefix(f, "%") {
			out[f] = v
		}
	}
	return out
}

// A tenant's waiter keeps a marker in the slot queue, and the script that
// frees a slot keeps that slot for it until it comes to take it. A waiter
// whose process died never comes: once told, it holds the slot one lease
// TTL at most, as a lease of that process would have, not until the end of
// its (much longer) max wait.
func TestDeadTenantWaiterHoldsItsSlotOneTTL(t *testing.T) {
	b := redistest.Mini(t)
	rdb := b.Client(t)
	ctx := context.Background()
	now := time.UnixMilli(base)
	b.Mini.SetTime(now)
	l := lane{rdb: rdb, scale: 1}
	keys := l.keys()
	tkeys := append(l.keys(), l.tenantKey(1))
	cfg := model.Config{Rates: []model.Rate{{Unit: wire.Requests, Cap: 1000, Refill: 1000, Window: 60_000}}}
	ttl := 5 * time.Second
	call := func(k []string, id string, ticket int64, maxWait time.Duration) []any {
		t.Helper()
		args := wire.Acquire{ID: id, TTL: ttl, MaxWait: maxWait, Limit: 1, BatchSlots: 1, Spacing: 100,
			Ticket: ticket, Charges: cfg.Charges(model.Request{}, false, 0)}.Args()
		rep, err := lua.Acquire.Run(ctx, rdb, k, args...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := call(keys, "holder", 0, 0); rep[0] != int64(1) {
		t.Fatalf("holder: %v; want admitted", rep)
	}
	// The tenant's caller queues for the slot, willing to wait an hour.
	rep := call(tkeys, "tenant", 0, time.Hour)
	if rep[0] != int64(0) || rep[5] == int64(0) {
		t.Fatalf("tenant: %v; want queued with a ticket", rep)
	}
	// The holder ends: its slot is kept for the tenant's waiter, which is
	// told, and whose process is gone.
	if _, err := lua.Settle.Run(ctx, rdb, keys, wire.SettleArgs("holder", 0, 1, 1, nil)...).Result(); err != nil {
		t.Fatal(err)
	}
	// Within the TTL the slot stays kept: a newcomer waits.
	now = now.Add(ttl - time.Second)
	b.Mini.SetTime(now)
	if rep := call(keys, "early", 0, 0); rep[0] != int64(0) {
		t.Fatalf("a newcomer %v before the dead waiter's TTL ran out: %v; want held back", ttl-time.Second, rep)
	}
	// Past it, the slot is free again.
	now = now.Add(2 * time.Second)
	b.Mini.SetTime(now)
	if rep := call(keys, "late", 0, 0); rep[0] != int64(1) {
		t.Fatalf("a newcomer %v after the dead waiter was told: %v; want admitted (its slot held one TTL at most)", ttl+time.Second, rep)
	}
}

// canonStacks writes each give-back stack of hash m (a field ending in
// ".h") as its events, so that two stacks holding the same events compare
// equal however their entries are stored (see model.DecodeStack).
func canonStacks(m map[string]string) {
	for f, v := range m {
		if !strings.HasSuffix(f, ".h") {
			continue
		}
		times, headrooms, err := model.DecodeStack(v)
		if err != nil {
			m[f] = err.Error()
			continue
		}
		m[f] = fmt.Sprint(times, headrooms)
	}
}
