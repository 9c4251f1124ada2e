package lua_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// batchKeys are the keys of the budget the batch cases run on.
var batchKeys = []string{"{llmpacer:batch}:s", "{llmpacer:batch}:l", "{llmpacer:batch}:q", "{llmpacer:batch}:d"}

// twinBatch sets up two miniredis alike at clock (µs), runs calls on one
// in one call of many, and on the other one by one with one, each at the
// µs the batch's reply gave it (reply[at]), and fails unless the replies
// and every key (fields, members, scores, TTLs) end the same. It returns
// the replies.
func twinBatch(t *testing.T, clock int64, setup func(redis.Cmdable), one, many *redis.Script, at int, calls ...[]any) []any {
	t.Helper()
	var bc []batchCall
	for _, c := range calls {
		bc = append(bc, batchCall{"", c})
	}
	return twinTenants(t, clock, setup, one, many, at, bc)
}

// twinTenants is twinBatch for calls that may name a tenant's hash.
func twinTenants(t *testing.T, clock int64, setup func(redis.Cmdable), one, many *redis.Script, at int, calls []batchCall) []any {
	t.Helper()
	batch, _ := twins(t, clock, func(m *miniredis.Miniredis, rdb redis.Cmdable) {
		m.SetTime(time.UnixMicro(clock))
		setup(rdb)
	}, one, many, at, calls)
	return batch
}

// twins is what twinTenants and twinRun share, so that both compare
// alike and fail with one message. It readies two miniredis with past,
// runs calls at clock on one in one call of many, and on the other one
// by one with one, each at the µs the batch's reply gave it (reply[at]).
// It returns the batch's replies and whether the twins agreed.
func twins(t *testing.T, clock int64, past func(*miniredis.Miniredis, redis.Cmdable), one, many *redis.Script, at int, calls []batchCall) ([]any, bool) {
	t.Helper()
	ctx := context.Background()
	var replies, dumps [2]string
	var batch []any
	keys, args := batchArgs(batchKeys, calls)
	for i := range 2 {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		defer rdb.Close()
		past(m, rdb)
		m.SetTime(time.UnixMicro(clock))
		var got []any
		if i == 0 {
			v, err := many.Run(ctx, rdb, keys, args...).Result()
			if err == nil {
				batch, err = wire.SplitReplies(v, len(calls), replyLen(many))
			}
			if err != nil {
				t.Fatalf("batch: %v", err)
			}
			got = batch
		} else {
			for j, c := range calls {
				if rep, _ := batch[j].([]any); at < len(rep) {
					us, _ := rep[at].(int64)
					m.SetTime(time.UnixMicro(us))
				}
				v, err := one.Run(ctx, rdb, c.singleKeys(batchKeys), c.args...).Result()
				if err != nil {
					t.Fatalf("one by one: %v", err)
				}
				got = append(got, v)
			}
		}
		replies[i], dumps[i] = fmt.Sprint(got), keyDump(rdb, keys)
	}
	if replies[0] != replies[1] || dumps[0] != dumps[1] {
		t.Errorf("batch: %s\n%s\none by one: %s\n%s", replies[0], dumps[0], replies[1], dumps[1])
		return batch, false
	}
	return batch, true
}

