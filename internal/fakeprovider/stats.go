package fakeprovider

import "time"

// maxTimeline bounds the timeline, so a clock that jumps far ahead cannot
// make the provider allocate without limit. Calls after it still count in
// the totals.
const maxTimeline = 24 * 60 * 60

// Stats are the provider's own counters: the ground truth of what it
// admitted and refused. Every arrival counts in Calls and, once answered,
// in exactly one of OK, RateLimited, QuotaErrors, Faults and BadRequests.
// Endpoints splits the same counts by endpoint.
type Stats struct {
	// Start is the provider's clock at New or at the last ResetStats;
	// Timeline[i] covers [Start+i s, Start+(i+1) s).
	Start time.Time
	// Calls is the number of HTTP requests received.
	Calls int64
	// OK is the number of calls admitted, models lists included.
	OK int64
	// RateLimited is the number of 429s from the rate limits, including
	// TooLarge. Injected 429s count as Faults instead.
	RateLimited int64
	// TooLarge is the number of calls refused because their charge
	// exceeds the token limit itself; they are also in RateLimited.
	TooLarge int64
	// QuotaErrors is the number of calls refused for an exhausted quota.
	QuotaErrors int64
	// Faults is the number of calls answered with an injected status.
	Faults int64
	// BadRequests is the number of malformed calls (400, 404, 405).
	BadRequests int64
	// TokensAdmitted is the sum of the charges (prompt + max_tokens) of
	// admitted calls: what the limits counted.
	TokensAdmitted int64
	// TokensUsed is the sum of the real usage (prompt + output) of
	// admitted calls: what the answers report.
	TokensUsed int64
	// TokensRefunded is the unused max_tokens handed back to the token
	// limit when calls ended (Config.Refund), whether or not the limit
	// could still use them.
	TokensRefunded int64
	// StreamsCut is the number of streamed answers cut short by
	// CutStreams; they are also in OK.
	StreamsCut int64
	// MaxInFlight is the largest number of calls being served at once.
	MaxInFlight int64
	// Endpoints has the counters of each endpoint that received a call,
	// NoEndpoint for paths the provider does not serve.
	Endpoints map[Endpoint]EndpointStats
	// Timeline has one entry per second since Start, up to the last
	// second with an admission or a rate-limit 429, at most one day.
	Timeline []Second
}

// Second is one second of the timeline.
type Second struct {
	// TokensAdmitted is the sum of the charges admitted in this second.
	TokensAdmitted int64
	// OK is the number of calls admitted in this second.
	OK int64
	// RateLimited is the number of rate-limit 429s in this second.
	RateLimited int64
}

// EndpointStats are the counters of one endpoint. Calls counts every
// request that reached the provider, well-formed or not; once answered it
// is in exactly one of OK, RateLimited, QuotaErrors, Faults and
// BadRequests. The token counts are the real usage of admitted calls, the
// numbers their answers report.
type EndpointStats struct {
	Calls       int64
	OK          int64
	RateLimited int64 // rate-limit 429s, too-large ones included
	QuotaErrors int64
	Faults      int64
	BadRequests int64
	StreamsCut  int64 // also in OK
	// PromptTokens is the prompt, cached tokens included.
	PromptTokens int64
	// OutputTokens is the output of all choices, reasoning included.
	OutputTokens int64
	// CacheReadTokens and CacheCreationTokens are the parts of
	// PromptTokens read from and written to the prompt cache.
	CacheReadTokens, CacheCreationTokens int64
	// ReasoningTokens is the part of OutputTokens spent reasoning.
	ReasoningTokens int64
}

// admitted counts the admission of c.
func (s *EndpointStats) admitted(c call) {
	s.OK++
	s.PromptTokens += c.prompt
	s.OutputTokens += c.outputTotal()
	s.CacheReadTokens += c.cacheRead
	s.CacheCreationTokens += c.cacheWrite
	s.ReasoningTokens += c.reasoning * c.n
}

// endpoint returns the counters of ep. The caller holds p.mu.
func (p *Provider) endpoint(ep Endpoint) *EndpointStats {
	s := p.endpoints[ep]
	if s == nil {
		s = &EndpointStats{}
		p.endpoints[ep] = s
	}
	return s
}

// Stats returns a copy of the counters.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Timeline = append([]Second(nil), p.stats.Timeline...)
	s.Endpoints = make(map[Endpoint]EndpointStats, len(p.endpoints))
	for ep, es := range p.endpoints {
		s.Endpoints[ep] = *es
	}
	return s
}

// ResetStats zeroes the counters and starts the timeline at the current
// time, for example between two runs of a benchmark. MaxInFlight restarts
// from the calls in flight now. The limits and the quota are not reset:
// they are the provider's state, not its statistics.
func (p *Provider) ResetStats() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats = Stats{Start: p.cfg.now(), MaxInFlight: p.inFlight}
	p.endpoints = map[Endpoint]*EndpointStats{}
}

// admitted counts an admitted call.
func (s *Stats) admitted(now time.Time, charge, used int64) {
	s.OK++
	s.TokensAdmitted += charge
	s.TokensUsed += used
	if sec := s.second(now); sec != nil {
		sec.OK++
		sec.TokensAdmitted += charge
	}
}

// rateLimited counts a 429 from the rate limits.
func (s *Stats) rateLimited(now time.Time) {
	s.RateLimited++
	if sec := s.second(now); sec != nil {
		sec.RateLimited++
	}
}

// tooLarge counts a call that can never fit.
func (s *Stats) tooLarge(now time.Time) {
	s.TooLarge++
	s.rateLimited(now)
}

// second returns the timeline entry for now, growing the timeline as
// needed, or nil outside [Start, Start+maxTimeline s).
func (s *Stats) second(now time.Time) *Second {
	d := now.Sub(s.Start)
	if d < 0 {
		return nil
	}
	i := int64(d / time.Second)
	if i >= maxTimeline {
		return nil
	}
	for int64(len(s.Timeline)) <= i {
		s.Timeline = append(s.Timeline, Second{})
	}
	return &s.Timeline[i]
}
