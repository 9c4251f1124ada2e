package lua_test

import (
	"context"
	"fmt"
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
		keys := []string{tag + ":s", tag + ":l", tag + ":q"}
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
			args := append([]any{id, 0, maxWait, 60000, 2, 2, 50, 0}, fields...)
			return eval("acquire", append(args, 1_000_000, 60_000_000, cost*10_000, 60_000_000)...)
		}

		got := acquire("a", 5000, 0)
		if len(got) != 7 || got[0] != int64(1) || got[1] != int64(0) || got[3] != "" || got[4] != got[2].(int64)/1000+60000 || got[5] != int64(0) {
			t.Fatalf("acquire a = %v; want {1, 0, now_us, '', now_ms + 60000, 0}", got)
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
		// d's lease is pending: it holds no slot until its turn, when it
		// claims one by sending its ticket.
		d := acquire("d", 2000, 60000)
		if d[0] != int64(1) || d[1].(int64) > 10_000 || d[1].(int64) < 10_000-ran() || d[5] != (d[2].(int64)/1000+d[1].(int64))*1000 {
			t.Errorf("acquire d with max wait 60s = %v; want admitted with a turn 10s less the refill away, and its turn as its ticket", d)
		}
		if got := acquire("e", 0, 0); got[0] != int64(0) || got[3] != "tpm" {
			t.Errorf("acquire e (behind d's turn) = %v; want {0, wait, now, 'tpm', 0, 0}", got)
		}

		// 5000 reserved, 1000 used: 4000 tokens back, 40 s of the bucket.
		settle := []any{"a", charged, 2, 2, "tpm", -4000 * 10_000}
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
		if short := tat - snap[0].(int64); snap[2] != int64(0) || short > 30_000_000 || short < 30_000_000-1000*ran() {
			t.Errorf("snapshot = %v; want {now_us, 0, no slot held (d is pending), rpm, tpm TAT 30 s ahead}", snap)
		}
		// An overrun is a debt, taken from the TAT as it stands.
		g := acquire("g", 1000, 60000)
		if g[0] != int64(1) {
			t.Fatalf("acquire g = %v; want admitted", g)
		}
		if got := eval("settle", "g", g[2], 2, 2, "tpm", 2000*10_000); got[0] != int64(1) {
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

// The slot queue as docs/lua-contract.md states it: a caller finding no
// slot is queued with a ticket, its request kept with it; the settle that
// frees a slot admits the queue's head and publishes '<id>:1:<expiry>:<charged
// µs>' on the queue key's name; the waiter, asking again with its ticket,
// is told it was admitted (code 2), nothing charged twice.
func TestSlotQueueAsDocumented(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client(t)
		tag := "{llmpacer:" + redistest.Name(t) + "}"
		keys := []string{tag + ":s", tag + ":l", tag + ":q"}
		sub := rdb.Subscribe(ctx, keys[2])
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		eval := func(script string, args ...any) []any {
			t.Helper()
			v, err := rdb.Eval(ctx, lua.Source(script), keys, args...).Slice()
			if err != nil {
				t.Fatalf("%s: %v", script, err)
			}
			return v
		}
		// One slot, no buckets; y may wait 10 s (past its wait, x's settle
		// would drop it: a loaded machine stalls a second), a slot frees
		// every 10 ms.
		acquire := func(id string, maxWait int64, ticket any) []any {
			return eval("acquire", id, 0, maxWait, 60000, 1, 1, 10, ticket)
		}
		if got := acquire("x", 1000, 0); got[0] != int64(1) || got[5] != int64(0) {
			t.Fatalf("acquire x = %v; want {1, 0, now_us, '', expiry, 0}", got)
		}
		y := acquire("y", 10000, 0)
		if y[0] != int64(0) || y[1] != int64(10) || y[3] != "concurrency" || y[5] != y[2] {
			t.Fatalf("acquire y = %v; want {0, 10, now_us, 'concurrency', 0, ticket now_us}", y)
		}
		if got := acquire("z", 0, 0); got[0] != int64(0) || got[1] != int64(20) || got[5] != int64(0) {
			t.Errorf("acquire z, no wait = %v; want {0, 20, now_us, 'concurrency', 0, 0}: not queued", got)
		}
		if n, err := rdb.HExists(ctx, keys[0], "w:y").Result(); err != nil || !n {
			t.Errorf("y's request in w:y: %v, %v; want kept with its queue entry", n, err)
		}
		settled := eval("settle", "x", 0, 1, 1)
		if settled[0] != int64(1) {
			t.Fatalf("settle x = %v; want {1, now_us}", settled)
		}
		us := settled[1].(int64)
		msg, err := sub.ReceiveMessage(ctx)
		if want := fmt.Sprintf("y:1:%d:%d", us/1000+60000, us); err != nil || msg.Payload != want {
			t.Fatalf("published %v, %v; want %q: y admitted with x's slot", msg, err, want)
		}
		if n, err := rdb.HExists(ctx, keys[0], "w:y").Result(); err != nil || n {
			t.Errorf("w:y after y's admission: %v, %v; want gone", n, err)
		}
		if got := acquire("y", 10000, y[5]); got[0] != int64(2) || got[4] != us/1000+60000 || got[5] != int64(0) {
			t.Errorf("acquire y with its ticket = %v; want {2, 0, now_us, '', expiry, 0}: admitted already", got)
		}
		if got := eval("snapshot"); got[2] != int64(1) {
			t.Errorf("snapshot = %v; want 1 slot held", got)
		}
	})
}

// A correction of 0 changes its bucket not at all, beside another bucket's
// give-back. The Go and Python clients never send one, but another
// client may: settle.lua once took it for a debt in a settle with no
// other debt and failed after it had removed the lease, so that the
// give-back and the slot's hand-over were lost.
func TestSettleZeroCorrection(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		if b.Mini != nil {
			b.Mini.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		}
		rdb := b.Client(t)
		tag := "{llmpacer:" + redistest.Name(t) + "}"
		keys := []string{tag + ":s", tag + ":l", tag + ":q"}
		eval := func(script string, args ...any) []any {
			t.Helper()
			v, err := rdb.Eval(ctx, lua.Source(script), keys, args...).Slice()
			if err != nil {
				t.Fatalf("%s: %v", script, err)
			}
			return v
		}
		// rpm 60 and tpm 6000, as in TestContractAsDocumented.
		got := eval("acquire", "z", 0, 0, 60000, 0, 0, 50, 0, "rpm", "tpm", 1_000_000, 60_000_000, 5000*10_000, 60_000_000)
		if got[0] != int64(1) {
			t.Fatalf("acquire z = %v; want admitted", got)
		}
		before := eval("snapshot", "rpm", "tpm")
		if got := eval("settle", "z", got[2], 0, 0, "rpm", 0, "tpm", -4000*10_000); got[0] != int64(1) {
			t.Fatalf("settle z with rpm 0 and a tpm give-back = %v; want {1, now}", got)
		}
		after := eval("snapshot", "rpm", "tpm")
		if before[3] != after[3] {
			t.Errorf("rpm TAT %v after a correction of 0; want %v, unchanged", after[3], before[3])
		}
		bt, _ := strconv.ParseInt(before[4].(string), 10, 64)
		at, _ := strconv.ParseInt(after[4].(string), 10, 64)
		if bt-at != 4000*10_000 {
			t.Errorf("tpm TAT moved back %d µs; want 40,000,000 (4,000 tokens)", bt-at)
		}
	})
}
