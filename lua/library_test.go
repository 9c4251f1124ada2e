package lua_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lua"
)

// The library's functions keep the scripts' text between calls (see
// lua.Library): each call must still start from nothing. A batch of
// acquires that fails on its second call, after the first was admitted
// in what it holds (fields read and changed, a lease to add, a stack's
// entry), writes nothing; the next call admits its own calls alone, on
// the state as the failed one found it. A settles batch alike.
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
	tat += 200_000
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
	wantTimes, wantHd := model.Push(nil, nil, us, tat-200_000-us)
	if got := strings.Join(ids, " "); !strings.Contains(got, "a3") || strings.Contains(got, "a1") || strings.Contains(got, "a2") ||
		st[0] != fmt.Sprint(tat) || err != nil || fmt.Sprint(times, hd) != fmt.Sprint(wantTimes, wantHd) {
		t.Fatalf("after the failed batch: leases %q, TAT %v, stack %v %v (%v); want a3's alone: TAT %d, stack %v %v",
			ids, st[0], times, hd, err, tat, wantTimes, wantHd)
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
