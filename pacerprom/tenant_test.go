package pacerprom_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Event carries no tenant yet: these tests take it from the tokens, as a
// label function will take it from the event's tenant once it has one.
func tenantOf(e pacer.Event) string {
	if e.Tokens == 0 {
		return ""
	}
	return fmt.Sprintf("t%d", e.Tokens)
}

// The first tenants seen keep their label; every later one is "other",
// and a tenant named before the cap keeps its label after it.
func TestTenantCap(t *testing.T) {
	m := pacerprom.New(pacerprom.WithTenantLabel(tenantOf, 3))
	admit := func(tokens int64) {
		m.Observe(pacer.Event{Kind: pacer.Admitted, Name: "chat", Tokens: tokens})
	}
	for tokens := int64(1); tokens <= 10; tokens++ {
		admit(tokens)
	}
	admit(1)  // named before the cap
	admit(0)  // no tenant: the empty label, outside the cap
	admit(10) // past the cap

	compare(t, m, `
# HELP llmpacer_admissions_total Leases granted (Admitted events).
# TYPE llmpacer_admissions_total counter
llmpacer_admissions_total{budget="chat",priority="interactive",tenant=""} 1
llmpacer_admissions_total{budget="chat",priority="interactive",tenant="other"} 8
llmpacer_admissions_total{budget="chat",priority="interactive",tenant="t1"} 2
llmpacer_admissions_total{budget="chat",priority="interactive",tenant="t2"} 1
llmpacer_admissions_total{budget="chat",priority="interactive",tenant="t3"} 1
`, "llmpacer_admissions_total")
}

// Under many goroutines and many tenants, the cap holds exactly and no
// event is lost.
func TestTenantCapConcurrent(t *testing.T) {
	const maxTenants, goroutines, tenantsEach = 100, 16, 50
	m := pacerprom.New(pacerprom.WithTenantLabel(tenantOf, maxTenants))
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range tenantsEach {
				m.Observe(pacer.Event{Kind: pacer.Ended, Name: "chat", Tokens: int64(1 + g*tenantsEach + i), End: pacer.Settled})
			}
		})
	}
	wg.Wait()
	// One series a named tenant and one for "other", per metric.
	if n := testutil.CollectAndCount(m, "llmpacer_leases_ended_total"); n != maxTenants+1 {
		t.Errorf("llmpacer_leases_ended_total has %d series; want %d tenants and other", n, maxTenants+1)
	}
	// Which tenants got a label depends on the goroutines' order; the sum
	// and the share of "other" do not.
	r := prometheus.NewPedanticRegistry()
	must(t, r.Register(m))
	mfs, err := r.Gather()
	must(t, err)
	total, other := 0.0, 0.0
	for _, mf := range mfs {
		if mf.GetName() != "llmpacer_leases_ended_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			v := s.GetCounter().GetValue()
			total += v
			for _, l := range s.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == pacerprom.OtherTenant {
					other += v
				}
			}
		}
	}
	if total != goroutines*tenantsEach || other != goroutines*tenantsEach-maxTenants {
		t.Errorf("events counted = %v, of which other = %v; want %d and %d", total, other, goroutines*tenantsEach, goroutines*tenantsEach-maxTenants)
	}
}

// Observe never panics on a label value client_golang would refuse.
func TestObserveOddLabels(t *testing.T) {
	m := pacerprom.New(pacerprom.WithTenantLabel(func(pacer.Event) string { return "bad\xff" }, 0))
	m.Observe(pacer.Event{Kind: pacer.Denied, Name: "chat\xfe"})
	if n := testutil.CollectAndCount(m, "llmpacer_denials_total"); n != 1 {
		t.Errorf("llmpacer_denials_total has %d series; want 1", n)
	}
}

// The metrics follow Prometheus's naming conventions, as promtool checks
// them: units in names, _total on counters, help on every metric.
func TestMetricsLint(t *testing.T) {
	m := pacerprom.New()
	for _, k := range []pacer.EventKind{pacer.Admitted, pacer.Waiting, pacer.Denied, pacer.Ended, pacer.Paused, pacer.Redis, pacer.Resumed} {
		m.Observe(pacer.Event{Kind: k, Name: "chat", Limit: "rpm", End: pacer.Settled})
	}
	m.Watch(newPacer(t, redistest.Mini(t), pacer.Config{Name: "chat", Limits: pacer.Limits{RPM: 60, Concurrency: 2}}))
	problems, err := testutil.CollectAndLint(m)
	must(t, err)
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
