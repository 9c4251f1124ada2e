package main

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 99, 7 * time.Millisecond},
		{"median of odd", ms(1, 2, 3), 50, 2 * time.Millisecond},
		// Nearest rank: the smallest value with at least half at or below it.
		{"median of even", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p95 of 1..100", ms(hundred...), 95, 95 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p99 of 10", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p100", ms(1, 5, 9), 100, 9 * time.Millisecond},
		{"tiny p", ms(1, 5, 9), 0.001, 1 * time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: percentile(%v, %v) = %v, want %v", tc.name, tc.sorted, tc.p, got, tc.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 120000: "120,000", -1234567: "-1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// The row's counts are the provider's counters, untouched; its failures and
// waits come from the jobs.
func TestFillTakesCountsFromTheProvider(t *testing.T) {
	start := time.Unix(100, 0)
	quota := &fakeprovider.APIError{Response: &http.Response{StatusCode: 429, Header: http.Header{}},
		Body: []byte(`{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota"}}`)}
	results := []jobResult{
		{ran: true, start: start, end: start.Add(3 * time.Second), inCalls: time.Second, attempts: 1},
		{ran: true, start: start, end: start.Add(2 * time.Second), inCalls: time.Second, attempts: 2, priority: pacer.Batch},
		{ran: true, start: start, end: start.Add(time.Second), attempts: 7, err: quota},
		{ran: true, start: start, end: start.Add(time.Second), attempts: 1, err: errors.New("a quota error is not counted without its answer")},
		{ran: true, start: start, end: start.Add(time.Second), attempts: 7, err: errors.New("429 rate limited")},
		{}, // never ran: the run was interrupted
	}
	st := fakeprovider.Stats{Calls: 18, OK: 2, RateLimited: 8, QuotaErrors: 8, TokensAdmitted: 2000, TokensUsed: 1500}
	row := rowResult{Mode: "per-worker", RedisCommands: 12}
	row.fill(st, results, 4*time.Second)
	want := rowResult{
		Mode: "per-worker", RedisCommands: 12, Seconds: 4, Calls: 18, OK: 2, RateLimited: 8, QuotaErrors: 8,
		TokensAdmitted: 2000, TokensUsed: 1500, TokensPerSec: 500,
		Jobs: 6, Failed: 4, QuotaFailed: 1, Attempts: 18, RedisPerJob: 2,
		Wait:        waitStats{N: 5, Failed: 3, P50: 1000, P95: 2000, P99: 2000},
		Interactive: &waitStats{N: 4, Failed: 3, P50: 1000, P95: 2000, P99: 2000},
		Batch:       &waitStats{N: 1, P50: 1000, P95: 1000, P99: 1000},
	}
	if diff := cmp.Diff(want, row, cmpopts.IgnoreUnexported(rowResult{})); diff != "" {
		t.Errorf("fill() mismatch (-want +got):\n%s", diff)
	}
}

func TestPrintTable(t *testing.T) {
	floor := 10.0
	r := scenarioReport{
		Name: "default", About: "the published comparison", Workers: 6, Jobs: 30, JobTokens: 30_000,
		ProviderTokens: 10_000, WindowSeconds: 5, ProviderMode: "token bucket", LatencyMs: 100, Speed: 1,
		Redis: "miniredis (in-process)", FloorSeconds: &floor, floorHow: "(30,000 - 10,000 burst) / 2,000 per s",
		Rows: []rowResult{
			{Mode: "per-worker", Label: "per-worker limiters, 6 retries", Seconds: 7.2, Calls: 102, RateLimited: 78, Failed: 6,
				TokensPerSec: 3333.3, Wait: waitStats{P50: 400, P95: 2900, P99: 2950}},
			{Mode: "shared", Label: "shared budget (llmpacer)", Seconds: 10.12, Calls: 30, TokensPerSec: 2964.4, RedisPerJob: 2.07,
				Wait: waitStats{P50: 2300, P95: 2900, P99: 2900}},
		},
	}
	var b strings.Builder
	printTable(&b, r)
	for _, want := range []string{
		"floor 10.00 s: (30,000 - 10,000 burst) / 2,000 per s",
		"  mode                            seconds  vs floor  calls  429s  failed  tokens/s  redis/job  wait p50   p95    p99\n",
		"  per-worker limiters, 6 retries     7.20    -28.0%    102    78       6     3,333          -     400ms  2.9s  2.95s\n",
		"  shared budget (llmpacer)          10.12     +1.2%     30     0       0     2,964        2.1      2.3s  2.9s   2.9s\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printTable() lacks the line\n%s\ngot:\n%s", want, b.String())
		}
	}
}

// Rows against a refunding provider are measured against its own floor,
// and the header says which provider each floor is for.
func TestPrintTableRefundRows(t *testing.T) {
	floor, refundFloor := 8.0, 7.0
	r := scenarioReport{
		Name: "mixed", About: "refunds matter", Workers: 16, Jobs: 100, JobTokens: 1_000_000,
		ProviderTokens: 300_000, WindowSeconds: 2.5, ProviderMode: "token bucket", LatencyMs: 50, Speed: 2,
		Redis: "miniredis (in-process)", FloorSeconds: &floor, RefundFloorSeconds: &refundFloor, floorHow: "how",
		Rows: []rowResult{
			{Mode: "shared", Label: "no-refund provider, shared, NoRefund", Seconds: 8.08, Calls: 100,
				TokensAdmitted: 1000, TokensUsed: 900},
			{Mode: "shared", Label: "refunding provider, shared, refunds", Seconds: 7.07, Calls: 100, ProviderRefunds: true,
				TokensAdmitted: 1000, TokensUsed: 900, TokensRefunded: 100},
		},
	}
	var b strings.Builder
	printTable(&b, r)
	for _, want := range []string{
		"provider 300,000 tokens per 2.5s, token bucket, with and without refunds, 50ms per call",
		"  floor 8.00 s: how\n  floor 7.00 s against the refunding provider: each call keeps only its real usage\n",
		"  no-refund provider, shared, NoRefund     8.08     +1.0%",
		"  refunding provider, shared, refunds      7.07     +1.0%",
		"    tokens admitted (prompt + max_tokens) 1,000, really used 900\n",
		"    tokens admitted (prompt + max_tokens) 1,000, really used 900, given back by the provider 100\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printTable() lacks\n%s\ngot:\n%s", want, b.String())
		}
	}
}

func TestProgressLine(t *testing.T) {
	var b syncBuffer
	p := newProgress(&b, false)
	p.every = 5 * time.Millisecond
	rec := &recorder{}
	rec.rateLimited.Store(4)
	p.begin("default", "shared budget", 30, rec)
	p.jobDone()
	p.jobDone()
	// Wait for a line rather than sleeping a few ticks: on a loaded
	// machine the ticker may not fire for a while. The seconds are
	// whatever had passed by then.
	line := regexp.MustCompile(`(?m)^storm: default, shared budget: 2/30 jobs, 4 429s, \d+s$`)
	for deadline := time.Now().Add(time.Minute); !line.MatchString(b.String()) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	p.end()
	if !line.MatchString(b.String()) {
		t.Errorf("progress wrote %q; want a line matching %q", b.String(), line)
	}
	q := newProgress(&b, true)
	q.begin("default", "x", 1, rec)
	q.end()
}

// syncBuffer is a strings.Builder safe for the progress goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
