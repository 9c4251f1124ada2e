package pacerprom_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Three budgets, each shared by two Pacers (two processes), each Pacer
// called from eight goroutines while scrapes run: run with -race. Slots are
// short (4 a budget for 16 callers), so calls also wait and are woken.
// Every count comes out exact.
func TestManyGoroutinesAndPacers(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	const (
		handles, workers, calls = 2, 8, 10
		tokens                  = 100
	)
	// The test counts, it does not time: a loaded machine may take more
	// than the default second to read six budgets from a busy miniredis.
	m := pacerprom.New(pacerprom.WithScrapeTimeout(time.Minute))
	r := prometheus.NewPedanticRegistry()
	must(t, r.Register(m))

	names := []string{"a", "b", "c"}
	var ps []*pacer.Pacer
	for _, name := range names {
		for range handles {
			p := newPacer(t, b, pacer.Config{Name: name, Limits: pacer.Limits{RPM: 1_000_000, TPM: 100_000_000, Concurrency: 4}, Observe: m.Observe})
			ps = append(ps, p)
			m.Watch(p)
		}
	}

	stop := make(chan struct{})
	var scrapes sync.WaitGroup
	for range 2 {
		scrapes.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := r.Gather(); err != nil {
					t.Errorf("Gather() = %v", err)
					return
				}
			}
		})
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		for range workers {
			wg.Go(func() {
				for range calls {
					l, err := p.Acquire(ctx, pacer.Request{Tokens: tokens})
					if err != nil {
						t.Errorf("Acquire() = %v", err)
						return
					}
					if err := l.Settle(ctx, tokens/4); err != nil {
						t.Errorf("Settle() = %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	scrapes.Wait()

	// Per budget: every call admitted, settled, a quarter of its tokens
	// used; no slot left held; no read failed.
	n := handles * workers * calls
	var want strings.Builder
	for _, metric := range []struct {
		name, help, typ, labels string
		v                       int
	}{
		{"admissions_total", "Leases granted (Admitted events).", "counter", `,priority="interactive"`, n},
		{"leases_ended_total", "Leases ended, by how: settled, released, canceled, expired, rejected (Ended events).", "counter", `,end="settled"`, n},
		{"reserved_tokens_total", "Tokens reserved by leases that ended.", "counter", "", n * tokens},
		{"used_tokens_total", "Tokens charged for leases that ended: the settled usage, or the reservation of a released or expired lease.", "counter", "", n * tokens / 4},
		{"refunded_tokens_total", "Tokens given back as leases ended: reserved but not used.", "counter", "", n * tokens * 3 / 4},
		{"in_flight_leases", "Concurrency slots held: leases not yet ended or expired, and grants about to be claimed.", "gauge", "", 0},
	} {
		fmt.Fprintf(&want, "# HELP llmpacer_%s %s\n# TYPE llmpacer_%s %s\n", metric.name, metric.help, metric.name, metric.typ)
		for _, name := range names {
			fmt.Fprintf(&want, "llmpacer_%s{budget=%q%s} %d\n", metric.name, name, metric.labels, metric.v)
		}
	}
	if err := testutil.GatherAndCompare(r, strings.NewReader(want.String()),
		"llmpacer_admissions_total", "llmpacer_leases_ended_total", "llmpacer_reserved_tokens_total",
		"llmpacer_used_tokens_total", "llmpacer_refunded_tokens_total", "llmpacer_in_flight_leases",
		"llmpacer_snapshot_errors_total"); err != nil {
		t.Error(err)
	}
}

// Observe is on every call's path: it should cost well under a Redis
// round trip.
func BenchmarkObserve(b *testing.B) {
	m := pacerprom.New()
	e := pacer.Event{Kind: pacer.Ended, Name: "chat", Tokens: 1000, Used: 400, Held: time.Second, End: pacer.Settled}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Observe(e)
		}
	})
}
