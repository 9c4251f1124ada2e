package pacerprom_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerprom"
	"github.com/llmpacer/llmpacer/retry"
)

// A scripted sequence on two budgets, on a still miniredis clock moved by
// whole seconds: every counter, histogram and scrape-time level is exact.
//
// Budget "chat": RPM 60 (one a second), TPM 6000 (100 tokens a second),
// 3 slots. Budget "batch": RPM 60 and TPD 86400 (one token a second).
func TestScriptedSequence(t *testing.T) {
	b := redistest.Mini(t)
	b.Mini.SetTime(t0)
	now := t0
	advance := func(d time.Duration) { now = now.Add(d); b.Mini.SetTime(now) }
	ctx := context.Background()

	m := pacerprom.New(pacerprom.WithWaitBuckets(1), pacerprom.WithHoldBuckets(0.5, 2))
	chat := newPacer(t, b, pacer.Config{Name: "chat", Limits: pacer.Limits{RPM: 60, TPM: 6000, Concurrency: 3}, Observe: m.Observe})
	batch := newPacer(t, b, pacer.Config{Name: "batch", Limits: pacer.Limits{RPM: 60, TPD: 86400}, Observe: m.Observe})
	m.Watch(chat, batch)

	try := func(p *pacer.Pacer, r pacer.Request) *pacer.Lease {
		t.Helper()
		l, err := p.TryAcquire(ctx, r)
		must(t, err)
		return l
	}
	// chat: tpm 6000 → 5000, rpm 60 → 59.
	l1 := try(chat, pacer.Request{Tokens: 1000})
	advance(time.Second)                                                              // tpm 5100, rpm 60 (full)
	must(t, l1.Settle(ctx, 600))                                                      // 400 back: tpm 5500; held 1 s
	l2 := try(chat, pacer.Request{Tokens: 2000})                                      // tpm 3500, rpm 59
	advance(time.Second)                                                              // tpm 3600, rpm 60
	must(t, l2.Settle(ctx, 2500))                                                     // 500 of debt: tpm 3100; held 1 s
	must(t, try(chat, pacer.Request{Tokens: 500}).Fail(ctx, classify.Verdict{}, nil)) // released: tpm 2600, rpm 59; held 0
	must(t, try(chat, pacer.Request{Tokens: 300}).Cancel(ctx))                        // all back: tpm 2600, rpm 59
	if _, err := chat.TryAcquire(ctx, pacer.Request{Tokens: 3000}); !errors.Is(err, pacer.ErrWaitTimeout) {
		t.Fatalf("TryAcquire(3000 of 2600) = %v; want ErrWaitTimeout", err)
	}
	try(chat, pacer.Request{Tokens: 100, Priority: pacer.Batch}) // held: tpm 2500, rpm 58, 1 slot
	must(t, chat.Pause(ctx, 3*time.Second))

	// batch: a call the provider refuses for good, then a quota stop, then
	// a 429 on a call admitted before the stop.
	fail := errors.New("bad request")
	_, err := retry.Run(ctx, batch, pacer.Request{Tokens: 50},
		func(context.Context) (int, error) { return 0, fail }, nil,
		retry.WithClassifier(func(error) classify.Verdict { return classify.Verdict{Kind: classify.Permanent, Status: 400} }), retry.WithNoWait())
	if !errors.Is(err, fail) {
		t.Fatalf("Run(WithNoWait) = %v; want the call's error", err)
	}
	// The rejected call keeps its request (rpm 59) and gives its tokens
	// back (tpd 86400). So does a call out of quota (rpm 57, after the
	// call the 429 answers below), which stops the budget.
	limited := try(batch, pacer.Request{})
	quota := errors.New("insufficient_quota")
	_, err = retry.Run(ctx, batch, pacer.Request{},
		func(context.Context) (int, error) { return 0, quota }, nil,
		retry.WithClassifier(func(error) classify.Verdict { return classify.Verdict{Kind: classify.QuotaExhausted, Status: 429} }), retry.WithNoWait())
	if !errors.Is(err, quota) {
		t.Fatalf("Run(quota) = %v; want the call's error", err)
	}
	if _, err := batch.TryAcquire(ctx, pacer.Request{Tokens: 10}); !errors.Is(err, pacer.ErrQuotaExhausted) {
		t.Fatalf("TryAcquire() while stopped = %v; want ErrQuotaExhausted", err)
	}
	// A 429 on requests for 2 s: rpm is lowered to hold one request when
	// the pause ends, so it reads 1 - 2 = -1 now.
	must(t, limited.Fail(ctx, classify.Verdict{Kind: classify.RateLimited, Status: 429, Limit: classify.LimitRequests, RetryAfter: 2 * time.Second}, nil))

	compare(t, m, `
# HELP llmpacer_admissions_total Leases granted (Admitted events).
# TYPE llmpacer_admissions_total counter
llmpacer_admissions_total{budget="batch",priority="interactive"} 3
llmpacer_admissions_total{budget="chat",priority="batch"} 1
llmpacer_admissions_total{budget="chat",priority="interactive"} 4
# HELP llmpacer_denials_total Calls refused: wait bound too short, no room now for TryAcquire, or the budget stopped (Denied events).
# TYPE llmpacer_denials_total counter
llmpacer_denials_total{budget="batch",limit="quota",priority="interactive"} 1
llmpacer_denials_total{budget="chat",limit="tpm",priority="interactive"} 1
# HELP llmpacer_failures_total Calls that failed (Lease.Fail: retry.Run and RunGroup, the pacerhttp transport), by what the failure means (Ended events with a Verdict).
# TYPE llmpacer_failures_total counter
llmpacer_failures_total{budget="batch",verdict="permanent"} 1
llmpacer_failures_total{budget="batch",verdict="quota_exhausted"} 1
llmpacer_failures_total{budget="batch",verdict="rate_limited"} 1
# HELP llmpacer_throttles_total Provider 429s, each pausing the budget (Paused events from Lease.Fail), by the limit the 429 named (pause: none).
# TYPE llmpacer_throttles_total counter
llmpacer_throttles_total{budget="batch",limit="rpm"} 1
# HELP llmpacer_pauses_total Pauses set or extended: Pause, and every 429 through Lease.Fail (Paused events).
# TYPE llmpacer_pauses_total counter
llmpacer_pauses_total{budget="batch",limit="rpm"} 1
llmpacer_pauses_total{budget="chat",limit="pause"} 1
# HELP llmpacer_stops_total Stops set or extended: quota for an exhausted provider quota, stop for an operator's Stop (Paused events of a stop).
# TYPE llmpacer_stops_total counter
llmpacer_stops_total{budget="batch",limit="quota"} 1
# HELP llmpacer_leases_ended_total Leases ended, by how: settled, released, canceled, expired, rejected (Ended events).
# TYPE llmpacer_leases_ended_total counter
llmpacer_leases_ended_total{budget="batch",end="rejected"} 2
llmpacer_leases_ended_total{budget="batch",end="released"} 1
llmpacer_leases_ended_total{budget="chat",end="canceled"} 1
llmpacer_leases_ended_total{budget="chat",end="released"} 1
llmpacer_leases_ended_total{budget="chat",end="settled"} 2
# HELP llmpacer_reserved_tokens_total Tokens reserved by leases that ended.
# TYPE llmpacer_reserved_tokens_total counter
llmpacer_reserved_tokens_total{budget="batch"} 50
llmpacer_reserved_tokens_total{budget="chat"} 3800
# HELP llmpacer_used_tokens_total Tokens charged for leases that ended: the settled usage, or the reservation of a released or expired lease.
# TYPE llmpacer_used_tokens_total counter
llmpacer_used_tokens_total{budget="batch"} 0
llmpacer_used_tokens_total{budget="chat"} 3600
# HELP llmpacer_refunded_tokens_total Tokens given back as leases ended: reserved but not used.
# TYPE llmpacer_refunded_tokens_total counter
llmpacer_refunded_tokens_total{budget="batch"} 50
llmpacer_refunded_tokens_total{budget="chat"} 700
# HELP llmpacer_debt_tokens_total Tokens used beyond the reservation, charged to the budget as debt.
# TYPE llmpacer_debt_tokens_total counter
llmpacer_debt_tokens_total{budget="batch"} 0
llmpacer_debt_tokens_total{budget="chat"} 500
# HELP llmpacer_wait_seconds Time Acquire waited before a lease was granted.
# TYPE llmpacer_wait_seconds histogram
llmpacer_wait_seconds_bucket{budget="batch",priority="interactive",le="1"} 3
llmpacer_wait_seconds_bucket{budget="batch",priority="interactive",le="+Inf"} 3
llmpacer_wait_seconds_sum{budget="batch",priority="interactive"} 0
llmpacer_wait_seconds_count{budget="batch",priority="interactive"} 3
llmpacer_wait_seconds_bucket{budget="chat",priority="batch",le="1"} 1
llmpacer_wait_seconds_bucket{budget="chat",priority="batch",le="+Inf"} 1
llmpacer_wait_seconds_sum{budget="chat",priority="batch"} 0
llmpacer_wait_seconds_count{budget="chat",priority="batch"} 1
llmpacer_wait_seconds_bucket{budget="chat",priority="interactive",le="1"} 4
llmpacer_wait_seconds_bucket{budget="chat",priority="interactive",le="+Inf"} 4
llmpacer_wait_seconds_sum{budget="chat",priority="interactive"} 0
llmpacer_wait_seconds_count{budget="chat",priority="interactive"} 4
# HELP llmpacer_hold_seconds Time a lease was held, from its turn to its settle, release or rejection.
# TYPE llmpacer_hold_seconds histogram
llmpacer_hold_seconds_bucket{budget="batch",le="0.5"} 3
llmpacer_hold_seconds_bucket{budget="batch",le="2"} 3
llmpacer_hold_seconds_bucket{budget="batch",le="+Inf"} 3
llmpacer_hold_seconds_sum{budget="batch"} 0
llmpacer_hold_seconds_count{budget="batch"} 3
llmpacer_hold_seconds_bucket{budget="chat",le="0.5"} 1
llmpacer_hold_seconds_bucket{budget="chat",le="2"} 3
llmpacer_hold_seconds_bucket{budget="chat",le="+Inf"} 3
llmpacer_hold_seconds_sum{budget="chat"} 2
llmpacer_hold_seconds_count{budget="chat"} 3
# HELP llmpacer_bucket_level What a limit's bucket holds now, in its unit (requests or tokens); negative while the budget is in debt. Read from Redis at scrape time.
# TYPE llmpacer_bucket_level gauge
llmpacer_bucket_level{budget="batch",limit="rpm"} -1
llmpacer_bucket_level{budget="batch",limit="tpd"} 86400
llmpacer_bucket_level{budget="chat",limit="rpm"} 58
llmpacer_bucket_level{budget="chat",limit="tpm"} 2500
# HELP llmpacer_bucket_capacity The most a limit's bucket holds (its burst).
# TYPE llmpacer_bucket_capacity gauge
llmpacer_bucket_capacity{budget="batch",limit="rpm"} 60
llmpacer_bucket_capacity{budget="batch",limit="tpd"} 86400
llmpacer_bucket_capacity{budget="chat",limit="rpm"} 60
llmpacer_bucket_capacity{budget="chat",limit="tpm"} 6000
# HELP llmpacer_bucket_window_seconds The window a limit refers to: 60 for rpm and tpm, 86400 for rpd and tpd.
# TYPE llmpacer_bucket_window_seconds gauge
llmpacer_bucket_window_seconds{budget="batch",limit="rpm"} 60
llmpacer_bucket_window_seconds{budget="batch",limit="tpd"} 86400
llmpacer_bucket_window_seconds{budget="chat",limit="rpm"} 60
llmpacer_bucket_window_seconds{budget="chat",limit="tpm"} 60
# HELP llmpacer_in_flight_leases Concurrency slots held: leases not yet ended or expired, and grants about to be claimed.
# TYPE llmpacer_in_flight_leases gauge
llmpacer_in_flight_leases{budget="batch"} 0
llmpacer_in_flight_leases{budget="chat"} 1
# HELP llmpacer_concurrency_limit The limit on calls in flight; 0 means none.
# TYPE llmpacer_concurrency_limit gauge
llmpacer_concurrency_limit{budget="batch"} 0
llmpacer_concurrency_limit{budget="chat"} 3
# HELP llmpacer_pause_remaining_seconds How long every caller still has to wait for a pause; 0 if not paused.
# TYPE llmpacer_pause_remaining_seconds gauge
llmpacer_pause_remaining_seconds{budget="batch"} 2
llmpacer_pause_remaining_seconds{budget="chat"} 3
# HELP llmpacer_stop_remaining_seconds How long the budget stays stopped unless a probe succeeds or Resume ends it; 0 if not stopped.
# TYPE llmpacer_stop_remaining_seconds gauge
llmpacer_stop_remaining_seconds{budget="batch"} 86400
llmpacer_stop_remaining_seconds{budget="chat"} 0
# HELP llmpacer_stopped 1 while the budget is stopped by this kind of stop: quota (the provider's quota is exhausted) or stop (an operator's Stop).
# TYPE llmpacer_stopped gauge
llmpacer_stopped{budget="batch",limit="quota"} 1
llmpacer_stopped{budget="batch",limit="stop"} 0
llmpacer_stopped{budget="chat",limit="quota"} 0
llmpacer_stopped{budget="chat",limit="stop"} 0
# HELP llmpacer_snapshot_success 1 if this scrape read the budget from Redis, 0 if the read failed or timed out.
# TYPE llmpacer_snapshot_success gauge
llmpacer_snapshot_success{budget="batch"} 1
llmpacer_snapshot_success{budget="chat"} 1
`, "llmpacer_admissions_total", "llmpacer_denials_total", "llmpacer_failures_total", "llmpacer_throttles_total",
		"llmpacer_pauses_total", "llmpacer_stops_total", "llmpacer_leases_ended_total",
		"llmpacer_reserved_tokens_total", "llmpacer_used_tokens_total", "llmpacer_refunded_tokens_total", "llmpacer_debt_tokens_total",
		"llmpacer_wait_seconds", "llmpacer_hold_seconds",
		"llmpacer_bucket_level", "llmpacer_bucket_capacity", "llmpacer_bucket_window_seconds",
		"llmpacer_in_flight_leases", "llmpacer_concurrency_limit", "llmpacer_pause_remaining_seconds",
		"llmpacer_stop_remaining_seconds", "llmpacer_stopped", "llmpacer_snapshot_success")
}

// A provider's 429 that named no limit is a throttle too; a Pause by hand
// is not.
func TestUnnamedThrottleCounts(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	m := pacerprom.New()
	p := newPacer(t, b, pacer.Config{Name: "chat", Limits: pacer.Limits{RPM: 100}, Observe: m.Observe})
	l, err := p.TryAcquire(ctx, pacer.Request{})
	must(t, err)
	must(t, p.Pause(ctx, time.Second))
	must(t, l.Fail(ctx, classify.Verdict{Kind: classify.RateLimited, Status: 429}, nil))
	r := prometheus.NewPedanticRegistry()
	must(t, r.Register(m))
	want := `# HELP llmpacer_throttles_total Provider 429s, each pausing the budget (Paused events from Lease.Fail), by the limit the 429 named (pause: none).
# TYPE llmpacer_throttles_total counter
llmpacer_throttles_total{budget="chat",limit="pause"} 1
`
	if err := testutil.GatherAndCompare(r, strings.NewReader(want), "llmpacer_throttles_total"); err != nil {
		t.Error(err)
	}
}
