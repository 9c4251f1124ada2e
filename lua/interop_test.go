package lua_test

import (
	"cmp"
	"context"
	"errors"
	"github.com/llmpacer/llmpacer/internal/wire"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A Python worker (clients/python) and Go pacers share budgets on the real
// Redis, as docs/lua-contract.md promises workers in other languages can:
//
//   - refunds: each side's give-back (settle, cancel, reject) is room the
//     other side is admitted into, and its charge is room it is refused;
//   - slots: each side's leases hold the other side's calls back; a
//     waiting call on either side is admitted after the other side's lease
//     ends, by the Redis clock; waiters of both sides are admitted by the
//     slots freed in the order they queued; a Python keep-alive moves its
//     lease's expiry;
//   - pauses: each side's pause (and Python's Lease.fail of a 429, which
//     also lowers the token bucket) holds the other side's calls back;
//   - rates: on an hourly token rate beside input and output rates, each
//     side's split reservation is room the other is refused for, by the
//     rate that lacks most, and each side's give-backs (by input and
//     output apart, or by the total alone) are room the other is
//     admitted into;
//   - a load phase: four Go callers in two "processes" and three Python
//     threads run against one budget at once, settling with refunds,
//     releasing and rejecting, and no window of any bucket holds more than
//     the promise allows (a full bucket plus the window's refill, counting
//     what the calls used after their refunds, by the Redis-clock turns
//     both sides report), nor more calls in flight than the concurrency
//     limit.
//
// The assertions hold on a loaded machine: the refund steps run on a
// bucket refilling one token a second, with margins of 25 tokens, so they
// hold unless a step takes 25 s; the slot steps compare Redis-clock times;
// the load phase checks invariants of the scripts, not throughput, under
// one condition (see interopLoad) that holds unless every caller stalls
// for over a second.
func TestPythonSharesBudgetWithGo(t *testing.T) {
	py := findPython(t, true)
	b := redistest.Real(t)
	name := redistest.Name(t)
	budgets := map[string]vconfig{
		// 60 tokens a minute: one a second.
		"refund": {Budget: name + ":refund", Limits: vlimits{TPM: 60}},
		"slots":  {Budget: name + ":slots", Limits: vlimits{Concurrency: 2}, LeaseTTLMs: 30_000},
		"pause":  {Budget: name + ":pause", Limits: vlimits{TPM: 60_000}},
		"resent": {Budget: name + ":resent", Limits: vlimits{TPM: 60_000}},
		// A Group's deployment: its keys under a hash tag.
		"tagged": {Budget: name + ":tagged", HashTag: name + "-group", Limits: vlimits{TPM: 60}},
		// Each rate refills one token a second: 100 tokens at most of
		// 3,600 an hour, 60 input and 60 output tokens a minute.
		"rates": {Budget: name + ":rates", Rates: []vrate{
			{Unit: "tokens", Limit: 3600, WindowMs: 3_600_000, Burst: 100},
			{Unit: "input_tokens", Limit: 60, WindowMs: 60_000},
			{Unit: "output_tokens", Limit: 60, WindowMs: 60_000},
		}},
		"load": {Budget: name + ":load", Limits: vlimits{Concurrency: 4}, LeaseTTLMs: 30_000, Rates: []vrate{
			{Unit: "requests", Limit: 1800, WindowMs: 60_000, Burst: 10},
			{Unit: "tokens", Limit: 120_000, WindowMs: 60_000, Burst: loadBurst},
		}},
	}
	// Two clients: two Go "processes".
	rdb, rdb2 := b.Client(t), b.Client(t)
	pacers := map[string][2]*pacer.Pacer{}
	for k, c := range budgets {
		p1, err := pacer.New(rdb, c.config())
		if err != nil {
			t.Fatal(err)
		}
		p2, err := pacer.New(rdb2, c.config())
		if err != nil {
			t.Fatal(err)
		}
		pacers[k] = [2]*pacer.Pacer{p1, p2}
		t.Cleanup(func() { rdb.Del(context.Background(), keysOf(p1)...) })
	}
	began := time.Now()
	w := startWorker(t, py, b, budgets)

	t.Run("refunds", func(t *testing.T) { interopRefunds(t, w, pacers["refund"][0]) })
	t.Run("slots", func(t *testing.T) { interopSlots(t, w, rdb, pacers["slots"][0]) })
	t.Run("pauses", func(t *testing.T) { interopPauses(t, w, pacers["pause"][0]) })
	t.Run("resent", func(t *testing.T) { interopResent(t, w, pacers["resent"][0]) })
	t.Run("hash-tag", func(t *testing.T) { interopHashTag(t, w, pacers["tagged"][0]) })
	t.Run("rates", func(t *testing.T) { interopRates(t, w, pacers["rates"][0]) })
	t.Run("load", func(t *testing.T) { interopLoad(t, w, pacers["load"], budgets["load"]) })
	t.Logf("ran in %v", time.Since(began).Round(time.Millisecond))
}

// tryGo is TryAcquire, failing the test on anything but a lease or ErrWaitTimeout.
func tryGo(t *testing.T, p *pacer.Pacer, tokens int64) (*pacer.Lease, *pacer.RefusedError) {
	t.Helper()
	l, err := p.TryAcquire(context.Background(), pacer.Request{Tokens: tokens})
	var ny *pacer.RefusedError
	if err != nil && (!errors.As(err, &ny) || !errors.Is(err, pacer.ErrWaitTimeout)) {
		t.Fatalf("Go TryAcquire(%d): %v", tokens, err)
	}
	return l, ny
}

func pyTry(w *worker, budget string, tokens int64) pyAnswer {
	return w.do(map[string]any{"op": "try", "budget": budget, "tokens": tokens})
}

func pyEnd(t *testing.T, w *worker, lease, how string, used int64) pyAnswer {
	t.Helper()
	a := w.do(map[string]any{"op": "end", "lease": lease, "how": how, "used": used})
	if a.Error != "" {
		t.Fatalf("Python %s %s: %s %s", how, lease, a.Error, a.Message)
	}
	return a
}

// interopResent: a settle the Redis client sends twice (its first reply
// lost to a timeout) finds no lease the second time. The Python lease
// takes that as its own first attempt, settled, not as an expiry; the
// refund is made once.
func interopResent(t *testing.T, w *worker, p *pacer.Pacer) {
	a := pyTry(w, "resent", 6000)
	if a.Error != "" {
		t.Fatalf("Python try: %s %s", a.Error, a.Message)
	}
	level := func() float64 {
		t.Helper()
		s, err := p.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s.Rate("tpm").Level
	}
	before := level()
	e := w.do(map[string]any{"op": "end", "lease": a.Lease, "how": "settle", "used": 1000, "resent": true})
	if e.Error != "" || e.State != "settled" {
		t.Fatalf("Python settle sent twice = %q %s, state %q; want settled", e.Error, e.Message, e.State)
	}
	// 5,000 given back once; the refill of 1,000 a second over the test's
	// few milliseconds adds little. Twice would be 10,000 (capped at the
	// capacity of 60,000, which the level stays far below).
	if got := level() - before; got < 4999 || got > 6000 {
		t.Errorf("TPM level rose by %v; want 5,000 given back once (plus the refill)", got)
	}
}

// interopHashTag: a budget with a hash tag (Config.HashTag, hash_tag) has
// the same keys on both sides: each side's charge is room the other is
// refused, and its cancel room the other is admitted into.
func interopHashTag(t *testing.T, w *worker, p *pacer.Pacer) {
	if k := keysOf(p)[0]; !strings.HasPrefix(k, "{"+strings.TrimSuffix(p.Config().Name, ":tagged")+"-group}") {
		t.Fatalf("Go keys %q: the hash tag is not their tag", keysOf(p))
	}
	a := pyTry(w, "tagged", 55)
	if a.Error != "" {
		t.Fatalf("Python try 55 of a full 60: %s %s", a.Error, a.Message)
	}
	if l, ny := tryGo(t, p, 40); l != nil || ny.Limit != "tpm" {
		t.Fatalf("Go TryAcquire(40) after Python took 55 = %v, %v; want ErrWaitTimeout for tpm", l, ny)
	}
	pyEnd(t, w, a.Lease, "cancel", 0)
	l, ny := tryGo(t, p, 40)
	if l == nil {
		t.Fatalf("Go TryAcquire(40) after Python's cancel = %v; want admitted", ny)
	}
	if r := pyTry(w, "tagged", 40); r.Error != "not_yet" || r.Limit != "tpm" {
		t.Errorf("Python try 40 after Go took 40 = %+v; want not_yet for tpm", r)
	}
	if err := l.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// interopRefunds: on 60 tokens with a refill of one a second, each side
// takes what leaves the other too little, then gives some back, which the
// other side is then admitted into.
func interopRefunds(t *testing.T, w *worker, p *pacer.Pacer) {
	ctx := context.Background()
	admit := func(a pyAnswer, what string) string {
		t.Helper()
		if a.Error != "" {
			t.Fatalf("Python %s: %s %s", what, a.Error, a.Message)
		}
		return a.Lease
	}
	refuse := func(a pyAnswer, what string) {
		t.Helper()
		if a.Error != "not_yet" || a.Limit != "tpm" {
			t.Fatalf("Python %s = %+v; want not_yet for tpm", what, a)
		}
	}
	goRefused := func(what string) {
		t.Helper()
		if l, ny := tryGo(t, p, 40); l != nil || ny.Limit != "tpm" {
			t.Fatalf("Go TryAcquire(40) %s = %v, %v; want ErrWaitTimeout for tpm", what, l, ny)
		}
	}
	goAdmitted := func(what string) *pacer.Lease {
		t.Helper()
		l, ny := tryGo(t, p, 40)
		if l == nil {
			t.Fatalf("Go TryAcquire(40) %s = %v; want admitted", what, ny)
		}
		return l
	}

	l1 := admit(pyTry(w, "refund", 55), "try 55 of a full 60")
	goRefused("with 5 tokens left")
	pyEnd(t, w, l1, "settle", 5) // 50 back
	if s, err := p.Snapshot(ctx); err != nil || s.Rate("tpm").Level < 55 || s.Rate("tpm").Level > 60 {
		t.Fatalf("Go Snapshot after Python gave 50 back = %+v, %v; want a TPM level of 55 to 60", s.Rate("tpm"), err)
	}
	g1 := goAdmitted("after Python's settle gave 50 back")
	refuse(pyTry(w, "refund", 40), "try 40 with about 15 left")
	if err := g1.Settle(ctx, 0); err != nil { // 40 back
		t.Fatal(err)
	}
	l2 := admit(pyTry(w, "refund", 40), "try 40 after Go's settle gave 40 back")
	goRefused("after Python took 40")
	pyEnd(t, w, l2, "cancel", 0)
	g2 := goAdmitted("after Python's cancel")
	refuse(pyTry(w, "refund", 40), "try 40 after Go took 40")
	if err := failReject(ctx, g2); err != nil {
		t.Fatal(err)
	}
	l3 := admit(pyTry(w, "refund", 40), "try 40 after Go's reject")
	pyEnd(t, w, l3, "release", 0)
}

// interopSlots: two slots. Each side's leases refuse the other side's calls;
// a call waiting on either side is admitted once the other side's lease
// ends, and not before, by the Redis clock; and a slot freed goes to the
// waiter that queued first, in whichever process.
func interopSlots(t *testing.T, w *worker, rdb redis.UniversalClient, p *pacer.Pacer) {
	ctx := context.Background()
	var py []string
	var a0 pyAnswer
	for range 2 {
		a := pyTry(w, "slots", 0)
		if a.Error != "" {
			t.Fatalf("Python try with free slots: %s %s", a.Error, a.Message)
		}
		py, a0 = append(py, a.Lease), a
	}
	if l, ny := tryGo(t, p, 0); l != nil || ny.Limit != "concurrency" {
		t.Fatalf("Go TryAcquire with both slots held by Python = %v, %v; want ErrWaitTimeout for concurrency", l, ny)
	}
	if s, err := p.Snapshot(ctx); err != nil || s.InFlight != 2 {
		t.Fatalf("Go Snapshot = %+v, %v; want Python's 2 leases in flight", s, err)
	}

	// Go queues for a slot; Python ends a lease.
	type result struct {
		l   *pacer.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := p.Acquire(ctx, pacer.Request{MaxWait: 30 * time.Second})
		got <- result{l, err}
	}()
	waitQueued(t, rdb, p, 1)
	ended := pyEnd(t, w, py[0], "settle", 0)
	r := <-got
	if r.err != nil {
		t.Fatalf("Go Acquire waiting for Python's slot: %v", r.err)
	}
	if start := r.l.Info().Start.UnixMicro(); start < ended.EndUs {
		t.Errorf("Go admitted at %d µs, before Python's lease ended at %d µs", start, ended.EndUs)
	}
	if a := pyTry(w, "slots", 0); a.Error != "not_yet" || a.Limit != "concurrency" {
		t.Fatalf("Python try with one slot each = %+v; want not_yet for concurrency", a)
	}

	// Python queues for a slot, then Go; Go ends its lease. The slot goes
	// to Python, which queued first, though Go's waiter is in the process
	// that freed it (Go's waiters once won such slots through an
	// in-process wake-up); Go's waiter gets the next slot freed.
	w.send(map[string]any{"op": "acquire", "budget": "slots", "tokens": 0, "max_wait_ms": 30_000})
	waitQueued(t, rdb, p, 1)
	go func() {
		l, err := p.Acquire(ctx, pacer.Request{MaxWait: 30 * time.Second})
		got <- result{l, err}
	}()
	waitQueued(t, rdb, p, 2)
	if err := r.l.Settle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	goEnd := r.l.Info().Start.Add(r.l.Info().Held).UnixMicro()
	a := w.answer()
	if a.Error != "" {
		t.Fatalf("Python acquire waiting for Go's slot: %s %s", a.Error, a.Message)
	}
	if a.StartUs < goEnd {
		t.Errorf("Python admitted at %d µs, before Go's lease ended at %d µs", a.StartUs, goEnd)
	}
	// Python holds both slots now: Go's waiter must still wait.
	select {
	case r2 := <-got:
		t.Fatalf("Go's waiter, queued after Python's, admitted while Python holds both slots: %v, %v", r2.l, r2.err)
	case <-time.After(300 * time.Millisecond):
	}
	pyDone := pyEnd(t, w, a.Lease, "release", 0)
	r2 := <-got
	if r2.err != nil {
		t.Fatalf("Go Acquire queued behind Python: %v", r2.err)
	}
	if start := r2.l.Info().Start.UnixMicro(); start < pyDone.EndUs {
		t.Errorf("Go admitted at %d µs, before Python's lease ended at %d µs", start, pyDone.EndUs)
	}
	if err := failRelease(ctx, r2.l); err != nil {
		t.Fatal(err)
	}

	// A keep-alive moves the expiry later (from acquire's now + TTL to the
	// keep-alive's).
	time.Sleep(5 * time.Millisecond)
	ka := w.do(map[string]any{"op": "keepalive", "lease": py[1]})
	if ka.Error != "" || ka.ExpiryMs <= a0.ExpiryMs {
		t.Errorf("Python keepalive = %+v; want an expiry after %d", ka, a0.ExpiryMs)
	}
	pyEnd(t, w, py[1], "release", 0)
}

// interopPauses: a pause set by either side holds the other back, and
// Python's fail of a call the provider refused with a 429 lowers the token
// bucket Go sees. The
// pauses are long (10 and 20 s) so that the checks hold however slow the
// machine; nothing waits them out.
func interopPauses(t *testing.T, w *worker, p *pacer.Pacer) {
	ctx := context.Background()
	a := pyTry(w, "pause", 1000)
	if a.Error != "" {
		t.Fatalf("Python try 1000 = %+v", a)
	}
	if f := w.do(map[string]any{"op": "fail", "lease": a.Lease, "kind": "rate_limited", "retry_after": 10, "limit": "tokens"}); f.Error != "" || f.State != "released" {
		t.Fatalf("Python fail(rate_limited, 10 s, tokens) = %+v; want the lease released", f)
	}
	// The token bucket (60,000 and full before) is lowered to hold the
	// refused call's 1000 tokens when the pause ends, and less until then.
	s, err := p.Snapshot(ctx)
	if err != nil || s.Paused <= time.Second || s.Paused > 10*time.Second || s.Rate("tpm").Level > 1000 {
		t.Fatalf("Go Snapshot after Python's rate-limited fail = %+v, %v; want a pause of over 1 s (the fail's 10, not the default), up to 10 s, and at most 1000 tokens", s, err)
	}
	if l, ny := tryGo(t, p, 1); l != nil || ny.Limit != "" {
		t.Fatalf("Go TryAcquire during Python's pause = %v, %v; want ErrWaitTimeout for pause", l, ny)
	}
	if err := p.Pause(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if a := pyTry(w, "pause", 1); a.Error != "not_yet" || a.Limit != "pause" || a.WaitMs <= 10_000 {
		t.Fatalf("Python try during Go's 20 s pause = %+v; want not_yet for pause, over 10 s", a)
	}
	if a := w.do(map[string]any{"op": "snapshot", "budget": "pause"}); a.Error != "" || a.PausedMs <= 10_000 {
		t.Fatalf("Python snapshot during Go's 20 s pause = %+v; want over 10 s paused", a)
	}
}

// waitQueued waits until n callers wait in p's slot queue (the sentinel
// "~" aside), failing the test after a minute: a bound on a stall, not on
// speed.
func waitQueued(t *testing.T, rdb redis.UniversalClient, p *pacer.Pacer, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		ids, err := rdb.ZRange(context.Background(), keysOf(p)[2], 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(slices.DeleteFunc(ids, func(id string) bool { return id == "~" })) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters in the slot queue, not %d, after a minute: %v", len(ids), n, ids)
		}
	}
}

// interopRates: on 100 tokens an hour (at most), 60 input and 60 output
// tokens a minute, each refilling one token a second, each side's split
// reservation refuses the other's call by the rate that lacks most, and
// each side's give-backs admit the other's: by input and output apart
// (SettleUsage), by the total alone on a split reservation (Python's
// settle), and by the total on a reservation not split (Go's Settle,
// which gives an input or output rate back what its charge exceeds the
// total by). The comments give the levels (tokens, input, output) after
// each step. Every refusal holds for at least 25 s, and each snapshot
// tells a give-back from refill for 30 s: the checks hold on a loaded
// machine.
func interopRates(t *testing.T, w *worker, p *pacer.Pacer) {
	ctx := context.Background()
	const hourly, input, output = "tokens/3600s", "input_tokens/60s", "output_tokens/60s"
	pyTrySplit := func(in, out int64) pyAnswer {
		return w.do(map[string]any{"op": "try", "budget": "rates", "input": in, "output": out})
	}
	pyAdmitted := func(a pyAnswer, what string) string {
		t.Helper()
		if a.Error != "" {
			t.Fatalf("Python %s: %s %s", what, a.Error, a.Message)
		}
		return a.Lease
	}
	goTry := func(r pacer.Request, what string, refusedBy string) *pacer.Lease {
		t.Helper()
		l, err := p.TryAcquire(ctx, r)
		var ny *pacer.RefusedError
		switch {
		case refusedBy == "" && err != nil:
			t.Fatalf("Go TryAcquire(%+v) %s: %v; want admitted", r, what, err)
		case refusedBy != "" && (!errors.As(err, &ny) || ny.Limit != refusedBy):
			t.Fatalf("Go TryAcquire(%+v) %s = %v, %v; want ErrWaitTimeout for %s", r, what, l, err, refusedBy)
		}
		return l
	}
	levels := func() map[string]float64 {
		t.Helper()
		s, err := p.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, r := range s.Rates {
			m[r.Rate.Name()] = r.Level
		}
		return m
	}
	atLeast := func(side string, got map[string]float64, want map[string]float64) {
		t.Helper()
		for f, min := range want {
			if got[f] < min-0.01 {
				t.Fatalf("%s snapshot: %s level %.2f, want at least %v (all: %v)", side, f, got[f], min, got)
			}
		}
	}

	l1 := pyAdmitted(pyTrySplit(40, 40), "try 40 in, 40 out of full rates") // 20, 20, 20
	goTry(pacer.Request{Input: 10, Output: 40}, "with 20 tokens and 20 output left", hourly)
	pyEnd := func(lease string, cmd map[string]any) {
		t.Helper()
		cmd["op"], cmd["lease"] = "end", lease
		if a := w.do(cmd); a.Error != "" {
			t.Fatalf("Python end %v: %s %s", cmd, a.Error, a.Message)
		}
	}
	pyEnd(l1, map[string]any{"how": "settle_usage", "input": 10, "output": 5}) // 85, 50, 55
	atLeast("Go", levels(), map[string]float64{hourly: 85, input: 50, output: 55})
	g1 := goTry(pacer.Request{Input: 10, Output: 40}, "after Python's settle_usage", "") // 35, 40, 15
	if a := pyTrySplit(10, 40); a.Error != "not_yet" || a.Limit != output {
		t.Fatalf("Python try 10 in, 40 out with 15 output left = %+v; want not_yet for %s", a, output)
	}
	if err := g1.SettleUsage(ctx, pacer.Usage{Input: 10, Output: 5}); err != nil { // 70, 40, 50
		t.Fatal(err)
	}
	a := w.do(map[string]any{"op": "snapshot", "budget": "rates"})
	if a.Error != "" {
		t.Fatalf("Python snapshot: %s %s", a.Error, a.Message)
	}
	atLeast("Python", a.Levels, map[string]float64{hourly: 70, input: 40, output: 50})
	l2 := pyAdmitted(pyTrySplit(10, 40), "try 10 in, 40 out after Go's SettleUsage") // 20, 30, 10
	goTry(pacer.Request{Tokens: 35}, "of 35 tokens not split, with 10 output left", output)
	pyEnd(l2, map[string]any{"how": "settle", "used": 0})                            // 70, 40, 50
	g2 := goTry(pacer.Request{Tokens: 35}, "after Python's settle of its total", "") // 35, 5, 15
	if err := g2.Settle(ctx, 5); err != nil {                                        // 65, 35, 45
		t.Fatal(err)
	}
	l3 := pyAdmitted(pyTrySplit(20, 40), "try 20 in, 40 out after Go's Settle of its total") // 5, 15, 5
	pyEnd(l3, map[string]any{"how": "release"})
}

// keysOf returns p's Redis keys in the scripts' order (KEYS[1] to KEYS[4]),
// spelled from its Config as internal/wire spells them.
func keysOf(p *pacer.Pacer) []string {
	c := p.Config()
	return wire.Keys(wire.KeyTag(cmp.Or(c.KeyPrefix, wire.DefaultPrefix), c.Name, c.HashTag))
}

// tenantKeyOf returns the key of tenant's hash in p's budget.
func tenantKeyOf(p *pacer.Pacer, tenant string) string {
	return wire.TenantKey(strings.TrimSuffix(keysOf(p)[0], wire.StateSuffix), wire.TenantHash(tenant))
}
