package fakeprovider

import (
	"fmt"
	"time"
)

// decision is the outcome of admitting one call.
type decision struct {
	err     *apiError        // nil when admitted
	id      string           // of an admitted call
	created time.Time        // the provider's clock at admission
	tickets map[string]int64 // each limit's name for the admission, for a refund
	cut     int              // events a stream sends before it is cut; -1: none
	limits  limitState
}

// decide admits c or says why not, charging the limits only on admission.
func (p *Provider) decide(c call) decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.now()
	if e := p.refuse(now, c); e != nil {
		return decision{err: e, limits: p.limitsAt(now)}
	}
	charge, used := c.charge(), c.prompt+c.outputTotal()
	tickets := map[string]int64{}
	for _, need := range p.demands(c) {
		tickets[need.dim] = need.l.take(now, need.n)
	}
	p.quotaUsed += used
	p.stats.admitted(now, charge, used)
	p.endpoint(c.ep).admitted(c)
	p.seq++
	id := fmt.Sprintf(idFormats[c.ep], p.seq)
	return decision{id: id, created: now, tickets: tickets, cut: p.takeCut(c), limits: p.limitsAt(now)}
}

// idFormats are the id shapes of the endpoints' answers.
var idFormats = map[Endpoint]string{
	ChatCompletions:       "chatcmpl-fake%06d",
	Responses:             "resp_fake%06d",
	Completions:           "cmpl-fake%06d",
	Embeddings:            "emb-fake%06d", // not sent: an embeddings answer has no id
	Messages:              "msg_fake%06d",
	GenerateContent:       "fake%06d",
	StreamGenerateContent: "fake%06d",
}

// refund corrects the token and output-token limits when c ends, with
// Config.Refund: the unused part of the output cap goes back. It returns
// the limits as they stand after, for the answer's headers.
func (p *Provider) refund(c call, d decision) limitState {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.now()
	unused := c.maxTokens*c.n - c.outputTotal()
	if unused <= 0 {
		return p.limitsAt(now)
	}
	if p.tokens != nil {
		p.tokens.refund(now, d.tickets[dimTokens], unused)
		p.stats.TokensRefunded += unused
	}
	if p.output != nil {
		p.output.refund(now, d.tickets[dimOutputTokens], unused)
	}
	return p.limitsAt(now)
}

// demand is what a call asks of one limit.
type demand struct {
	dim string // dimTokens, dimInputTokens, dimOutputTokens or dimRequests
	l   limiter
	n   int64
}

// demands lists what c asks of each limit the provider has. Tokens come
// first so that a tie is reported as a token limit, the one callers can
// act on. The input-token limit does not count tokens read from the
// prompt cache, as Anthropic documents for its ITPM; the output-token
// limit counts the output cap, as Anthropic estimates OTPM at the start.
func (p *Provider) demands(c call) []demand {
	var out []demand
	for _, d := range []demand{
		{dimTokens, p.tokens, c.charge()},
		{dimInputTokens, p.input, c.prompt - c.cacheRead},
		{dimOutputTokens, p.output, c.maxTokens * c.n},
		{dimRequests, p.requests, 1},
	} {
		if d.l != nil {
			out = append(out, d)
		}
	}
	return out
}

// refuse returns the error c gets at now, or nil if c is admitted.
// The order of the checks is the order in which a real provider would
// notice: a failing server, then billing, then the rate limits.
func (p *Provider) refuse(now time.Time, c call) *apiError {
	style, es := p.cfg.Style, p.endpoint(c.ep)
	if p.failLeft > 0 {
		p.failLeft--
		p.stats.Faults++
		es.Faults++
		return fault(style, p.failStatus, p.cfg.FaultWait)
	}
	if q := p.cfg.QuotaTokens; p.quotaStop || q > 0 && p.quotaUsed >= q {
		p.stats.QuotaErrors++
		es.QuotaErrors++
		return quotaExceeded(style, c.model)
	}
	needs := p.demands(c)
	for _, need := range needs {
		if need.n > need.l.capacity() {
			p.stats.tooLarge(now)
			es.RateLimited++
			return tooLarge(style, c.model, need.dim, need.l.capacity(), need.n, p.cfg.Window)
		}
	}
	// Every limit must fit; the retry delay is that of the one that frees
	// up last, and the 429 names that limit.
	var (
		wait  time.Duration
		worst demand
	)
	for _, need := range needs {
		if w := need.l.wait(now, need.n); w > wait {
			wait, worst = w, need
		}
	}
	if wait == 0 {
		return nil
	}
	p.stats.rateLimited(now)
	es.RateLimited++
	limit := worst.l.capacity()
	return rateLimited(style, c.model, worst.dim, limit, limit-worst.l.remaining(now), worst.n, p.cfg.Window, wait)
}

// rejectBad counts a malformed call and returns the headers it carries.
func (p *Provider) rejectBad(ep Endpoint) limitState {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.BadRequests++
	p.endpoint(ep).BadRequests++
	return p.limitsAt(p.cfg.now())
}

// listModels counts an answered models list, which charges nothing, and
// returns the headers it carries.
func (p *Provider) listModels() limitState {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.now()
	p.stats.admitted(now, 0, 0)
	p.endpoint(ModelsList).OK++
	return p.limitsAt(now)
}

// limitsAt reads the limits for the rate-limit headers.
func (p *Provider) limitsAt(now time.Time) limitState {
	ls := limitState{at: now}
	for _, d := range []struct {
		l  limiter
		to *dimState
	}{{p.requests, &ls.requests}, {p.tokens, &ls.tokens}, {p.input, &ls.input}, {p.output, &ls.output}} {
		if d.l != nil {
			*d.to = dimState{limit: d.l.capacity(), remaining: d.l.remaining(now), reset: d.l.untilFull(now)}
		}
	}
	return ls
}
