package main

import (
	"context"
	"fmt"
	"testing"

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
// regimes unused measures (regimeCalls: the arguments a Pacer sends
// there), 24 leases in flight.
func TestStrippedAsShipped(t *testing.T) {
	ctx := context.Background()
	for _, sh := range regimeCalls {
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
					// send returns one reply a call: the batch scripts' flat
					// reply split, width values a call (wire.SplitReplies).
					send := func(rdb *redis.Client, s *redis.Script, ks []string, groups [][]any, width int) []any {
						if k == 1 {
							return singles(t, rdb, s, ks, groups)
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
					twinBudgets(t, sh, k, 24/k+12, []string{"dv"}, func(rdb *redis.Client, acquire bool, ka, kb []string, groups [][]any) ([]any, []any) {
						if acquire {
							return send(rdb, shipA, ka, groups, wire.AcquireReplyLen), send(rdb, cutA, kb, groups, wire.AcquireReplyLen)
						}
						return send(rdb, shipS, ka, groups, wire.SettleReplyLen), send(rdb, cutS, kb, groups, wire.SettleReplyLen)
					})
				})
			}
		}
	}
}