// A batch of admissions on a millisecond divisible by 16 reaps expired
// leases and stale pending ones, at most 100 of each a call, as each
// single acquire does: three calls, 350 expired leases and 150 stale
// pending ones.
func TestAcquiresReapAsSingles(t *testing.T) {
	const us = 1_700_000_000_000_000 // now = us/1000, divisible by 16
	now := int64(us / 1000)
	setup := func(rdb redis.Cmdable) {
		ctx := context.Background()
		for i := range 350 {
			rdb.ZAdd(ctx, batchKeys[1], redis.Z{Score: float64(now - 70_000 - int64(i)), Member: fmt.Sprintf("old%d", i)})
		}
		for i := range 150 {
			rdb.ZAdd(ctx, batchKeys[1], redis.Z{Score: float64(1_000_000_000_000_000 + now - 70_000 - int64(i)), Member: fmt.Sprintf("stale%d", i)})
		}
	}
	var calls [][]any
	for i := range 3 {
		a := wire.Acquire{ID: fmt.Sprintf("c%d", i), TTL: time.Minute, Limit: 10, BatchSlots: 8, Spacing: 1,
			Charges: []wire.Charge{{Field: "rpm", Charge: 1000, Allow: 60_000_000}}}
		calls = append(calls, a.Args())
	}
	got := twinBatch(t, us, setup, lua.Acquire, lua.Acquires, 2, calls...)
	for i, v := range got {
		if r, _ := v.([]any); len(r) == 0 || r[0] != int64(1) {
			t.Errorf("call %d = %v; want admitted", i, v)
		}
	}
}

// Admitted now only while every bucket has room now: a call that would
// wait 1 µs at its clock (a µs after the call before it) is not (it is
// refused, with max wait 0), after one that fits to the µs; and a field
// named twice in one call (which no
// Pacer sends) is charged as acquire.lua charges it.
func TestAcquiresRoomAsSingles(t *testing.T) {
	const us = 1_700_000_000_123_456
	const charge, allow = 1000, 60_000_000
	setup := func(rdb redis.Cmdable) {
		rdb.HSet(context.Background(), batchKeys[0], "rpm", us+allow-2*charge+2)
	}
	call := func(id string, fields ...string) []any {
		a := wire.Acquire{ID: id, TTL: time.Minute}
		for _, f := range fields {
			a.Charges = append(a.Charges, wire.Charge{Field: f, Charge: charge, Allow: allow})
		}
		return a.Args()
	}
	got := twinBatch(t, us, setup, lua.Acquire, lua.Acquires, 2, call("a", "rpm"), call("b", "rpm"), call("c", "tpm", "tpm"))
	want := []int64{1, 0, 1}
	for i, v := range got {
		if r, _ := v.([]any); len(r) == 0 || r[0] != want[i] {
			t.Errorf("call %d = %v; want code %d", i, v, want[i])
		}
	}
}

// A settle that names a field twice (which no Pacer sends) is corrected as
// settle.lua corrects it: from the value read before either correction.
func TestSettlesFieldTwiceAsSingles(t *testing.T) {
	const us = 1_700_000_000_123_456
	setup := func(rdb redis.Cmdable) {
		ctx := context.Background()
		rdb.HSet(ctx, batchKeys[0], "xp", us/1000+600_000, "rpm", us+50_000_000)
		rdb.ZAdd(ctx, batchKeys[1], redis.Z{Score: float64(us/1000 + 10_000), Member: "a"}, redis.Z{Score: float64(us/1000 + 10_000), Member: "b"})
	}
	twinBatch(t, us, setup, lua.Settle, lua.Settles, 1,
		[]any{"a", us - 1000, 0, 1, "rpm", -3_000_000, "rpm", -4_000_000},
		[]any{"b", us - 1000, 0, 1, "rpm", -3_000_000})
}

// A batch whose calls' µs cross into the next ms counts the slots held
// in that ms: a lease that expires there frees its slot for the call
// after, as it does for a single acquire then. Each call of a batch has
// a µs of its own, after the one before.
func TestAcquiresNextMsAsSingles(t *testing.T) {
	const now = 1_700_000_000_123
	setup := func(rdb redis.Cmdable) {
		rdb.ZAdd(context.Background(), batchKeys[1], redis.Z{Score: now + 1, Member: "ending"})
	}
	call := func(id string) []any {
		a := wire.Acquire{ID: id, TTL: time.Minute, Limit: 2, BatchSlots: 2, Spacing: 1,
			Charges: []wire.Charge{{Field: "rpm", Charge: 1000, Allow: 60_000_000}}}
		return a.Args()
	}
	got := twinBatch(t, now*1000+999, setup, lua.Acquire, lua.Acquires, 2, call("a"), call("b"), call("c"))
	want := []int64{1, 1, 0}
	var us [3]int64
	for i, v := range got {
		r, _ := v.([]any)
		if len(r) < 3 || r[0] != want[i] {
			t.Errorf("call %d = %v; want code %d", i, v, want[i])
			continue
		}
		us[i], _ = r[2].(int64)
	}
	// (The third, which acquire.lua refuses itself, reads the clock: on
	// miniredis, still at the first's µs.)
	if us[1] != us[0]+1 {
		t.Errorf("the second call at %d µs, the first at %d: want the µs after", us[1], us[0])
	}
}

