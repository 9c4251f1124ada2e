package pacerprom

import (
	"context"

	"github.com/llmpacer/llmpacer/pacer"
	"github.com/prometheus/client_golang/prometheus"
)

// stateMetrics are read from Redis at scrape time, one Snapshot a budget.
type stateMetrics struct {
	level, capacity, limit, window *prometheus.Desc // budget, limit
	inFlight, concurrency          *prometheus.Desc // budget
	paused, stopRemaining          *prometheus.Desc // budget
	stopped                        *prometheus.Desc // budget, limit
	success                        *prometheus.Desc // budget
	errors                         *prometheus.CounterVec
}

func newStateMetrics() stateMetrics {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("llmpacer_"+name, help, labels, nil)
	}
	return stateMetrics{
		level:         desc("bucket_level", "What a limit's bucket holds now, in its unit (requests or tokens); negative while the budget is in debt. Read from Redis at scrape time.", "budget", "limit"),
		capacity:      desc("bucket_capacity", "The most a limit's bucket holds (its burst).", "budget", "limit"),
		limit:         desc("bucket_limit", "A limit per window, after Headroom.", "budget", "limit"),
		window:        desc("bucket_window_seconds", "The window a limit refers to: 60 for rpm and tpm, 86400 for rpd and tpd.", "budget", "limit"),
		inFlight:      desc("in_flight_leases", "Concurrency slots held: leases not yet ended or expired, and grants about to be claimed.", "budget"),
		concurrency:   desc("concurrency_limit", "The limit on calls in flight; 0 means none.", "budget"),
		paused:        desc("pause_remaining_seconds", "How long every caller still has to wait for a pause; 0 if not paused.", "budget"),
		stopRemaining: desc("stop_remaining_seconds", "How long the budget stays stopped unless a probe succeeds or Resume ends it; 0 if not stopped.", "budget"),
		stopped:       desc("stopped", "1 while the budget is stopped by this kind of stop: quota (the provider's quota is exhausted) or stop (an operator's Stop).", "budget", "limit"),
		success:       desc("snapshot_success", "1 if this scrape read the budget from Redis, 0 if the read failed or timed out.", "budget"),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmpacer_snapshot_errors_total",
			Help: "Scrape-time reads of a budget that failed or timed out; the budget's state gauges are left out of that scrape.",
		}, []string{"budget"}),
	}
}

func (m *stateMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.level, m.capacity, m.limit, m.window, m.inFlight,
		m.concurrency, m.paused, m.stopRemaining, m.stopped, m.success} {
		ch <- d
	}
	m.errors.Describe(ch)
}

type read struct {
	name string
	s    pacer.Snapshot
	err  error
}

// collectState reads every watched budget: at most cfg.concurrency at once
// and all within cfg.timeout, then sends what was read. It returns by the
// timeout even if a read does not: a read still running then is counted as
// failed, and its result is dropped (it never touches ch).
func (c *Collector) collectState(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ps := make([]*pacer.Pacer, 0, len(c.watched))
	for _, p := range c.watched {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	if len(ps) == 0 {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.timeout)
	defer cancel()
	sem := make(chan struct{}, c.cfg.concurrency)
	reads := make(chan read, len(ps)) // buffered: a late read never blocks
	for _, p := range ps {
		go func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				reads <- read{name: p.Config().Name, err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			s, err := p.Snapshot(ctx)
			reads <- read{name: p.Config().Name, s: s, err: err}
		}()
	}

	done := make(map[string]bool, len(ps))
	for len(done) < len(ps) {
		select {
		case r := <-reads:
			done[r.name] = true
			c.send(ch, r)
		case <-ctx.Done():
			for _, p := range ps {
				if !done[p.Config().Name] {
					done[p.Config().Name] = true
					c.send(ch, read{name: p.Config().Name, err: ctx.Err()})
				}
			}
		}
	}
}

func (c *Collector) send(ch chan<- prometheus.Metric, r read) {
	m := &c.st
	budget := label(r.name)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{budget}, labels...)...)
	}
	if r.err != nil {
		m.errors.WithLabelValues(budget).Inc()
		gauge(m.success, 0)
		return
	}
	gauge(m.success, 1)
	s := r.s
	for _, b := range s.Rates {
		name := label(b.Rate.Name())
		gauge(m.level, b.Level, name)
		gauge(m.capacity, float64(b.Capacity), name)
		gauge(m.limit, float64(b.Limit), name)
		gauge(m.window, b.Rate.Window.Seconds(), name)
	}
	gauge(m.inFlight, float64(s.InFlight))
	gauge(m.concurrency, float64(s.Concurrency))
	gauge(m.paused, s.Paused.Seconds())
	gauge(m.stopRemaining, s.Stopped.Seconds())
	for _, kind := range []struct {
		label string
		err   error
	}{{"quota", pacer.ErrQuotaExhausted}, {"stop", pacer.ErrStopped}} {
		v := 0.0
		if s.Stopped > 0 && s.StoppedBy == kind.err {
			v = 1
		}
		gauge(m.stopped, v, kind.label)
	}
}
