package pacerprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerprom"
)

// Losing Redis, admitting from the local share and getting Redis back
// show in three metrics: the outage count, the down gauge, and local
// admissions (also counted as admissions).
func TestOutageMetrics(t *testing.T) {
	b := redistest.Mini(t)
	m := pacerprom.New()
	up := make(chan struct{}, 1)
	p := newPacer(t, b, pacer.Config{Name: "chat", Limits: pacer.Limits{Concurrency: 4},
		Outage: pacer.Outage{FailOpen: []string{"concurrency"}, Replicas: 2},
		Observe: func(e pacer.Event) {
			m.Observe(e)
			if e.Kind == pacer.Redis && e.Err == nil { // Redis found again
				up <- struct{}{}
			}
		}})
	ctx := context.Background()
	b.Mini.Close()
	for range 2 {
		l, err := p.TryAcquire(ctx, pacer.Request{})
		must(t, err)
		if !l.Info().Local {
			t.Fatal("a lease admitted with Redis down is not local")
		}
	}
	compare(t, m, `
# HELP llmpacer_local_admissions_total Leases granted by this process's share of the open limits while Redis was down (Admitted events with Local set); also counted in llmpacer_admissions_total.
# TYPE llmpacer_local_admissions_total counter
llmpacer_local_admissions_total{budget="chat",priority="interactive"} 2
# HELP llmpacer_redis_down Whether this process has lost Redis: 1 between a Redis event with Err and the one without that follows it, else 0.
# TYPE llmpacer_redis_down gauge
llmpacer_redis_down{budget="chat"} 1
# HELP llmpacer_redis_down_total Times this process lost Redis and failed open or closed (Redis events with Err).
# TYPE llmpacer_redis_down_total counter
llmpacer_redis_down_total{budget="chat"} 1
`, "llmpacer_local_admissions_total", "llmpacer_redis_down", "llmpacer_redis_down_total")
	must(t, b.Mini.Restart())
	select {
	case <-up:
	case <-time.After(5 * time.Second):
		t.Fatal("no Redis event without Err within 5s of Redis answering")
	}
	compare(t, m, `
# HELP llmpacer_redis_down Whether this process has lost Redis: 1 between a Redis event with Err and the one without that follows it, else 0.
# TYPE llmpacer_redis_down gauge
llmpacer_redis_down{budget="chat"} 0
`, "llmpacer_redis_down")
}
