package pacerhttp

import (
	"github.com/llmpacer/llmpacer/estimate"
)

// Defaults of the options.
const (
	// DefaultMaxOutput is the output reserved for a call whose body sets no
	// output cap. Such a call may produce up to the model's context, and
	// some providers (Azure OpenAI among them) count a large default
	// against the limit on arrival: set the cap in your requests, or set
	// WithDefaultMaxOutput to the model's real maximum for a strict budget.
	DefaultMaxOutput = 4096
	// DefaultMaxBody is the largest request body the transport reads to
	// estimate; a larger one passes through with the default reservation.
	DefaultMaxBody = 8 << 20
	// DefaultTokens is the reservation of a model call whose body cannot
	// be read or parsed: DefaultMaxOutput plus a modest prompt.
	DefaultTokens = DefaultMaxOutput + 4096
)

// Option changes how NewTransport paces.
type Option func(*config)

type config struct {
	defaultMaxOutput int64
	defaultTokens    int64
	maxBody          int64
	includeUsage     bool
	headerSync       bool
	estimateOpts     []estimate.Option
}

func defaults() config {
	return config{
		defaultMaxOutput: DefaultMaxOutput, defaultTokens: DefaultTokens, maxBody: DefaultMaxBody,
		includeUsage: true, headerSync: true,
	}
}

// WithDefaultMaxOutput sets the output reserved for a call whose body sets
// no output cap (default DefaultMaxOutput). n must be positive.
func WithDefaultMaxOutput(n int64) Option { return func(c *config) { c.defaultMaxOutput = n } }

// WithDefaultTokens sets the reservation of a model call whose body cannot
// be read or parsed: too large, not JSON, not the endpoint's shape
// (default DefaultTokens). n must be positive.
func WithDefaultTokens(n int64) Option { return func(c *config) { c.defaultTokens = n } }

// WithMaxBody sets the largest request body read to estimate (default
// DefaultMaxBody); a larger one is sent as it is, with the default
// reservation. n must be positive.
func WithMaxBody(n int64) Option { return func(c *config) { c.maxBody = n } }

// WithIncludeUsage says whether OpenAI streaming requests that do not ask
// for usage get stream_options.include_usage added (default true). Without
// it such a stream reports no usage, and keeps its whole reservation.
func WithIncludeUsage(on bool) Option { return func(c *config) { c.includeUsage = on } }

// WithHeaderSync says whether the provider's rate-limit headers lower the
// budget when they report less room than it believes (default true; see
// pacer.Sync).
func WithHeaderSync(on bool) Option { return func(c *config) { c.headerSync = on } }

// WithEstimateOptions passes options to every estimate.New the transport
// makes: estimate.WithEncoding for Azure deployments whose names hide the
// model, estimate.WithMargin for a different safety margin.
func WithEstimateOptions(opts ...estimate.Option) Option {
	return func(c *config) { c.estimateOpts = append(c.estimateOpts, opts...) }
}
