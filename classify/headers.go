package classify

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Window is one rate limit as the provider reported it in a response: how
// big it is, how much is left, and when it refills. Each field is only
// meaningful when its Has flag is set; an absent or garbled header leaves the
// flag false rather than guessing.
type Window struct {
	// Limit is the window's size in requests or tokens.
	Limit int64
	// Remaining is what is left in the window.
	Remaining int64
	// Reset is how long until the window refills (OpenAI: fully; Anthropic:
	// to the limit), never negative and never above MaxRetryAfter.
	Reset time.Duration

	// HasLimit, HasRemaining and HasReset report which fields were present
	// and valid.
	HasLimit, HasRemaining, HasReset bool
}

// Exhausted reports whether the provider said nothing is left.
func (w Window) Exhausted() bool { return w.HasRemaining && w.Remaining <= 0 }

// RateLimits is what the provider currently believes about the caller's
// limits, as read from one response's headers by ParseHeaders.
type RateLimits struct {
	// Requests is the request-count window.
	Requests Window
	// Tokens is the combined token window (OpenAI, Azure, Anthropic).
	Tokens Window
	// InputTokens and OutputTokens are Anthropic's separate input and output
	// token windows.
	InputTokens, OutputTokens Window
}

// header names for one window: limit, remaining, reset.
type windowHeaders struct{ limit, remaining, reset string }

// ParseHeaders reads the rate-limit headers of OpenAI (and Azure OpenAI,
// which copies them) and Anthropic:
//
//	x-ratelimit-{limit,remaining,reset}-{requests,tokens}
//	anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
//
// OpenAI resets are Go-style durations ("6m0s", "20ms", "7.66s", "1h30m");
// Azure sends bare seconds; Anthropic sends RFC 3339 instants, which are
// measured against the response's Date header when it parses (the
// provider's clock on both sides, so local skew cancels) and against now
// otherwise. A reset in the past is reported as 0.
//
// Absent, negative (Azure sends -1 when it has no figure) or garbled values
// leave the field unknown; ParseHeaders never fails. Where both families are
// present, Anthropic's headers win, being the more specific.
func ParseHeaders(h http.Header, now time.Time) RateLimits {
	base := responseTime(h, now)
	var rl RateLimits
	dst := [...]*Window{&rl.Requests, &rl.Tokens, &rl.Requests, &rl.Tokens, &rl.InputTokens, &rl.OutputTokens}
	for i, names := range rateLimitHeaders {
		readWindow(dst[i], h, base, names)
	}
	return rl
}

// rateLimitHeaders are the windows' header names in the order ParseHeaders
// reads them (OpenAI's, then Anthropic's, which win), built once and in
// canonical form: building and canonicalizing them on each answer cost
// about 24 allocations on the way to a stream's first byte.
var rateLimitHeaders = func() [6]windowHeaders {
	w := [6]windowHeaders{
		{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
		{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
	}
	for i, name := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		p := "Anthropic-Ratelimit-" + name
		w[2+i] = windowHeaders{
			http.CanonicalHeaderKey(p + "-Limit"),
			http.CanonicalHeaderKey(p + "-Remaining"),
			http.CanonicalHeaderKey(p + "-Reset"),
		}
	}
	return w
}()

// readWindow overwrites the fields of w whose headers are present and valid.
func readWindow(w *Window, h http.Header, base time.Time, names windowHeaders) {
	if n, ok := parseCount(h.Get(names.limit)); ok {
		w.Limit, w.HasLimit = n, true
	}
	if n, ok := parseCount(h.Get(names.remaining)); ok {
		w.Remaining, w.HasRemaining = n, true
	}
	if d, ok := parseReset(h.Get(names.reset), base); ok {
		w.Reset, w.HasReset = d, true
	}
}

// parseCount parses a non-negative count. Providers send integers; a float
// such as "1000.0" is accepted and truncated because some proxies re-encode
// numbers that way.
func parseCount(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n >= 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 0 && f < 1<<62) {
		return 0, false
	}
	return int64(f), true
}

// parseReset parses a reset as either an RFC 3339 instant (Anthropic) or a
// duration (OpenAI, Azure), returning the time left from base.
func parseReset(s string, base time.Time) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	// A duration never contains '-' or ':' but an RFC 3339 instant always
	// does, so this picks the parser without trying both.
	if strings.ContainsAny(s, "-:") {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, false
		}
		return clampDuration(t.Sub(base)), true
	}
	return parseGoDuration(s)
}

// exhaustedWindow returns which exhausted window refills last, and when;
// that is the limit actually holding the caller back. ok is false when no
// window is known to be exhausted.
func (rl RateLimits) exhaustedWindow() (lim Limit, reset time.Duration, hasReset, ok bool) {
	for _, c := range []struct {
		w   Window
		lim Limit
	}{
		{rl.InputTokens, LimitInputTokens},
		{rl.OutputTokens, LimitOutputTokens},
		{rl.Tokens, LimitTokens},
		{rl.Requests, LimitRequests},
	} {
		if !c.w.Exhausted() {
			continue
		}
		if !ok || (c.w.HasReset && (!hasReset || c.w.Reset > reset)) {
			lim, ok = c.lim, true
			if c.w.HasReset {
				reset, hasReset = c.w.Reset, true
			}
		}
	}
	return lim, reset, hasReset, ok
}
