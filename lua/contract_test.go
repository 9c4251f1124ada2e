package lua_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lua"
)

// The contract as docs/lua-contract.md states it, driven the way a worker in
// another language would: plain EVAL of lua.Source, no Go package between.
func TestContractAsDocumented(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client(t)
		tag := "{llmpacer:" + redistest.Name(t) + "}"
		keys := []string{tag + ":s", tag + ":l"}
		// rpm 60 (1 per second), tpm 6000 (100 per second); no rpd, tpd.
		buckets := []any{"rpm", "tpm", "60", "60", "60000", "6000", "6000", "60000"}
		eval := func(script string, args ...any) []any {
			t.Helper()
			v, err := rdb.Eval(ctx, lua.Source(script), keys, args...).Slice()
			if err != nil {
				t.Fatalf("%s: %v", script, err)
			}
			return v
		}
		acquire := func(id string, cost, maxWait int) []any {
			return eval("acquire", append([]any{id, cost, 0, maxWait, 60000, 2, 200, 100}, buckets...)...)
		}

		got := acquire("a", 5000, 0)
		if got[0] != int64(1) || got[1] != int64(0) || got[3] != "" {
			t.Fatalf("acquire a = %v; want {1, 0, now, ''}", got)
		}
		start := got[2].(int64)
		if again := acquire("a", 5000, 0); again[0] != int64(2) {
			t.Errorf("acquire a again = %v; want code 2, nothing charged", again)
		}
		if got := acquire("b", 2000, 0); got[0] != int64(0) || got[3] != "tpm" || got[1].(int64) < 9000 {
			t.Errorf("acquire b (2000 of 1000 left) = %v; want {0, ~10000, now, 'tpm'}", got)
		}
		if got := acquire("c", 7000, 0); got[0] != int64(-1) || got[3] != "tpm" {
			t.Errorf("acquire c (above capacity) = %v; want {-1, 0, now, 'tpm'}", got)
		}
		if got := acquire("d", 2000, 60000); got[0] != int64(1) || got[1].(int64) < 9000 {
			t.Errorf("acquire d with max wait 60s = %v; want admitted with a ~10s turn", got)
		}
		if got := acquire("e", 0, 0); got[0] != int64(0) || got[3] != "concurrency" {
			t.Errorf("acquire e (both slots held) = %v; want {0, wait, now, 'concurrency'}", got)
		}

		// 5000 reserved, 1000 used: 4000 tokens back, in thousandths.
		settle := []any{"a", start + 60000, 1, "tpm", 4000 * 1000}
		if got := eval("settle", settle...); got[0] != int64(1) {
			t.Errorf("settle a = %v; want {1, now}", got)
		}
		if got := eval("settle", settle...); got[0] != int64(0) {
			t.Errorf("settle a twice = %v; want {0, now}", got)
		}
		snap := eval("snapshot", buckets...)
		// tpm: 6000 - 5000 - 2000 (d) + 4000 (a's refund) = 3000, plus refill.
		tpm := -1.0
		if len(snap) == 5 {
			tpm, _ = strconv.ParseFloat(snap[4].(string), 64)
		}
		if snap[2] != int64(1) || tpm < 3000 || tpm > 3100 {
			t.Errorf("snapshot = %v; want {now, 0, 1 lease in flight, rpm, tpm >= 3000}", snap)
		}
		// An overrun is a debt: the bucket arguments follow the corrections.
		if got := acquire("g", 1000, 60000); got[0] != int64(1) {
			t.Fatalf("acquire g = %v; want admitted", got)
		}
		debt := append([]any{"g", start + 600000, 1, "tpm", -2000 * 1000}, buckets...)
		if got := eval("settle", debt...); got[0] != int64(1) {
			t.Errorf("settle g with a debt = %v; want {1, now}", got)
		}
		if got := eval("pause", 5000); got[0].(int64) != 5000 {
			t.Errorf("pause 5000 = %v; want 5000 remaining", got)
		}
		if got := eval("pause", 10, 1, "tpm", "6000", "6000", "60000"); got[0].(int64) < 4900 {
			t.Errorf("pause 10 (lowering tpm) after pause 5000 = %v; want the longer pause kept", got)
		}
		if got := acquire("f", 1, 60000); got[0] != int64(0) || got[3] != "pause" {
			t.Errorf("acquire during a pause = %v; want {0, ~5000, now, 'pause'}", got)
		}
		ka := eval("keepalive", "d", 120000)
		if ka[0] != int64(1) || ka[2].(int64) < ka[1].(int64)+119000 {
			t.Errorf("keepalive d = %v; want {1, now, now+120000}", ka)
		}
		if got := eval("keepalive", "nope", 1000); !cmp.Equal(got[0], int64(0)) {
			t.Errorf("keepalive of an unknown lease = %v; want code 0", got)
		}
	})
}
