// Package pacerprom exports llmpacer budgets to Prometheus.
//
// A Collector counts what the budgets do, from the events a Pacer sends to
// Config.Observe, and reads each watched budget's state from Redis when it
// is scraped:
//
//	m := pacerprom.New()
//	cfg.Observe = m.Observe // or, beside a logger: func(e pacer.Event) { m.Observe(e); logEvent(e) }
//	p, err := pacer.New(rdb, cfg)
//	...
//	m.Watch(p)                   // levels, slots, pause and stop, read at scrape time
//	prometheus.MustRegister(m)   // or any prometheus.Registerer
//
// Counters and histograms come from events and cost no Redis call. Each
// scrape reads every watched budget once (Pacer.Snapshot), several at a time
// and all within one timeout, so a scrape costs one script call per budget
// and never waits on Redis past the timeout. A read that fails is counted
// (llmpacer_snapshot_errors_total) and never fails the scrape.
//
// Every metric is named llmpacer_* and carries the budget's name as label
// "budget". Metrics of one limit carry it as "limit" (rpm, tpm, concurrency,
// quota, tokens/3600s...). A tenant label is added only on request
// (WithTenantLabel), with a cap on the tenants it names. docs/operations.md
// lists the metrics and gives alert rules.
//
// The package is apart from package pacer so that only the programs that
// import it depend on client_golang.
package pacerprom
