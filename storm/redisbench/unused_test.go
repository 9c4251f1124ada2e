package main

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// TestStrippedBuilds: with nothing cut, stripped gives each script's
// source back; every set of features cuts cleanly, and each feature
// changes the scripts whose calls run its code.
func TestStrippedBuilds(t *testing.T) {
	changes := map[feature][]string{
		fT: {"acquire", "settle", "acquires", "settles"},
		fS: {"acquire", "settle", "acquires", "settles"},
		fP: {"acquire", "acquires"},
		fD: {"acquire", "acquires"},
	}
	for _, name := range strippedScripts {
		for m := feature(0); m < 16; m++ {
			s, err := stripped(name, m)
			if err != nil {
				t.Fatal(err)
			}
			if m == 0 && s != lua.Source(name) {
				t.Errorf("%s: stripped of nothing differs from lua.Source", name)
			}
		}
	}
	for f, names := range changes {
		for _, name := range names {
			if s, _ := stripped(name, f); s == lua.Source(name) {
				t.Errorf("%s less feature %d: nothing cut", name, f)
			}
		}
	}
}

// TestStrippedAsShipped: on miniredis, each stripped build (each feature
// alone, and all four) leaves a budget that uses none of them the replies,
// the state (but the definition's copy, dv, which a build without
// definitions neither reads nor writes), the lease set and the expiry
// that the shipped scripts leave, singles and batches of 5, in the two
// regimes unused measures (the arguments a Pacer sends there, as
// TestBatchMatchesSingles has them), 24 leases in flight.
func TestStrippedAsShipped(t *testing.T) {
	ctx := context.Background()
	shapes := []struct {
		name   string
		acq    func(id string) []any
		set    func(id string, us int64) []any
		fields []string
	}{
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
	for _, sh := range shapes {
		for _, row := range unusedRows[1:] {
			for _, k := range []int{1, 5} {
				t.Run(fmt.Sprintf("%s/%s/k=%d", sh.name, row.name, k), func(t *testing.T) {
					src := map[string]string{}
					for _, name := range strippedScripts {
						s, err := stripped(name, row.m)
						if err != nil {
							t.Fatal(err)
						}
						src[name] = s
					}
					shipA, shipS, cutA, cutS := lua.Acquire, lua.Settle, redis.NewScript(src["acquire"]), redis.NewScript(src["settle"])
					if k > 1 {
						shipA, shipS, cutA, cutS = lua.Acquires, lua.Settles, redis.NewScript(src["acquires"]), redis.NewScript(src["settles"])
					}
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
					// send returns one reply a call: the batch scripts' flat
					// reply split, width values a call (wire.SplitReplies).
					send := func(s *redis.Script, ks []string, groups [][]any, width int) []any {
						if k == 1 {
							v, err := s.Run(ctx, rdb, ks, groups[0]...).Result()
							if err != nil {
								t.Fatal(err)
							}
							return []any{v}
						}
						var args []any
						for _, g := range groups {
							args = append(args, 0, len(g))
							args = append(args, g...)
						}
						v, err := s.Run(ctx, rdb, ks, args...).Result()
						if err != nil {
							t.Fatal(err)
						}
						out, err := wire.SplitReplies(v, len(groups), width)
						if err != nil {
							t.Fatal(err)
						}
						return out
					}
					compare := func(step int) {
						t.Helper()
						ha, _ := rdb.HGetAll(ctx, ka[0]).Result()
						hb, _ := rdb.HGetAll(ctx, kb[0]).Result()
						delete(ha, "dv")
						delete(hb, "dv")
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
					for step := 0; step < 24/k+12; step++ {
						clock = clock.Add(time.Duration(300+step%7*170) * time.Microsecond)
						m.SetTime(clock)
						var groups [][]any
						for i := 0; i < k; i++ {
							next++
							groups = append(groups, sh.acq("lease-"+strconv.Itoa(next)))
						}
						ra, rb := send(shipA, ka, groups, wire.AcquireReplyLen), send(cutA, kb, groups, wire.AcquireReplyLen)
						if !reflect.DeepEqual(ra, rb) {
							t.Fatalf("step %d: acquire replies differ: %v %v", step, ra, rb)
						}
						for i, v := range ra {
							r := v.([]any)
							if r[0].(int64) != 1 {
								t.Fatalf("step %d: refused %v", step, r)
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
							ra, rb := send(shipS, ka, groups, wire.SettleReplyLen), send(cutS, kb, groups, wire.SettleReplyLen)
							if !reflect.DeepEqual(ra, rb) {
								t.Fatalf("step %d: settle replies differ: %v %v", step, ra, rb)
							}
							for _, v := range ra {
								if r := v.([]any); r[0].(int64) != 1 {
									t.Fatalf("step %d: settle %v", step, r)
								}
							}
							compare(step)
						}
					}
				})
			}
		}
	}
}
