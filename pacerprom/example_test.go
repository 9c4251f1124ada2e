package pacerprom_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
)

// Count a budget's events, read its levels at every scrape, and serve them
// on /metrics.
func ExampleNew() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: exact output
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	m := pacerprom.New()
	p, err := pacer.New(rdb, pacer.Config{
		Name:    "openai:gpt-4o-mini",
		Limits:  pacer.Limits{RPM: 500, TPM: 200_000},
		Observe: m.Observe, // or func(e pacer.Event) { m.Observe(e); logEvent(e) }, logEvent := pacer.SlogObserver(logger)
	})
	if err != nil {
		panic(err)
	}
	m.Watch(p) // read at scrape time: levels, slots, pause, stop
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	// In a server: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	ctx := context.Background()
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 1300})
	if err != nil {
		panic(err)
	}
	if err := l.Settle(ctx, 420); err != nil {
		panic(err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) // a scrape
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	for s := bufio.NewScanner(resp.Body); s.Scan(); {
		for _, name := range []string{"llmpacer_admissions_total", "llmpacer_used_tokens_total", "llmpacer_refunded_tokens_total", "llmpacer_bucket_level"} {
			if strings.HasPrefix(s.Text(), name+"{") {
				fmt.Println(s.Text())
			}
		}
	}
	// Output:
	// llmpacer_admissions_total{budget="openai:gpt-4o-mini",priority="interactive"} 1
	// llmpacer_bucket_level{budget="openai:gpt-4o-mini",limit="rpm"} 499
	// llmpacer_bucket_level{budget="openai:gpt-4o-mini",limit="tpm"} 199580
	// llmpacer_refunded_tokens_total{budget="openai:gpt-4o-mini"} 880
	// llmpacer_used_tokens_total{budget="openai:gpt-4o-mini"} 420
}

// Label events by tenant, at most 100 of them: every later tenant is
// counted as "other", so ids taken from traffic cannot grow the series
// without bound. Event has no tenant field yet; the function reads whatever
// identifies the tenant.
func ExampleWithTenantLabel() {
	tenant := func(e pacer.Event) string { return fmt.Sprint("customer-", e.Tokens) } // stands in for the event's tenant
	m := pacerprom.New(pacerprom.WithTenantLabel(tenant, 100))
	for i := range 150 {
		m.Observe(pacer.Event{Kind: pacer.Admitted, Name: "chat", Tokens: int64(i)})
	}
	fmt.Println(testutil.CollectAndCount(m, "llmpacer_admissions_total"), "series")
	// Output: 101 series
}
