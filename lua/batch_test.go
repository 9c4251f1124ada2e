package lua_test

import (
	"context"
	"fmt"
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
	ctx := context.Background()
	var replies, dumps [2]string
	var batch []any
	keys, args := batchArgs(batchKeys, calls)
	for i := range 2 {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		defer rdb.Close()
		m.SetTime(time.UnixMicro(clock))
		setup(rdb)
		var got []any
		if i == 0 {
			v, err := many.Run(ctx, rdb, keys, args...).Slice()
			if err != nil {
				t.Fatalf("batch: %v", err)
			}
			got, batch = v, v
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
	}
	return batch
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
