package lua_test

import (
	"context"
	"testing"

	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// stackOf returns a give-back stack: a header {F, A} (none for A 0), then
// the entries, each a time and a stored value.
func stackOf(f byte, a int64, entries ...int64) string {
	var b []byte
	if a != 0 {
		b = append([]byte{255, 0, 0, 0, 0, 0, f}, seven(a)...)
	}
	for _, v := range entries {
		b = append(b, seven(v)...)
	}
	return string(b)
}

// Two give-backs in one batch of settles that each take the short path
// (entry F before the lease's charge, F + 1 after it: only A moves), with
// a give-back that is not a whole number of µs (as TestFractionalAsSingles
// sends). Each single writes its new A as 7 bytes, whole, and the next
// single reads those back; the batch holds A apart between the two
// (settles.lua's heads) and must hold what the single would read back, or
// the second give-back lowers the first event from another A and the
// header ends a µs apart.
func TestHeldHeaderFractionalAsSingles(t *testing.T) {
	const us = 1_700_000_000_123_456
	setup := func(rdb redis.Cmdable) {
		ctx := context.Background()
		rdb.HSet(ctx, batchKeys[0], "xp", us/1000+600_000, "rpm", us+5_000_000,
			"rpm.h", stackOf(1, 500_000,
				us-3000, 100, // frozen: headroom 100
				us-2000, 2_500_000, // live: headroom 2,000,000
				us-1000, 3_500_000))
		rdb.ZAdd(ctx, batchKeys[1], redis.Z{Score: us/1000 + 10_000, Member: "b"}, redis.Z{Score: us/1000 + 10_000, Member: "c"})
	}
	end := func(id string) []any { return []any{id, us - 2500, 0, 0, "rpm", "-1000.5"} }
	twinBatch(t, us, setup, lua.Settle, lua.Settles, 1, end("b"), end("c"))
}

// In one batch of settles, a give-back that moves only a stack's header
// (held apart: settles.lua's heads) and then one that rewrites the same
// stack whole (freezing an entry: F moves), and the other way round, and
// both twice on a tenant's stack. The rewrite carries its own header; the
// header held before it must not be joined to it at the write.
func TestHeldHeaderThenRewriteAsSingles(t *testing.T) {
	const us = 1_700_000_000_123_456
	ta := "{llmpacer:batch}:t:aa"
	stack := stackOf(1, 500_000,
		us-3000, 100, // frozen: headroom 100
		us-2000, 2_500_000, // live: headroom 2,000,000
		us-1000, 3_500_000, // live: 3,000,000
		us-500, 4_500_000) // live: 4,000,000
	setup := func(rdb redis.Cmdable) {
		ctx := context.Background()
		rdb.HSet(ctx, batchKeys[0], "xp", us/1000+600_000, "rpm", us+5_000_000, "rpm.h", stack)
		rdb.HSet(ctx, ta, "xp", us/1000+600_000, "@rpm", us+5_000_000, "@rpm.h", stack)
		var z []redis.Z
		for _, id := range []string{"b", "c", "d", "e"} {
			z = append(z, redis.Z{Score: us/1000 + 10_000, Member: id})
		}
		rdb.ZAdd(ctx, batchKeys[1], z...)
	}
	// Charged between entries 1 and 2: the first event is entry F + 1,
	// and entry F stays below it (only A moves). Charged between entries
	// 2 and 3: entry 2 is frozen, the stack rewritten.
	short := func(id string) []any { return []any{id, us - 2500, 0, 0, "rpm", -1000, "@rpm", -1000} }
	long := func(id string) []any { return []any{id, us - 1500, 0, 0, "rpm", -1000, "@rpm", -1000} }
	for _, calls := range [][]batchCall{
		{{ta, short("b")}, {ta, long("c")}},
		{{ta, long("c")}, {ta, short("b")}},
		{{ta, short("b")}, {ta, long("c")}, {ta, short("d")}, {ta, long("e")}},
	} {
		twinTenants(t, us, setup, lua.Settle, lua.Settles, 1, calls)
	}
}