// Calls of one batch with different concurrency limits (which no Pacer
// sends: one definition, one limit) count the slots the batch's earlier
// admissions hold: a call without a limit, then one with a limit of 1,
// which that first admission fills.
func TestAcquiresSlotsOfEarlierCallsAsSingles(t *testing.T) {
	const us = 1_700_000_000_123_456
	call := func(id string, limit int64) []any {
		a := wire.Acquire{ID: id, TTL: time.Minute, Limit: limit, BatchSlots: limit, Spacing: 1,
			Charges: []wire.Charge{{Field: "rpm", Charge: 1000, Allow: 60_000_000}}}
		return a.Args()
	}
	got := twinBatch(t, us, func(redis.Cmdable) {}, lua.Acquire, lua.Acquires, 2, call("a", 0), call("b", 1))
	want := []int64{1, 0}
	for i, v := range got {
		if r, _ := v.([]any); len(r) == 0 || r[0] != want[i] {
			t.Errorf("call %d = %v; want code %d", i, v, want[i])
		}
	}
}

// Tenants' calls in a batch, each with its tenant's hash: its own tokens a
// minute ('@tpm', with a give-back stack) and its shares of the budget's
// buckets ('%rpm', '%tpm'). Tenant a calls twice (the second reads what
// the first charged), b once, over its share (a later interactive call
// then leaves the kept share of each budget bucket: admitted while that
// leaves room, refused once it does not), and a call of the budget alone
// between them. Then their leases end in one batch of settles, giving
// back to every bucket, each tenant's included.
func TestTenantsBatchAsSingles(t *testing.T) {
	const us = 1_700_000_000_123_456
	const minute = 60_000_000
	ta, tb := "{llmpacer:batch}:t:aa", "{llmpacer:batch}:t:bb"
	call := func(id string, tokens int64, keep bool) []any {
		a := wire.Acquire{ID: id, TTL: time.Minute, Charges: []wire.Charge{
			{Field: "rpm", Charge: minute / 100, Allow: minute},
			{Field: "tpm", Charge: tokens * minute / 10_000, Allow: minute},
		}}
		if keep {
			a.OverShare, a.KeepPPM = true, 250_000
			a.Charges = append(a.Charges,
				wire.Charge{Field: "%rpm", Charge: minute / 10, Allow: minute},
				wire.Charge{Field: "%tpm", Charge: tokens * minute / 1000, Allow: minute},
				wire.Charge{Field: "@tpm", Charge: tokens * minute / 5000, Allow: minute})
		}
		return a.Args()
	}
	setup := func(rdb redis.Cmdable) {
		ctx := context.Background()
		// The budget's tokens 70% used; b's share used past its allowance.
		rdb.HSet(ctx, batchKeys[0], "xp", us/1000+120_000, "tpm", us+7*minute/10)
		rdb.PExpire(ctx, batchKeys[0], 120*time.Second)
		rdb.HSet(ctx, tb, "xp", us/1000+90_000, "%rpm", us+minute+minute/2, "@tpm", us+minute/3)
		rdb.PExpire(ctx, tb, 90*time.Second)
	}
	calls := []batchCall{{ta, call("a1", 100, true)}, {"", call("x", 100, false)}, {tb, call("b1", 100, true)},
		{ta, call("a2", 200, true)}, {tb, call("b2", 600, true)}}
	got := twinTenants(t, us, setup, lua.Acquire, lua.Acquires, 2, calls)
	want := []int64{1, 1, 1, 1, 0}
	charged := make([]int64, len(got))
	for i, v := range got {
		r, _ := v.([]any)
		if len(r) < 3 || r[0] != want[i] {
			t.Errorf("call %d = %v; want code %d", i, v, want[i])
			continue
		}
		charged[i], _ = r[2].(int64)
	}
	// Ended, in another order, each giving back half its tokens.
	settled := func(rdb redis.Cmdable) {
		setup(rdb)
		for _, c := range calls {
			lua.Acquire.Run(context.Background(), rdb, c.singleKeys(batchKeys), c.args...)
		}
	}
	end := func(i int, tokens int64) []any {
		args := []any{calls[i].args[0], charged[i], 0, 0, "rpm", -minute / 100, "tpm", -tokens * minute / 20_000}
		if calls[i].tkey != "" {
			args = append(args, "%tpm", fmt.Sprintf("%d:%d", -tokens*minute/2000, minute), "@tpm", -tokens*minute/10_000)
		}
		return args
	}
	twinTenants(t, us+5000, settled, lua.Settle, lua.Settles, 1,
		[]batchCall{{tb, end(2, 100)}, {ta, end(3, 200)}, {"", end(1, 100)}, {ta, end(0, 100)}})
}

