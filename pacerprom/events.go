package pacerprom

import (
	"errors"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/prometheus/client_golang/prometheus"
)

// eventMetrics are counted from events, by Observe.
type eventMetrics struct {
	admissions, waits, denials, failures *prometheus.CounterVec
	throttles, pauses, stops, resumes    *prometheus.CounterVec
	ended                                *prometheus.CounterVec
	reserved, used, refunded, debt       *prometheus.CounterVec
	wait, hold                           *prometheus.HistogramVec
	// While Redis is down (pacer.Outage): admissions from this process's
	// share, times Redis was lost, and whether it is lost now.
	local, outages *prometheus.CounterVec
	down           *prometheus.GaugeVec
}

func newEventMetrics(cfg config) eventMetrics {
	tenant := cfg.tenant != nil
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		if tenant {
			labels = append(labels, "tenant")
		}
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmpacer_" + name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		if tenant {
			labels = append(labels, "tenant")
		}
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmpacer_" + name, Help: help, Buckets: buckets}, labels)
	}
	return eventMetrics{
		admissions: counter("admissions_total", "Leases granted (Admitted events).", "budget", "priority"),
		waits:      counter("waits_total", "Sleeps in Acquire for a limit without room (Waiting events); a call may sleep more than once.", "budget", "limit", "priority"),
		denials:    counter("denials_total", "Calls refused: wait bound too short, no room now for TryAcquire, or the budget stopped (Denied events).", "budget", "limit", "priority"),
		failures:   counter("failures_total", "Calls that failed (Lease.Fail: retry.Run and RunGroup, the pacerhttp transport), by what the failure means (Ended events with a Verdict).", "budget", "verdict"),
		throttles:  counter("throttles_total", "Provider 429s, each pausing the budget (Paused events from Lease.Fail), by the limit the 429 named (pause: none).", "budget", "limit"),
		pauses:     counter("pauses_total", "Pauses set or extended: Pause, and every 429 through Lease.Fail (Paused events).", "budget", "limit"),
		stops:      counter("stops_total", "Stops set or extended: quota for an exhausted provider quota, stop for an operator's Stop (Paused events of a stop).", "budget", "limit"),
		resumes:    counter("resumes_total", "Stops ended by Resume or by a probe that succeeded (Resumed events).", "budget"),
		ended:      counter("leases_ended_total", "Leases ended, by how: settled, released, canceled, expired, rejected (Ended events).", "budget", "end"),
		reserved:   counter("reserved_tokens_total", "Tokens reserved by leases that ended.", "budget"),
		used:       counter("used_tokens_total", "Tokens charged for leases that ended: the settled usage, or the reservation of a released or expired lease.", "budget"),
		refunded:   counter("refunded_tokens_total", "Tokens given back as leases ended: reserved but not used.", "budget"),
		debt:       counter("debt_tokens_total", "Tokens used beyond the reservation, charged to the budget as debt.", "budget"),
		wait:       histogram("wait_seconds", "Time Acquire waited before a lease was granted.", cfg.waitBuckets, "budget", "priority"),
		hold:       histogram("hold_seconds", "Time a lease was held, from its turn to its settle, release or rejection.", cfg.holdBuckets, "budget"),
		local:      counter("local_admissions_total", "Leases granted by this process's share of the open limits while Redis was down (Admitted events with Local set); also counted in llmpacer_admissions_total.", "budget", "priority"),
		outages:    counter("redis_down_total", "Times this process lost Redis and failed open or closed (Redis events with Err).", "budget"),
		down: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmpacer_redis_down",
			Help: "Whether this process has lost Redis: 1 between a Redis event with Err and the one without that follows it, else 0."}, []string{"budget"}),
	}
}

func (m *eventMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.admissions, m.waits, m.denials, m.failures, m.throttles, m.pauses,
		m.stops, m.resumes, m.ended, m.reserved, m.used, m.refunded, m.debt, m.wait, m.hold,
		m.local, m.outages, m.down}
}

