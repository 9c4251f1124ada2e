package lua_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lua"
)

// The contract as docs/lua-contract.md states it, driven the way a worker in
// another language would: plain EVAL of lua.Source, no Go package between.
//
// On miniredis the clock stands still (SetTime) and every figure is exact.
// A real Redis reads this machine's clock, so a figure that refills with
// time may fall short of the exact one by at most the time since the test
// began (ran), however slow the machine.
func TestContractAsDocumented(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		began := time.Now()
		if b.Mini != nil {
			b.Mini.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		}
		// ran is at most how long Redis's clock ran since the test began,
		// in ms, plus 1 ms for rounding.
		ran := func() int64 {
			if b.Mini != nil {
				return 1
			}
			return time.Since(began).Milliseconds() + 1
		}
		rdb := b.Client(t)
		tag := "{llmpacer:" + redistest.Name(t) + "}"
		keys := []string{tag + ":s", tag + ":l"}
		// rpm 60 (1 per second: 1,000,000 µs a request, a span of 60 s),
		// tpm 6000 (100 per second: 10,000 µs a token); no rpd, tpd. An
		// interactive call's allowance is the span.
		fields := []any{"rpm", "tpm"}
		eval := func(script string, args ...any) []any {
			t.Helper()
			v, err := rdb.Eval(ctx, lua.Source(script), keys, args...).Slice()
			if err != nil {
				t.Fatalf("%s: %v", script, err)
			}
			return v
		}
		acquire := func(id string, cost, maxWait int64) []any {
			args := append([]any{id, 0, maxWait, 60000, 2, 50}, fields...)
			return eval("acquire", append(args, 1_000_000, 60_000_000, cost*10_000, 60_000_000)...)
		}

		got := acquire("a", 5000, 0)
		if len(got) != 5 || got[0] != int64(1) || got[1] != int64(0) || got[3] != "" || got[4] != got[2].(int64)/1000+60000 {
			t.Fatalf("acquire a = %v; want {1, 0, now_us, '', now_ms + 60000}", got)
		}
		charged := got[2].(int64) // settle's ARGV[2]
		if again := acquire("a", 5000, 0); again[0] != int64(2) || again[4] != got[4] {
			t.Errorf("acquire a again = %v; want code 2 and a's expiry %v, nothing charged", again, got[4])
		}
		if got := acquire("b", 2000, 0); got[0] != int64(0) || got[3] != "tpm" || got[1].(int64) > 10_000 || got[1].(int64) < 10_000-ran() {
			t.Errorf("acquire b (2000 of 1000 left) = %v; want {0, 10000 less the refill, now, 'tpm'}", got)
		}
		if got := acquire("c", 7000, 0); got[0] != int64(-1) || got[3] != "tpm" {
			t.Errorf("acquire c (above capacity) = %v; want {-1, 0, now, 'tpm'}", got)
		}
		if got := acquire("d", 2000, 60000); got[0] != int64(1) || got[1].(int64) > 10_000 || got[1].(int64) < 10_000-ran() {
			t.Errorf("acquire d with max wait 60s = %v; want admitted with a turn 10s less the refill away", got)
		}
		if got := acquire("e", 0, 0); got[0] != int64(0) || got[3] != "concurrency" {
			t.Errorf("acquire e (both slots held) = %v; want {0, wait, now, 'concurrency'}", got)
		}

		// 5000 reserved, 1000 used: 4000 tokens back, 40 s of the bucket.
		settle := []any{"a", charged, "tpm", -4000 * 10_000}
		if got := eval("settle", settle...); got[0] != int64(1) {
			t.Errorf("settle a = %v; want {1, now}", got)
		}
		if got := eval("settle", settle...); got[0] != int64(0) {
			t.Errorf("settle a twice = %v; want {0, now}", got)
		}
		snap := eval("snapshot", fields...)
		// tpm: 6000 - 5000 - 2000 (d) + 4000 (a's refund) = 3000, plus refill:
		// its TAT lies 3000 tokens (30 s) short of full, less the refill.
		var tat int64 = -1
		if len(snap) == 5 {
			tat, _ = strconv.ParseInt(snap[4].(string), 10, 64)
		}
		if short := tat - snap[0].(int64); snap[2] != int64(1) || short > 30_000_000 || short < 30_000_000-1000*ran() {
			t.Errorf("snapshot = %v; want {now_us, 0, 1 lease in flight, rpm, tpm TAT 30 s ahead}", snap)
		}
		// An overrun is a debt, taken from the TAT as it stands.
		g := acquire("g", 1000, 60000)
		if g[0] != int64(1) {
			t.Fatalf("acquire g = %v; want admitted", g)
		}
		if got := eval("settle", "g", g[2], "tpm", 2000*10_000); got[0] != int64(1) {
			t.Errorf("settle g with a debt = %v; want {1, now}", got)
		}
		if got := eval("pause", 5000); got[0].(int64) != 5000 {
			t.Errorf("pause 5000 = %v; want 5000 remaining", got)
		}
		if got := eval("pause", 10, "tpm", 60_000_000-10_000, 120_000_000); got[0].(int64) < 5000-ran() {
			t.Errorf("pause 10 (lowering tpm) after pause 5000 = %v; want the longer pause kept", got)
		}
		if got := acquire("f", 1, 60000); got[0] != int64(0) || got[3] != "pause" {
			t.Errorf("acquire during a pause = %v; want {0, ~5000, now, 'pause'}", got)
		}
		ka := eval("keepalive", "d", 120000)
		if ka[0] != int64(1) || ka[2].(int64) < ka[1].(int64)/1000+119000 {
			t.Errorf("keepalive d = %v; want {1, now_us, now_ms+120000}", ka)
		}
		if got := eval("keepalive", "nope", 1000); !cmp.Equal(got[0], int64(0)) {
			t.Errorf("keepalive of an unknown lease = %v; want code 0", got)
		}
	})
}