// A batch holds each TAT it moves as a number and writes its digits once
// (batch.lua's set and tset, since "a batch holds the TATs and xp it moves
// as numbers"), where each single writes %d of it and the next reads those
// digits back. With a charge or a give-back that is not a whole number of
// µs (which no Pacer sends: the contract says integers), the batch's next
// call on the bucket starts from the unrounded TAT, and the two end a µs
// apart: a budget's bucket and a tenant's, by two acquires of 1000.5 µs
// each, then two give-backs of as much.
func TestFractionalAsSingles(t *testing.T) {
	const us = 1_700_000_000_123_456
	ta := "{llmpacer:batch}:t:aa"
	setup := func(rdb redis.Cmdable) {
		ctx := context.Background()
		rdb.HSet(ctx, batchKeys[0], "xp", us/1000+600_000, "rpm", us+1_000_000)
		rdb.HSet(ctx, ta, "xp", us/1000+600_000, "@rpm", us+1_000_000)
		rdb.ZAdd(ctx, batchKeys[1], redis.Z{Score: us/1000 + 10_000, Member: "c"}, redis.Z{Score: us/1000 + 10_000, Member: "d"})
	}
	call := func(id string) []any {
		return []any{id, 0, 0, 60000, 0, 0, 1, 0, "rpm", "@rpm", "1000.5", 60_000_000, "1000.5", 60_000_000}
	}
	twinTenants(t, us, setup, lua.Acquire, lua.Acquires, 2, []batchCall{{ta, call("a")}, {ta, call("b")}})
	end := func(id string) []any { return []any{id, us - 1000, 0, 0, "rpm", "-1000.5", "@rpm", "-1000.5"} }
	twinTenants(t, us, setup, lua.Settle, lua.Settles, 1, []batchCall{{ta, end("c")}, {ta, end("d")}})
}

// twinRun is twinTenants on a budget whose past is ops (each a single
// acquire or settle, run at its µs), the definition's version 3 stored.
// It returns the batch's replies and whether the twins agreed.
func twinRun(t *testing.T, clock int64, ops []twinOp, one, many *redis.Script, at int, calls []batchCall) ([]any, bool) {
	t.Helper()
	return twins(t, clock, func(m *miniredis.Miniredis, rdb redis.Cmdable) {
		rdb.HSet(context.Background(), batchKeys[3], "v", 3)
		for _, o := range ops {
			m.SetTime(time.UnixMicro(o.us))
			s := lua.Settle
			if o.acquire {
				s = lua.Acquire
			}
			s.Run(context.Background(), rdb, o.c.singleKeys(batchKeys), o.c.args...)
		}
	}, one, many, at, calls)
}

