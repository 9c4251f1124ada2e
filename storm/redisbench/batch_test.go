package main

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// TestBatchMatchesSingles: on miniredis, its clock standing still within
// a step, each batch build (batch.go) leaves the state, the lease set and
// the replies exactly as k calls of acquire.lua and settle.lua do, in
// the two regimes it is measured in (the arguments a Pacer sends there,
// as recorded by -only batch), 64 leases in flight, TATs ahead.
func TestBatchMatchesSingles(t *testing.T) {
	ctx := context.Background()
	builds := []struct {
		name     string
		acq, set func(conc bool) *redis.Script
	}{
		{"crude", func(bool) *redis.Script { return redis.NewScript(batchSource("acquire", false, false)) }, func(bool) *redis.Script { return redis.NewScript(batchSource("settle", false, false)) }},
		{"wrapper", func(c bool) *redis.Script { return redis.NewScript(batchSource("acquire", true, !c)) }, func(c bool) *redis.Script { return redis.NewScript(batchSource("settle", true, !c)) }},
		{"hand", func(bool) *redis.Script { return redis.NewScript(batchHand("acquire")) }, func(bool) *redis.Script { return redis.NewScript(batchHand("settle")) }},
	}
	for _, sh := range regimeCalls {
		for _, bd := range builds {
			for _, k := range []int{1, 3, 8} {
				t.Run(fmt.Sprintf("%s/%s/k=%d", sh.name, bd.name, k), func(t *testing.T) {
					conc := len(sh.fields) > 2
					acqB, setB := bd.acq(conc), bd.set(conc)
					batch := func(rdb *redis.Client, s *redis.Script, ks []string, groups [][]any) []any {
						args := []any{len(groups)}
						for _, g := range groups {
							args = append(args, len(g))
							args = append(args, g...)
						}
						v, err := s.Run(ctx, rdb, ks, args...).Slice()
						if err != nil {
							t.Fatal(err)
						}
						return v
					}
					// Enough steps to fill 24 leases in flight and then
					// settle 16 batches: a batch of k costs k calls a step,
					// and the suite runs this on 2 CPUs.
					twinBudgets(t, sh, k, 24/k+16, nil, func(rdb *redis.Client, acquire bool, ka, kb []string, groups [][]any) ([]any, []any) {
						if acquire {
							return singles(t, rdb, lua.Acquire, ka, groups), batch(rdb, acqB, kb, groups)
						}
						return singles(t, rdb, lua.Settle, ka, groups), batch(rdb, setB, kb, groups)
					})
				})
			}
		}
	}
}

// regimeCall is a regime's calls as a Pacer sends them: an acquire of
// 100 tokens and its settle at 60, and the buckets whose TATs the tests
// put ahead of the clock.
type regimeCall struct {
	name   string
	acq    func(id string) []any
	set    func(id string, us int64) []any
	fields []string
}

// regimeCalls are the two in-use regimes' (as recorded by -only batch).
var regimeCalls = []regimeCall{
	{"RPM + TPM in use",
		func(id string) []any {
			return []any{id, 0, 0, 600000, 0, 0, 1, 0, "rpm", "tpm", 20000, 60000999, 20000, 60000099, 0}
		},
		func(id string, us int64) []any { return []any{id, us, 0, 0, "tpm", -8000} },
		[]string{"rpm", "tpm"}},
	{"every limit + concurrency in use",
		func(id string) []any {
			return []any{id, 0, 0, 600000, 1000, 800, 1, 0, "rpm", "tpm", "rpd", "tpd", 20000, 60000999, 20000, 60000099, 17280, 86400000999, 17280, 86400000086, 0}
		},
		func(id string, us int64) []any { return []any{id, us, 1000, 800, "tpm", -8000, "tpd", -6912} },
		[]string{"rpm", "tpm", "rpd", "tpd"}},
}

// twinBudgets runs sh's calls on two budgets, a and b, of one miniredis,
// their TATs 20 s ahead of the clock: each step k acquires, and past 24
// leases in flight the settles of the k oldest, each sent to both by send
// (acquire says which), which returns a's replies and b's, one a call.
// Every call must be admitted (settled), both budgets must answer alike,
// and after each step their state hashes (but the fields in skip), lease
// sets and expiry must be equal.
func twinBudgets(t *testing.T, sh regimeCall, k, steps int, skip []string, send func(rdb *redis.Client, acquire bool, ka, kb []string, groups [][]any) ([]any, []any)) {
	t.Helper()
	ctx := context.Background()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	clock := time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)
	m.SetTime(clock)
	keys := func(name string) []string {
		tag := "{llmpacer-bench:" + name + "}"
		return []string{tag + ":s", tag + ":l", tag + ":q", tag + ":d"}
	}
	ka, kb := keys("a"), keys("b")
	for _, ks := range [][]string{ka, kb} {
		for _, f := range sh.fields {
			rdb.HSet(ctx, ks[0], f, clock.Add(20*time.Second).UnixMicro())
		}
	}
	compare := func(step int) {
		t.Helper()
		ha, _ := rdb.HGetAll(ctx, ka[0]).Result()
		hb, _ := rdb.HGetAll(ctx, kb[0]).Result()
		for _, f := range skip {
			delete(ha, f)
			delete(hb, f)
		}
		if !reflect.DeepEqual(ha, hb) {
			t.Fatalf("step %d: state differs:\n%q\n%q", step, ha, hb)
		}
		za, _ := rdb.ZRangeWithScores(ctx, ka[1], 0, -1).Result()
		zb, _ := rdb.ZRangeWithScores(ctx, kb[1], 0, -1).Result()
		if !reflect.DeepEqual(za, zb) {
			t.Fatalf("step %d: lease sets differ", step)
		}
		if a, b := m.TTL(ka[0]), m.TTL(kb[0]); a != b {
			t.Fatalf("step %d: TTLs differ: %v %v", step, a, b)
		}
	}
	type lease struct {
		id string
		us int64
	}
	var fifo []lease
	next := 0
	for step := 0; step < steps; step++ {
		clock = clock.Add(time.Duration(300+step%7*170) * time.Microsecond)
		m.SetTime(clock)
		var groups [][]any
		for i := 0; i < k; i++ {
			next++
			groups = append(groups, sh.acq("lease-"+strconv.Itoa(next)))
		}
		ra, rb := send(rdb, true, ka, kb, groups)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("step %d: acquire replies differ: %v %v", step, ra, rb)
		}
		for i, v := range ra {
			r, _ := v.([]any)
			if len(r) < 3 || r[0] != int64(1) {
				t.Fatalf("step %d: refused %v", step, v)
			}
			fifo = append(fifo, lease{groups[i][0].(string), r[2].(int64)})
		}
		compare(step)
		if len(fifo) > 24 {
			groups = nil
			for _, l := range fifo[:k] {
				groups = append(groups, sh.set(l.id, l.us))
			}
			fifo = fifo[k:]
			ra, rb := send(rdb, false, ka, kb, groups)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("step %d: settle replies differ: %v %v", step, ra, rb)
			}
			for _, v := range ra {
				if r, _ := v.([]any); len(r) < 1 || r[0] != int64(1) {
					t.Fatalf("step %d: settle %v", step, v)
				}
			}
			compare(step)
		}
	}
}

// singles sends each of groups alone to s, and returns the replies.
func singles(t *testing.T, rdb *redis.Client, s *redis.Script, ks []string, groups [][]any) []any {
	t.Helper()
	var out []any
	for _, g := range groups {
		v, err := s.Run(context.Background(), rdb, ks, g...).Result()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}
