package lua_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lua"
)

// Pushes onto stacks of every shape (0 to 64 entries, full ones most
// often, with a header of any F and A or none), by acquire.lua alone and
// by acquires.lua in batches of up to four calls on the same bucket, leave
// the stack and the TAT that the model's push (model.Push), one call after
// another at each call's µs, leaves: entries that go, a full stack
// folded, a charge with no headroom, an entry appended. Both lanes: on
// miniredis the scripts read and write entries with their own codec, on
// Redis with its struct library.
func TestPushStacksAsModel(t *testing.T) {
	for _, lane := range []struct {
		name    string
		backend func(testing.TB) redistest.Backend
	}{{"miniredis", redistest.Mini}, {"redis", redistest.Real}} {
		t.Run(lane.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := lane.backend(t).Client(t)
			name := redistest.Name(t)
			keys := []string{"{" + name + "}:s", "{" + name + "}:l", "{" + name + "}:q", "{" + name + "}:d"}
			t.Cleanup(func() { rdb.Del(context.Background(), keys...) })
			rng := rand.New(rand.NewPCG(41, 7))
			seen := map[string]int{}
			for it := range 300 {
				now, err := rdb.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				us := now.UnixMicro()
				n := 64
				if rng.IntN(2) == 0 {
					n = rng.IntN(65)
				}
				// Headrooms 100 ms apart or more, so that the µs between
				// reading the clock and the call never change which
				// entries a charge's headroom reaches.
				times, hd := make([]int64, n), make([]int64, n)
				tm, h := us-1_000_000, 100_000+rng.Int64N(100_000)
				for k := range n {
					times[k], hd[k] = tm, h
					tm += 1 + rng.Int64N(1000)
					h += 100_000 + rng.Int64N(100_000)
				}
				f, a := 0, int64(0)
				if n > 0 && rng.IntN(3) != 0 {
					f, a = rng.IntN(n+1), 1+rng.Int64N(1_000_000)
				}
				s := liveStack(times, hd, f, a)
				// The TAT: past every headroom (a full stack folds), among
				// them (entries go), or behind the clock (no headroom).
				ahead := int64(50_000)
				switch r := rng.IntN(4); {
				case n > 0 && r < 2:
					ahead = hd[n-1] + 50_000
				case n > 0 && r == 2:
					ahead = hd[rng.IntN(n)] + 50_000
				case r == 3:
					ahead = -1_000_000
				}
				tat := us + ahead
				if err := rdb.Del(ctx, keys...).Err(); err != nil {
					t.Fatal(err)
				}
				if err := rdb.HSet(ctx, keys[0], "tpm", tat, "tpm.h", string(s)).Err(); err != nil {
					t.Fatal(err)
				}

				calls := 1 + rng.IntN(4)
				charges := make([]int64, calls)
				var batch []any
				var single []any
				for c := range calls {
					charges[c] = 1 + rng.Int64N(20_000)
					a := []any{fmt.Sprintf("p%d-%d", it, c), 0, 0, 60_000, 0, 0, 1, 0, "tpm", charges[c], int64(1) << 50}
					batch = append(append(batch, 0, len(a)), a...)
					single = a
				}
				alone := calls == 1 && rng.IntN(2) == 0
				var uss []int64
				if alone {
					v, err := lua.Acquire.Run(ctx, rdb, keys, single...).Slice()
					if err != nil {
						t.Fatal(err)
					}
					uss = append(uss, admittedAt(t, v, 0))
				} else {
					v, err := lua.Acquires.Run(ctx, rdb, keys, batch...).Slice()
					if err != nil {
						t.Fatal(err)
					}
					for c := range calls {
						uss = append(uss, admittedAt(t, v, 7*c))
					}
				}

				// The model: each call's event at its µs, of the headroom
				// the TAT had before its charge.
				wantT, wantH := slices.Clone(times), slices.Clone(hd)
				cur := tat
				for c, u := range uss {
					d := max(cur-u, 0)
					before := len(wantT)
					wantT, wantH = model.Push(wantT, wantH, u, d)
					switch {
					case d == 0:
						seen["no headroom"]++
					case before == 64 && len(wantT) < 64:
						seen["full stack folded"]++
						if !alone {
							seen["folded in a batch"]++
						}
					case len(wantT) <= before:
						seen["entries went"]++
					default:
						seen["appended"]++
						if c > 0 {
							seen["appended in a batch"]++
						}
					}
					cur = max(cur, u) + charges[c]
				}
				st, err := rdb.HMGet(ctx, keys[0], "tpm", "tpm.h").Result()
				if err != nil {
					t.Fatal(err)
				}
				gt, gh, err := model.DecodeStack(fmt.Sprint(st[1]))
				where := fmt.Sprintf("case %d (%d calls, alone %v): %d entries, F %d, A %d, TAT %d ahead", it, calls, alone, n, f, a, ahead)
				if err != nil || st[0] != fmt.Sprint(cur) || !slices.Equal(gt, wantT) || !slices.Equal(gh, wantH) {
					t.Fatalf("%s:\nTAT %v, stack %v %v (%v);\nwant %d, %v %v", where, st[0], gt, gh, err, cur, wantT, wantH)
				}
			}
			t.Logf("seen %v", seen)
			for _, k := range []string{"no headroom", "full stack folded", "folded in a batch", "entries went", "appended", "appended in a batch"} {
				if seen[k] == 0 {
					t.Errorf("no push of kind %q in %v", k, seen)
				}
			}
		})
	}
}

// admittedAt returns the µs of the acquire reply at v[o:] and fails the test
// unless it admitted the call.
func admittedAt(t *testing.T, v []any, o int) int64 {
	t.Helper()
	if v[o] != int64(1) {
		t.Fatalf("reply %v: not admitted", v[o:o+7])
	}
	return v[o+2].(int64)
}