// twinOp is one single call of a budget's past: an acquire or a settle.
type twinOp struct {
	us      int64
	acquire bool
	c       batchCall
}

// Random batches of tenants' calls and of the budget's, on a budget with
// a past of up to 60 single calls (so its buckets' and tenants' stacks
// hold headers, and some leases are still open): each case's batch of 2
// to 8 acquires (some batch calls, some over share with a kept share,
// some under a concurrency limit or willing to wait, some with a stale
// definition, a day bucket or none), often at a millisecond's last µs so
// that its calls cross into the next, then a batch of settles of leases
// old and new (mostly give-backs, some debts and zeros, some twice),
// each compared key by key with the singles. LLMPACER_TWINS sets the
// number of cases (40 by default).
func TestRandomBatchesAsSingles(t *testing.T) {
	const minute, day = int64(60_000_000), int64(86_400_000_000)
	cases := 40
	if s := os.Getenv("LLMPACER_TWINS"); s != "" {
		cases, _ = strconv.Atoi(s)
	}
	tenants := []string{"", "{llmpacer:batch}:t:aa", "{llmpacer:batch}:t:bb"}
	type open struct {
		c       batchCall
		charged int64
		cs      []wire.Correction
	}
	fails := 0
	for it := 0; it < cases && fails < 3; it++ {
		rng := rand.New(rand.NewPCG(23, uint64(it)))
		limit := []int64{0, 0, 3, 6}[rng.IntN(4)]
		rpm := []int64{5, 20, 200}[rng.IntN(3)]
		tpm := []int64{2000, 20000}[rng.IntN(2)]
		share := []int64{2, 4, 10}[rng.IntN(3)] // each tenant's share: 1/share
		// versioned: 0 no call sends a version, 1 all do, 2 each call at
		// random (a batch's calls then differ in their arguments' shape).
		versioned, daily := []int{0, 0, 0, 0, 1, 2}[rng.IntN(6)], rng.IntN(2) == 0
		nid := 0
		// mk returns a call of tenant i (0: none) and its corrections.
		mk := func(i int) (batchCall, []wire.Correction) {
			nid++
			tok := 1 + rng.Int64N(tpm/int64(2+rng.IntN(30)))
			a := wire.Acquire{ID: fmt.Sprintf("c%d", nid), TTL: time.Duration(1+rng.IntN(120)) * time.Second,
				Batch: rng.IntN(4) == 0, Limit: limit, BatchSlots: limit * 2 / 3, Spacing: 50}
			if rng.IntN(4) == 0 {
				a.MaxWait = time.Duration(rng.IntN(3000)) * time.Millisecond
			}
			span := func(s int64) int64 {
				if a.Batch {
					return s * 3 / 4
				}
				return s
			}
			a.Charges = []wire.Charge{{Field: "rpm", Charge: minute / rpm, Allow: span(minute)},
				{Field: "tpm", Charge: tok * minute / tpm, Allow: span(minute)}}
			if daily {
				a.Charges = append(a.Charges, wire.Charge{Field: "rpd", Charge: day / (rpm * 100), Allow: span(day)})
			}
			if i > 0 {
				if !a.Batch {
					a.OverShare, a.KeepPPM = true, []int64{0, 100_000, 500_000}[rng.IntN(3)]
				}
				a.Charges = append(a.Charges,
					wire.Charge{Field: "%rpm", Charge: share * minute / rpm, Allow: minute},
					wire.Charge{Field: "%tpm", Charge: share * tok * minute / tpm, Allow: minute},
					wire.Charge{Field: "@tpm", Charge: 2 * tok * minute / tpm, Allow: minute})
				if daily {
					a.Charges = append(a.Charges, wire.Charge{Field: "@rpd", Charge: 3 * day / (rpm * 100), Allow: day})
				}
			}
			if versioned == 1 || versioned == 2 && rng.IntN(2) == 0 {
				a.Versioned, a.Version = true, 3
				if rng.IntN(30) == 0 {
					a.Version = 2
				}
				// The loss line: none, one the state's xp passed, or one
				// ahead of it (the state lost); a batch's calls often
				// repeat one, which acquires parses once.
				a.Seen = []int64{0, 1_699_999_000_000, 1_700_002_000_000}[rng.IntN(3)]
			}
			var cs []wire.Correction
			for _, ch := range a.Charges {
				c := wire.Correction{Field: ch.Field, Us: -1 - rng.Int64N(ch.Charge)}
				if ch.Field[0] == '%' {
					c.Allow = minute
				}
				switch rng.IntN(8) {
				case 0:
					c.Us = 1 + rng.Int64N(ch.Charge/2+1)
				case 1:
					c.Us = 0
				}
				cs = append(cs, c)
			}
			return batchCall{tenants[i], a.Args()}, cs
		}
		var ops []twinOp
		var leases []open
		now := int64(1_700_000_000_000_000) + rng.Int64N(1_000_000)*1000
		singles := rng.IntN(60)
		if rng.IntN(4) == 0 {
			singles = 0 // the batch finds no state (or a lost one)
		}
		for range singles {
			now += rng.Int64N(2_000_000)
			if len(leases) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(leases))
				l := leases[i]
				leases = append(leases[:i], leases[i+1:]...)
				ops = append(ops, twinOp{now, false, batchCall{l.c.tkey, wire.SettleArgs(l.c.args[0].(string), l.charged, limit, limit*2/3, l.cs)}})
				continue
			}
			c, cs := mk(rng.IntN(3))
			ops = append(ops, twinOp{now, true, c})
			leases = append(leases, open{c, now, cs})
		}
		clock := now + 1 + rng.Int64N(3_000_000)
		if rng.IntN(2) == 0 {
			clock = clock/1000*1000 + 995 + rng.Int64N(5)
		}
		var calls []batchCall
		var css [][]wire.Correction
		for range 2 + rng.IntN(7) {
			c, cs := mk(rng.IntN(3))
			calls, css = append(calls, c), append(css, cs)
		}
		got, ok := twinRun(t, clock, ops, lua.Acquire, lua.Acquires, 2, calls)
		if !ok {
			t.Errorf("case %d: the acquires differ", it)
			fails++
			continue
		}
		for i, c := range calls {
			r, _ := got[i].([]any)
			us, _ := r[2].(int64)
			ops = append(ops, twinOp{us, true, c})
			if r[0] == int64(1) {
				leases = append(leases, open{c, us, css[i]})
			}
		}
		rng.Shuffle(len(leases), func(i, j int) { leases[i], leases[j] = leases[j], leases[i] })
		var ends []batchCall
		for _, l := range leases[:min(len(leases), 1+rng.IntN(8))] {
			ends = append(ends, batchCall{l.c.tkey, wire.SettleArgs(l.c.args[0].(string), l.charged, limit, limit*2/3, l.cs)})
			if rng.IntN(10) == 0 {
				ends = append(ends, ends[len(ends)-1])
			}
		}
		if len(ends) > 0 {
			if _, ok := twinRun(t, clock+rng.Int64N(2_000_000), ops, lua.Settle, lua.Settles, 1, ends); !ok {
				t.Errorf("case %d: the settles differ", it)
				fails++
			}
		}
	}
}

// replyLen returns the values of one call's reply in many's flat reply.
func replyLen(many *redis.Script) int {
	if many == lua.Settles {
		return wire.SettleReplyLen
	}
	return wire.AcquireReplyLen
}
