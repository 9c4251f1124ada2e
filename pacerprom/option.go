package pacerprom

import (
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// Defaults used when an option is not given.
const (
	// DefaultScrapeTimeout bounds the Redis reads of one scrape, all
	// budgets together.
	DefaultScrapeTimeout = time.Second
	// DefaultScrapeConcurrency is how many budgets one scrape reads at once.
	DefaultScrapeConcurrency = 4
	// DefaultMaxTenants is how many tenants WithTenantLabel names before
	// the rest are counted as "other".
	DefaultMaxTenants = 100
	// OtherTenant is the tenant label of every tenant past the cap.
	OtherTenant = "other"
)

// The histograms' default buckets, in seconds. They are unexported so that
// no caller can change another's defaults; the options copy what they get.
var (
	// defaultWaitBuckets spans a call admitted at once (the first bucket
	// holds every call that did not wait) to Config.MaxWait's default, a minute.
	defaultWaitBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60}
	// defaultHoldBuckets spans LLM calls from a short completion to a long
	// generation.
	defaultHoldBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
)

// Option changes how New builds a Collector. Every option is a With
// function.
type Option func(*config)

type config struct {
	timeout     time.Duration
	concurrency int
	waitBuckets []float64
	holdBuckets []float64
	tenant      func(pacer.Event) string
	maxTenants  int
}

// WithScrapeTimeout bounds the Redis reads of one scrape, all watched
// budgets together (default DefaultScrapeTimeout). Keep it well below the
// scrape timeout of Prometheus. A budget not read in time is counted as a
// failed read.
func WithScrapeTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithScrapeConcurrency sets how many budgets one scrape reads at once
// (default DefaultScrapeConcurrency): each read is one script call, and
// holds one connection of the budget's Redis client while it runs.
func WithScrapeConcurrency(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.concurrency = n
		}
	}
}

// WithWaitBuckets sets the buckets of llmpacer_wait_seconds, in seconds
// (default 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30 and 60). Put
// your queue-wait SLA on a bucket boundary, so that the share of calls
// above it is exact.
func WithWaitBuckets(b ...float64) Option {
	return func(c *config) { c.waitBuckets = append([]float64(nil), b...) }
}

// WithHoldBuckets sets the buckets of llmpacer_hold_seconds, in seconds
// (default 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300 and 600).
func WithHoldBuckets(b ...float64) Option {
	return func(c *config) { c.holdBuckets = append([]float64(nil), b...) }
}

// WithTenantLabel adds a "tenant" label, the value f returns for the event,
// to every metric counted from events. The first max distinct tenants (by
// first appearance; DefaultMaxTenants if max <= 0) get their own label
// value; every later one is counted as OtherTenant, so that a tenant id
// taken from traffic cannot grow the series without bound. An empty tenant
// is kept as the empty label and does not count toward the cap.
// Scrape-time gauges describe a whole budget and carry no tenant.
//
// f is called synchronously for every event: keep it to reading a field,
// such as the event's tenant once pacer.Event carries one.
func WithTenantLabel(f func(pacer.Event) string, max int) Option {
	return func(c *config) {
		if max <= 0 {
			max = DefaultMaxTenants
		}
		c.tenant, c.maxTenants = f, max
	}
}
