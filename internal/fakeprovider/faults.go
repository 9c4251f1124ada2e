package fakeprovider

import (
	"fmt"
	"net/http"
)

// StopQuota makes every model call answer the style's quota error until
// ResumeQuota, as if the account's credit had just run out: OpenAI's 429
// insufficient_quota, Anthropic's 400 "credit balance is too low", Gemini's
// per-day 429 RESOURCE_EXHAUSTED. Those calls are counted as QuotaErrors
// and charge nothing. The models list still answers. An injected fault
// (Fail) still comes first.
func (p *Provider) StopQuota() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quotaStop = true
}

// ResumeQuota lifts StopQuota. A quota used up under Config.QuotaTokens
// stays used up.
func (p *Provider) ResumeQuota() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quotaStop = false
}

// CutStreams makes the next n admitted calls that asked for a stream stop
// after sending `after` events: the provider closes the connection
// abruptly, so the client reads an unexpected EOF mid-stream and never
// sees the usage, which comes last. An answer of no more than `after`
// events is cut before its last one, so every cut answer lacks its end.
// The call stays admitted and charged in full, as a real provider counts
// what it generated whether or not the client read it; it is counted in
// OK and in StreamsCut. Each call to CutStreams replaces the cuts still
// pending; CutStreams(0, 0) clears them. It returns an error for a
// negative argument.
func (p *Provider) CutStreams(n, after int) error {
	if n < 0 || after < 0 {
		return fmt.Errorf("fakeprovider: CutStreams(%d, %d): negative argument", n, after)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutLeft, p.cutAfter = n, after
	return nil
}

// takeCut reports how many events an admitted call's stream may send
// before it is cut, or -1 for a whole answer. The caller holds p.mu.
func (p *Provider) takeCut(c call) int {
	if !c.stream || p.cutLeft == 0 {
		return -1
	}
	p.cutLeft--
	p.stats.StreamsCut++
	p.endpoint(c.ep).StreamsCut++
	return p.cutAfter
}

// abort ends the handler without finishing the response. net/http then
// closes the connection without the chunked body's terminator, which the
// client reads as io.ErrUnexpectedEOF; the panic value is the one it
// recovers silently.
func abort() {
	panic(http.ErrAbortHandler)
}
