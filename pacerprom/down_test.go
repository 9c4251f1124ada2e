package pacerprom_test

import (
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// timedGather gathers r and says how long it took.
func timedGather(t *testing.T, r prometheus.Gatherer) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := r.Gather(); err != nil {
		t.Fatalf("Gather() = %v; a failed read must not fail the scrape", err)
	}
	return time.Since(start)
}

// With Redis gone, a scrape still succeeds at once: the read's failure is a
// metric, and the budget's state is left out.
func TestScrapeWithRedisDown(t *testing.T) {
	b := redistest.Mini(t)
	b.Mini.SetTime(t0)
	m := pacerprom.New(pacerprom.WithScrapeTimeout(500 * time.Millisecond))
	p := newPacer(t, b, pacer.Config{Name: "chat", Limits: pacer.Limits{RPM: 60}, Observe: m.Observe})
	m.Watch(p)
	r := prometheus.NewPedanticRegistry()
	must(t, r.Register(m))

	b.Mini.Close()
	for range 2 {
		if took := timedGather(t, r); took > 2*time.Second {
			t.Errorf("a scrape with Redis down took %v; want it bounded by the 500ms timeout", took)
		}
	}
	// Two scrapes, and compare's own: three failed reads.
	compare(t, m, `
# HELP llmpacer_snapshot_errors_total Scrape-time reads of a budget that failed or timed out; the budget's state gauges are left out of that scrape.
# TYPE llmpacer_snapshot_errors_total counter
llmpacer_snapshot_errors_total{budget="chat"} 3
# HELP llmpacer_snapshot_success 1 if this scrape read the budget from Redis, 0 if the read failed or timed out.
# TYPE llmpacer_snapshot_success gauge
llmpacer_snapshot_success{budget="chat"} 0
`, "llmpacer_snapshot_errors_total", "llmpacer_snapshot_success", "llmpacer_bucket_level", "llmpacer_in_flight_leases")
}

// A Redis that accepts the read and never answers holds the scrape for the
// timeout and no longer; a budget on a Redis that answers is read as usual
// in the same scrape. The timeout is long enough (2 s) that the read that
// answers never misses it on a loaded machine.
func TestScrapeWithRedisHung(t *testing.T) {
	b := redistest.Mini(t)
	b.Mini.SetTime(t0)
	hungClient := hungRedis(t, b)
	const timeout = 2 * time.Second
	m := pacerprom.New(pacerprom.WithScrapeTimeout(timeout), pacerprom.WithScrapeConcurrency(2))
	hung, err := pacer.New(hungClient, pacer.Config{Name: "hung", Limits: pacer.Limits{RPM: 60}})
	must(t, err)
	m.Watch(hung, newPacer(t, b, pacer.Config{Name: "fine", Limits: pacer.Limits{RPM: 60}}))
	r := prometheus.NewPedanticRegistry()
	must(t, r.Register(m))

	if took := timedGather(t, r); took < timeout/2 || took > timeout+1500*time.Millisecond {
		t.Errorf("a scrape with one Redis hung took %v; want about the %v timeout", took, timeout)
	}
	// One scrape, and compare's own.
	compare(t, m, `
# HELP llmpacer_snapshot_errors_total Scrape-time reads of a budget that failed or timed out; the budget's state gauges are left out of that scrape.
# TYPE llmpacer_snapshot_errors_total counter
llmpacer_snapshot_errors_total{budget="hung"} 2
# HELP llmpacer_snapshot_success 1 if this scrape read the budget from Redis, 0 if the read failed or timed out.
# TYPE llmpacer_snapshot_success gauge
llmpacer_snapshot_success{budget="fine"} 1
llmpacer_snapshot_success{budget="hung"} 0
# HELP llmpacer_bucket_level What a limit's bucket holds now, in its unit (requests or tokens); negative while the budget is in debt. Read from Redis at scrape time.
# TYPE llmpacer_bucket_level gauge
llmpacer_bucket_level{budget="fine",limit="rpm"} 60
`, "llmpacer_snapshot_errors_total", "llmpacer_snapshot_success", "llmpacer_bucket_level")
}

// The timeout bounds the whole scrape, not each read: budgets queued behind
// hung reads fail at the same deadline instead of adding a timeout each.
func TestScrapeTimeoutBoundsAllReads(t *testing.T) {
	b := redistest.Mini(t)
	hungClient := hungRedis(t, b)
	const timeout = time.Second
	m := pacerprom.New(pacerprom.WithScrapeTimeout(timeout), pacerprom.WithScrapeConcurrency(1))
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, name := range names {
		p, err := pacer.New(hungClient, pacer.Config{Name: name, Limits: pacer.Limits{RPM: 60}})
		must(t, err)
		m.Watch(p)
	}
	r := prometheus.NewPedanticRegistry()
	must(t, r.Register(m))
	// One read at a time, a timeout each, would take 8 s.
	if took := timedGather(t, r); took > timeout+3*time.Second {
		t.Errorf("a scrape of %d hung budgets, one at a time, took %v; want about one %v timeout", len(names), took, timeout)
	}
	compare(t, m, `
# HELP llmpacer_snapshot_errors_total Scrape-time reads of a budget that failed or timed out; the budget's state gauges are left out of that scrape.
# TYPE llmpacer_snapshot_errors_total counter
llmpacer_snapshot_errors_total{budget="a"} 2
llmpacer_snapshot_errors_total{budget="b"} 2
llmpacer_snapshot_errors_total{budget="c"} 2
llmpacer_snapshot_errors_total{budget="d"} 2
llmpacer_snapshot_errors_total{budget="e"} 2
llmpacer_snapshot_errors_total{budget="f"} 2
llmpacer_snapshot_errors_total{budget="g"} 2
llmpacer_snapshot_errors_total{budget="h"} 2
`, "llmpacer_snapshot_errors_total")
}

// hungRedis returns a client of b through a proxy that never passes an
// answer on.
func hungRedis(t *testing.T, b redistest.Backend) *redis.Client {
	proxy := redistest.NewProxy(t, b.Addrs[0])
	proxy.Hang(true)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
