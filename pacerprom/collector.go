package pacerprom

import (
	"strings"
	"sync"

	"github.com/llmpacer/llmpacer/pacer"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector is a prometheus.Collector for llmpacer budgets. Observe counts
// the events of any number of Pacers; Watch adds a Pacer whose budget is
// read from Redis at every scrape. Register it once, with
// prometheus.MustRegister or a registry of your own.
//
// A Collector is safe for simultaneous use by multiple goroutines.
type Collector struct {
	cfg     config
	tenants *tenantCap // nil without WithTenantLabel
	ev      eventMetrics
	st      stateMetrics

	mu      sync.Mutex
	watched map[string]*pacer.Pacer // by budget name
}

// New returns a Collector. It counts nothing until its Observe is set as
// (or chained into) Config.Observe, and reads no budget until Watch.
func New(opts ...Option) *Collector {
	cfg := config{
		timeout:     DefaultScrapeTimeout,
		concurrency: DefaultScrapeConcurrency,
		waitBuckets: defaultWaitBuckets,
		holdBuckets: defaultHoldBuckets,
	}
	for _, o := range opts {
		o(&cfg)
	}
	c := &Collector{cfg: cfg, watched: map[string]*pacer.Pacer{}}
	if cfg.tenant != nil {
		c.tenants = &tenantCap{max: cfg.maxTenants, seen: map[string]struct{}{}}
	}
	c.ev = newEventMetrics(cfg)
	c.st = newStateMetrics()
	return c
}

// Describe sends the descriptor of every metric the Collector can export.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.ev.describe(ch)
	c.st.describe(ch)
}

// Collect reads every watched budget (see Watch) and sends its state, then
// the counters and histograms of the events observed so far.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	// The reads go first: a failed one increments
	// llmpacer_snapshot_errors_total, which this scrape should show.
	c.collectState(ch)
	c.ev.collect(ch)
	c.st.errors.Collect(ch)
}

// Watch adds Pacers whose budgets every scrape reads from Redis, one
// Pacer.Snapshot each. A Pacer with the name of one already watched
// replaces it: one series per budget name.
func (c *Collector) Watch(ps ...*pacer.Pacer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		if p != nil {
			c.watched[p.Config().Name] = p
		}
	}
}

// Unwatch stops reading the budget of p's name at scrape time. Its event
// counters stay.
func (c *Collector) Unwatch(p *pacer.Pacer) {
	if p == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watched[p.Config().Name] == p {
		delete(c.watched, p.Config().Name)
	}
}

// tenantCap names at most max tenants; the rest read as OtherTenant.
type tenantCap struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
}

func (t *tenantCap) label(v string) string {
	if v == "" {
		return ""
	}
	v = strings.ToValidUTF8(v, "\uFFFD")
	t.mu.RLock()
	_, ok := t.seen[v]
	t.mu.RUnlock()
	if ok {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[v]; ok {
		return v
	}
	if len(t.seen) >= t.max {
		return OtherTenant
	}
	t.seen[v] = struct{}{}
	return v
}

// label makes s safe as a label value: client_golang panics in
// WithLabelValues on invalid UTF-8, and Observe must never panic in the
// caller's goroutine. An empty limit reads as "none".
func label(s string) string {
	if s == "" {
		return "none"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
