package lua_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// The library's functions keep the scripts' text between calls (see
// lua.Library): each call must still start from nothing. A batch of
// acquires that fails on its second call, after the first was admitted
// in what it holds (fields read and changed, a lease to add, a stack's
// entry), writes nothing it held (but at a new ms, see below); the next
// call admits its own calls alone, on the state as the failed one left
// it. A settles batch alike.
func TestLibraryStartsEachCallAfresh(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Real(t).Client(t)
	name := redistest.Name(t)
	keys := []string{"{" + name + "}:s", "{" + name + "}:l", "{" + name + "}:q", "{" + name + "}:d"}
	t.Cleanup(func() { rdb.Del(context.Background(), keys...) })
	if err := rdb.FunctionLoad(ctx, lua.Library).Err(); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("FUNCTION LOAD: %v", err)
	}
	acquire := func(id string, ttl any, tokens int64) []any {
		return []any{0, 11, id, 0, 0, ttl, 0, 0, 1, 0, "tpm", tokens * 1000, int64(1) << 50}
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	tat := now.UnixMicro() + 10_000_000 // ten seconds ahead: each charge has headroom
	if err := rdb.HSet(ctx, keys[0], "tpm", tat).Err(); err != nil {
		t.Fatal(err)
	}

	// The second call's TTL is no number: the batch fails after
	// admitting the first in what it holds.
	args := append(acquire("a1", 60_000, 500), acquire("a2", "soon", 500)...)
	if err := rdb.FCall(ctx, lua.AcquiresFunction, keys, args...).Err(); err == nil {
		t.Fatal("a batch with a TTL of \"soon\" was taken")
	}
	v, err := rdb.FCall(ctx, lua.AcquiresFunction, keys, acquire("a3", 60_000, 200)...).Slice()
	if err != nil || len(v) != 7 || v[0] != int64(1) {
		t.Fatalf("the next batch = %v, %v; want a3 admitted", v, err)
	}
	us := v[2].(int64)
	ids, err := rdb.ZRange(ctx, keys[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	st, err := rdb.HMGet(ctx, keys[0], "tpm", "tpm.h").Result()
	if err != nil {
		t.Fatal(err)
	}
	times, hd, err := model.DecodeStack(fmt.Sprint(st[1]))
	// A batch writes what it holds when its clock reaches a new ms (the
	// second call's µs is the first's plus one: one batch in a thousand
	// crosses one), as a single a1 would have been written; a1's resend
	// then finds it admitted. Either way nothing the failed call held in
	// memory carries over: a1 is charged once or not at all.
	var wantTimes, wantHd []int64
	first := "alone"
	if slices.Contains(ids, "a1") && err == nil && len(times) > 0 {
		wantTimes, wantHd = model.Push(nil, nil, times[0], tat-times[0])
		tat += 500_000
		first = "after a1's, written at a new ms"
	}
	wantTimes, wantHd = model.Push(wantTimes, wantHd, us, tat-us)
	tat += 200_000
	if got := strings.Join(ids, " "); !strings.Contains(got, "a3") || strings.Contains(got, "a2") ||
		st[0] != fmt.Sprint(tat) || err != nil || fmt.Sprint(times, hd) != fmt.Sprint(wantTimes, wantHd) {
		t.Fatalf("after the failed batch: leases %q, TAT %v, stack %v %v (%v); want a3's %s: TAT %d, stack %v %v",
			ids, st[0], times, hd, err, first, tat, wantTimes, wantHd)
	}
	if v, err := rdb.FCall(ctx, lua.AcquiresFunction, keys, acquire("a5", 60_000, 100)...).Slice(); err != nil || v[0] != int64(1) {
		t.Fatalf("a5 = %v, %v; want it admitted", v, err)
	}
	tat += 100_000

	// A settles batch that fails on its second lease (a5, charged at a
	// time of no number), after ending a3 and giving back to its bucket
	// in what it holds; then one that ends nothing known.
	settle := func(id string, charged any) []any {
		return []any{0, 6, id, charged, 0, 0, "tpm", -100_000}
	}
	args = append(settle("a3", us), settle("a5", "then")...)
	if err := rdb.FCall(ctx, lua.SettlesFunction, keys, args...).Err(); err == nil {
		t.Fatal("a settles batch with a charge at \"then\" was taken")
	}
	if v, err := rdb.FCall(ctx, lua.SettlesFunction, keys, settle("zz", us)...).Slice(); err != nil || len(v) != 2 || v[0] != int64(0) {
		t.Fatalf("settling an unknown lease = %v, %v; want 0", v, err)
	}
	if got, err := rdb.HGet(ctx, keys[0], "tpm").Result(); err != nil || got != fmt.Sprint(tat) {
		t.Fatalf("TAT %v (%v) after the failed settles; want %d, unchanged", got, err, tat)
	}
	for _, id := range []string{"a3", "a5"} {
		if err := rdb.ZScore(ctx, keys[1], id).Err(); err != nil {
			t.Fatalf("%s's lease after the failed settles: %v; want it still there", id, err)
		}
	}
}

// The library's functions keep the batch scripts' text between calls (see
// lua.Library), where EVALSHA runs it afresh on each. Sequences of
// batches (acquires and settles of random calls on a budget with its
// tenants, day rates, slots and a definition's version, one in three
// sliding) give the same replies and leave the same keys, every field,
// member, score and TTL, run as the library's two functions, one instance
// of each for the whole sequence, as run by EVAL, one script call a batch.
// miniredis has no FUNCTION, so the library's text runs there in one EVAL
// with redis.register_function replaced by a table, each batch a call of
// its function; the batches by EVAL read the same clock.
func TestLibraryMatchesEvalAcrossCalls(t *testing.T) {
	const minute, day = int64(60_000_000), int64(86_400_000_000)
	ctx := context.Background()
	body := lua.Library[strings.Index(lua.Library, "\n")+1:]
	harness := "local DRIVER = ARGV\nlocal fns = {}\nlocal function register(name, f) fns[name] = f end\n" +
		strings.ReplaceAll(body, "redis.register_function(", "register(") +
		`local out, i = {}, 1
while i <= #DRIVER do
  local fn, nk, na = DRIVER[i], DRIVER[i + 1] + 0, DRIVER[i + 2] + 0
  local r = fns[fn]({unpack(DRIVER, i + 3, i + 2 + nk)}, {unpack(DRIVER, i + 3 + nk, i + 2 + nk + na)})
  out[#out + 1] = #r
  for j = 1, #r do out[#out + 1] = r[j] end
  i = i + 3 + nk + na
end
return out
`
	tenants := []string{"", "{llmpacer:batch}:t:aa", "{llmpacer:batch}:t:bb"}
	all := append(slices.Clone(batchKeys), tenants[1:]...)
	for it := range 30 {
		rng := rand.New(rand.NewPCG(29, uint64(it)))
		limit := []int64{0, 3}[rng.IntN(2)]
		rpm, tpm := []int64{5, 200}[rng.IntN(2)], []int64{2000, 20000}[rng.IntN(2)]
		daily, versioned, sliding := rng.IntN(2) == 0, rng.IntN(3) == 0, rng.IntN(3) == 0
		clock := int64(1_700_000_000_000_000) + rng.Int64N(1_000_000)*1000
		type batch struct {
			fn    string
			many  *redis.Script
			calls []batchCall
		}
		var batches []batch
		var ids []string
		for b := range 3 + rng.IntN(6) {
			if b > 0 && len(ids) > 0 && rng.IntN(2) == 0 {
				var ends []batchCall
				for range 1 + rng.IntN(5) {
					cs := []wire.Correction{{Field: "tpm", Us: -1 - rng.Int64N(minute/tpm)}}
					if rng.IntN(5) == 0 {
						cs[0].Us = 1 + rng.Int64N(minute/tpm)
					}
					ends = append(ends, batchCall{"", wire.SettleArgs(ids[rng.IntN(len(ids))], clock-rng.Int64N(1000), limit, limit*2/3, cs)})
				}
				batches = append(batches, batch{lua.SettlesFunction, lua.Settles, ends})
				continue
			}
			var calls []batchCall
			for range 1 + rng.IntN(6) {
				id := fmt.Sprintf("c%d-%d", b, len(calls))
				ids = append(ids, id)
				tok := 1 + rng.Int64N(tpm/4)
				a := wire.Acquire{ID: id, TTL: time.Duration(1+rng.IntN(120)) * time.Second, Batch: rng.IntN(4) == 0,
					Limit: limit, BatchSlots: limit * 2 / 3, Spacing: 50}
				if rng.IntN(4) == 0 {
					a.MaxWait = time.Duration(rng.IntN(3000)) * time.Millisecond
				}
				a.Charges = []wire.Charge{{Field: "rpm", Charge: minute / rpm, Allow: minute}, {Field: "tpm", Charge: tok * minute / tpm, Allow: minute}}
				if daily {
					a.Charges = append(a.Charges, wire.Charge{Field: "rpd", Charge: day / (rpm * 100), Allow: day})
				}
				if sliding {
					a.Charges = append(a.Charges, wire.Charge{Field: "~6000000:rpm10s", Charge: 1, Allow: 2})
				}
				tk := tenants[rng.IntN(3)]
				if tk != "" {
					a.Charges = append(a.Charges, wire.Charge{Field: "%tpm", Charge: 4 * tok * minute / tpm, Allow: minute},
						wire.Charge{Field: "@tpm", Charge: 2 * tok * minute / tpm, Allow: minute})
				}
				if versioned {
					a.Versioned, a.Version = true, 3
				}
				calls = append(calls, batchCall{tk, a.Args()})
			}
			batches = append(batches, batch{lua.AcquiresFunction, lua.Acquires, calls})
		}

		var got [2]string
		var dumps [2]string
		for side := range 2 {
			m := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
			m.SetTime(time.UnixMicro(clock))
			var out []any
			if side == 0 {
				for _, b := range batches {
					keys, args := batchArgs(batchKeys, b.calls)
					v, err := b.many.Run(ctx, rdb, keys, args...).Slice()
					if err != nil {
						t.Fatalf("case %d: by EVAL: %v", it, err)
					}
					out = append(append(out, int64(len(v))), v...)
				}
			} else {
				var args []any
				for _, b := range batches {
					keys, a := batchArgs(batchKeys, b.calls)
					args = append(append(args, b.fn, len(keys), len(a)), anys(keys)...)
					args = append(args, a...)
				}
				v, err := rdb.Eval(ctx, harness, nil, args...).Slice()
				if err != nil {
					t.Fatalf("case %d: as functions: %v", it, err)
				}
				out = v
			}
			got[side], dumps[side] = fmt.Sprint(out), keyDump(rdb, all)
			rdb.Close()
		}
		if got[0] != got[1] || dumps[0] != dumps[1] {
			t.Fatalf("case %d (%d batches): by EVAL %s\n%s\nas functions %s\n%s", it, len(batches), got[0], dumps[0], got[1], dumps[1])
		}
	}
}

// anys returns ss as values.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// A text without its main block's line is an error that says what is
// missing, not a panic.
func TestLibraryOfWithoutMainBlock(t *testing.T) {
	_, err := lua.LibraryOf("return 1\n", lua.Source("settles"))
	if err == nil || !strings.Contains(err.Error(), "main block") || !strings.Contains(err.Error(), "acquires") {
		t.Fatalf("LibraryOf(a text without its main block) = %v; want an error naming acquires' main block", err)
	}
	l, err := lua.LibraryOf(lua.Source("acquires"), lua.Source("settles"))
	if err != nil || l.Text != lua.Library || l.Name != lua.LibraryName || l.Acquires != lua.AcquiresFunction || l.Settles != lua.SettlesFunction {
		t.Fatalf("LibraryOf(the shipped texts) = %q, %q, %q, %v; want Library's", l.Name, l.Acquires, l.Settles, err)
	}
}