func (m *eventMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

func (m *eventMetrics) collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

// Observe counts one event. Set it as Config.Observe, or chain it with
// others in a closure (func(e pacer.Event) { c.Observe(e); log(e) }). It is safe for simultaneous use, never calls
// Redis and never panics on odd label values.
func (c *Collector) Observe(e pacer.Event) {
	budget := label(e.Name)
	var tenant []string
	if c.tenants != nil {
		tenant = []string{c.tenants.label(c.cfg.tenant(e))}
	}
	lv := func(v ...string) []string { return append(v, tenant...) }
	m := &c.ev
	switch e.Kind {
	case pacer.Admitted:
		m.admissions.WithLabelValues(lv(budget, e.Priority.String())...).Inc()
		m.wait.WithLabelValues(lv(budget, e.Priority.String())...).Observe(e.Wait.Seconds())
		if e.Local {
			m.local.WithLabelValues(lv(budget, e.Priority.String())...).Inc()
		}
	case pacer.Redis:
		if e.Err == nil { // found again
			m.down.WithLabelValues(budget).Set(0)
			break
		}
		m.outages.WithLabelValues(lv(budget)...).Inc()
		m.down.WithLabelValues(budget).Set(1)
	case pacer.Waiting:
		m.waits.WithLabelValues(lv(budget, limitLabel(e), e.Priority.String())...).Inc()
	case pacer.Denied:
		m.denials.WithLabelValues(lv(budget, limitLabel(e), e.Priority.String())...).Inc()
	case pacer.Paused:
		if e.Err != nil { // a stop: Lease.Fail on an exhausted quota, or Stop
			m.stops.WithLabelValues(lv(budget, limitLabel(e))...).Inc()
			break
		}
		m.pauses.WithLabelValues(lv(budget, limitLabel(e))...).Inc()
		// Every provider 429 (Lease.Fail) counts, also one that named no
		// limit (limit "pause"); Pause by hand does not.
		if e.Throttled {
			m.throttles.WithLabelValues(lv(budget, limitLabel(e))...).Inc()
		}
	case pacer.Resumed:
		m.resumes.WithLabelValues(lv(budget)...).Inc()
	case pacer.Ended:
		// A failed call's lease (Lease.Fail) carries its verdict, or at
		// least its error; an expired lease's Err is only its expiry.
		if e.Verdict != (classify.Verdict{}) || e.Err != nil && e.End != pacer.Expired {
			m.failures.WithLabelValues(lv(budget, e.Verdict.Kind.String())...).Inc()
		}
		m.ended.WithLabelValues(lv(budget, e.End.String())...).Inc()
		m.reserved.WithLabelValues(lv(budget)...).Add(float64(max(e.Tokens, 0)))
		m.used.WithLabelValues(lv(budget)...).Add(float64(max(e.Used, 0)))
		m.refunded.WithLabelValues(lv(budget)...).Add(float64(max(e.Tokens-e.Used, 0)))
		m.debt.WithLabelValues(lv(budget)...).Add(float64(max(e.Used-e.Tokens, 0)))
		switch e.End {
		case pacer.Settled, pacer.Released, pacer.Rejected:
			// A canceled lease never ran and an expired one's end is
			// unknown: both report no hold time.
			m.hold.WithLabelValues(lv(budget)...).Observe(e.Held.Seconds())
		}
	}
}

// limitLabel is the limit label of e: its Limit, or, where the pacer names
// no limit, what held the call back, in the label values this package
// has always used: "quota" or "stop" for a stop, "none" for an
// unreachable Redis that fails closed as a whole, "pause" for a pause.
func limitLabel(e pacer.Event) string {
	switch {
	case e.Limit != "":
		return label(e.Limit)
	case errors.Is(e.Err, pacer.ErrQuotaExhausted):
		return "quota"
	case errors.Is(e.Err, pacer.ErrStopped):
		return "stop"
	case errors.Is(e.Err, pacer.ErrUnavailable):
		return label("")
	}
	return "pause"
}
