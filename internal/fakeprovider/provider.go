package fakeprovider

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Provider is a simulated LLM endpoint. It is an http.Handler: mount it on
// an httptest.Server (or any server) and point a client at that URL.
//
// A call is decided the moment it arrives, in this order: an injected fault
// (Fail), the quota (Config.QuotaTokens, StopQuota), a call too large for
// the token limit, then the request and token limits together. A call is admitted only if it fits both
// limits, so a call refused for tokens does not use up a request slot.
// Only then does the call take its latency and answer; with Config.Refund
// the token limit gets the unused part of max_tokens back at that moment.
//
// A Provider is safe for simultaneous use by multiple goroutines.
type Provider struct {
	cfg Config

	mu         sync.Mutex
	requests   limiter // nil: no request limit
	tokens     limiter // nil: no token limit
	input      limiter // nil: no input-token limit
	output     limiter // nil: no output-token limit
	quotaUsed  int64   // real tokens used since New; ResetStats keeps it
	failLeft   int
	failStatus int
	quotaStop  bool  // StopQuota: every paced call gets the quota error
	cutLeft    int   // CutStreams: streamed answers still to cut
	cutAfter   int   // events each of them sends before the cut
	seq        int64 // numbers the ids of admitted calls
	inFlight   int64
	stats      Stats
	endpoints  map[Endpoint]*EndpointStats // Stats.Endpoints, by pointer
}

// New returns a Provider with full limits, or an error if cfg is invalid.
func New(cfg Config) (*Provider, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	now := cfg.now()
	p := &Provider{cfg: cfg, stats: Stats{Start: now}, endpoints: map[Endpoint]*EndpointStats{}}
	if cfg.RequestLimit > 0 {
		p.requests = newLimiter(cfg.Mode, cfg.RequestLimit, cfg.Window, now)
	}
	if cfg.TokenLimit > 0 {
		p.tokens = newLimiter(cfg.Mode, cfg.TokenLimit, cfg.Window, now)
	}
	if cfg.InputTokenLimit > 0 {
		p.input = newLimiter(cfg.Mode, cfg.InputTokenLimit, cfg.Window, now)
	}
	if cfg.OutputTokenLimit > 0 {
		p.output = newLimiter(cfg.Mode, cfg.OutputTokenLimit, cfg.Window, now)
	}
	return p, nil
}

// Fail makes the next n well-formed calls answer status with the error
// body the simulated provider sends for it: for example 500, 503, or 529
// (Anthropic's overloaded_error). An injected 429 carries a retry-after of
// one second. Failed calls are counted as Faults and charge nothing. Each
// call to Fail replaces the faults still pending; Fail(0, 0) clears them.
// It returns an error for n < 0 or a status outside 400–599.
func (p *Provider) Fail(n int, status int) error {
	if n < 0 {
		return fmt.Errorf("fakeprovider: Fail(%d, %d): negative count", n, status)
	}
	if n > 0 && (status < 400 || status > 599) {
		return fmt.Errorf("fakeprovider: Fail(%d, %d): status is not an HTTP error", n, status)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failLeft, p.failStatus = n, status
	return nil
}

// ServeHTTP answers one call. See the package documentation for the routes
// and the test-only headers.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	style := p.cfg.Style
	rt, apiErr := findRoute(r, style)
	p.enter(rt.ep)
	defer p.leave()
	var c call
	if apiErr == nil && rt.paced() {
		c, apiErr = parseCall(w, r, style, rt)
	}
	if apiErr != nil {
		writeError(w, style, apiErr, p.rejectBad(rt.ep))
		return
	}
	if !rt.paced() {
		writeModels(w, style, p.listModels())
		return
	}
	d := p.decide(c)
	if d.err != nil {
		writeError(w, style, d.err, d.limits)
		return
	}
	if !sleep(r, p.latency(c)) {
		// The client gave up; the call stays charged, as it would be
		// with a real provider.
		return
	}
	if p.cfg.Refund {
		d.limits = p.refund(c, d)
	}
	if c.stream {
		writeStream(w, style, c, d)
		return
	}
	writeAnswer(w, style, c, d)
}

// latency is how long an admitted call takes.
func (p *Provider) latency(c call) time.Duration {
	if p.cfg.LatencyFunc != nil {
		return p.cfg.LatencyFunc(c.usage())
	}
	return p.cfg.Latency
}

// sleep waits d on the wall clock and reports false if the request's
// context ended first.
func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// enter counts a call that has arrived for ep.
func (p *Provider) enter(ep Endpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight++
	p.stats.Calls++
	p.endpoint(ep).Calls++
	p.stats.MaxInFlight = max(p.stats.MaxInFlight, p.inFlight)
}

// leave counts a call that has answered.
func (p *Provider) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight--
}
