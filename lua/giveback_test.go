package lua_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// seven is v as a stack's 7-byte big-endian integer.
func seven(v int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return b[1:]
}

// liveStack returns the give-back stack of events at times with
// headrooms hd, with F = f and A = a (see stackOf): each live entry, after
// the first f, holds its headroom plus a.
func liveStack(times, hd []int64, f int, a int64) string {
	var e []int64
	for k := range times {
		w := hd[k]
		if k >= f {
			w += a
		}
		e = append(e, times[k], w)
	}
	return stackOf(byte(f), a, e...)
}

// A give-back on stacks of every shape (0 to 64 entries, with a header of
// any F and A, A near the 2^50 past which the stack is written flat, or
// none), from leases charged before, at, between and after their events,
// moves the TAT and leaves the events as the model's rule says
// (model.hash.giveBack, written out here on the decoded stack): settle.lua
// looks for the first event after the charge at entry F + 1 and the one
// before it first, then searches the side they leave, and when that entry
// is the first event and no entry before it goes writes only a new header
// before the entries as they were; that case is checked byte for byte.
func TestGiveBackStacksAsModel(t *testing.T) {
	const us = int64(1_700_000_000_123_456)
	const flatAt = 1 << 50
	ctx := context.Background()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	m.SetTime(time.UnixMicro(us))
	keys := []string{"{llmpacer:gb}:s", "{llmpacer:gb}:l", "{llmpacer:gb}:q", "{llmpacer:gb}:d"}
	rng := rand.New(rand.NewPCG(23, 8))
	seen := map[string]int{}
	for it := range 3000 {
		n := rng.IntN(65)
		switch rng.IntN(8) {
		case 0:
			n = 64
		case 1:
			n = rng.IntN(3)
		}
		times, hd := make([]int64, n), make([]int64, n)
		tm, h := us-int64(rng.IntN(200)), int64(rng.IntN(3))
		for k := range n {
			times[k], hd[k] = tm, h
			tm += 1 + int64(rng.IntN(3))
			h += 1 + int64(rng.IntN(1000))
		}
		f, a := 0, int64(0)
		if n > 0 && rng.IntN(4) != 0 {
			f = rng.IntN(n + 1)
			a = []int64{1 + rng.Int64N(5000), flatAt - rng.Int64N(3000), 1 + rng.Int64N(1_000_000)}[rng.IntN(3)]
		}
		s := liveStack(times, hd, f, a)
		tat := us + 1 + rng.Int64N(5000)
		if rng.IntN(10) == 0 {
			tat = us - rng.Int64N(3)
		}
		charged := us - 300 + rng.Int64N(600)
		if n > 0 && f < n && rng.IntN(2) == 0 {
			charged = times[f] - 1 - rng.Int64N(2) // at entry F + 1 or before it
		} else if n > 0 && rng.IntN(2) == 0 {
			charged = times[rng.IntN(n)] + rng.Int64N(3) - 1
		}
		r := 1 + rng.Int64N(6000)

		// The model's rule, on the decoded stack.
		wantTat, wantT, wantH := tat, slices.Clone(times), slices.Clone(hd)
		short := false
		if tat > us {
			tc := min(charged, us)
			j := slices.IndexFunc(times, func(x int64) bool { return x > tc })
			if j < 0 {
				j = n
			}
			rr := r
			if j < n {
				rr = min(rr, hd[j])
			}
			if rr > 0 {
				wantTat = max(tat-rr, us)
				moved := tat - wantTat
				if j < n {
					for k := j; k < n; k++ {
						wantH[k] -= moved
					}
					p := j
					for p > 0 && wantH[p-1] >= wantH[j] {
						p--
					}
					wantT, wantH = append(wantT[:p], wantT[j:]...), append(wantH[:p], wantH[j:]...)
					short = j == f && p == f && a+moved <= flatAt
					seen[fmt.Sprintf("first event at F+1: %v, entries go: %v", j == f, p < j)]++
				}
			}
		}

		m.FlushAll()
		rdb.HSet(ctx, keys[0], "rpm", tat, "rpm.h", string(s))
		rdb.ZAdd(ctx, keys[1], redis.Z{Score: float64(us/1000 + 10_000), Member: "x"})
		if err := lua.Settle.Run(ctx, rdb, keys, "x", charged, 0, 0, "rpm", -r).Err(); err != nil {
			t.Fatal(err)
		}
		got := rdb.HGetAll(ctx, keys[0]).Val()
		gt, gh, err := model.DecodeStack(got["rpm.h"])
		where := fmt.Sprintf("case %d: %d entries, F %d, A %d, times %v, headrooms %v, TAT %d, charged %d, give-back %d", it, n, f, a, times, hd, tat, charged, r)
		if err != nil || got["rpm"] != fmt.Sprint(wantTat) || !slices.Equal(gt, wantT) || !slices.Equal(gh, wantH) {
			t.Fatalf("%s:\nTAT %s, stack %v %v (%v); want %d, %v %v", where, got["rpm"], gt, gh, err, wantTat, wantT, wantH)
		}
		if short {
			want := append(append([]byte{255, 0, 0, 0, 0, 0, byte(f)}, seven(a+tat-wantTat)...), s[len(s)-14*n:]...)
			if got["rpm.h"] != string(want) {
				t.Fatalf("%s: stack %q; want %q", where, got["rpm.h"], want)
			}
		}
	}
	t.Logf("%v", seen)
}
