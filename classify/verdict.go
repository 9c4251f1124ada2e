package classify

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxMessageLen bounds Verdict.Message in bytes, so that a 10 MB error page
// cannot end up whole in a log line or a metric label.
const MaxMessageLen = 512

// Verdict is what this package concluded about one provider call.
//
// The zero value is the verdict for success: Kind OK and nothing else known.
type Verdict struct {
	// Kind says what to do next; see Retryable.
	Kind Kind

	// RetryAfter is how long the provider asked the caller to wait, taken
	// from Retry-After style headers, Gemini's RetryInfo or, for a rate
	// limit without either, the reset of the exhausted window (an upper
	// bound: providers report when the window is full again). It is 0 when
	// unknown and always 0 when the verdict is not Retryable, so that a
	// delay the provider attached to a quota error never invites a retry.
	// It never exceeds MaxRetryAfter.
	RetryAfter time.Duration

	// Limit is which limit tripped, for RateLimited and QuotaExhausted
	// verdicts; LimitUnknown otherwise.
	Limit Limit

	// Code is the provider's own error code or type, e.g.
	// "rate_limit_exceeded", "insufficient_quota", "overloaded_error",
	// "RESOURCE_EXHAUSTED" or "ThrottlingException"; "" when none was found.
	Code string

	// Status is the HTTP status code, or the code found in the body or error
	// text when the HTTP status was not available; 0 when unknown.
	Status int

	// Provider is a best guess at who answered: "openai", "anthropic",
	// "azure", "gemini", "bedrock", or "" when nothing gave it away.
	Provider string

	// Message is the provider's human-readable message (or the error text),
	// valid UTF-8, whitespace collapsed, at most MaxMessageLen bytes.
	Message string
}

// Retryable reports whether the call may be sent again. It is
// v.Kind.Retryable().
func (v Verdict) Retryable() bool { return v.Kind.Retryable() }

// String formats the verdict for logs, e.g.
// "rate_limited status=429 provider=openai code=rate_limit_exceeded limit=tokens retry_after=6s".
func (v Verdict) String() string {
	var b strings.Builder
	b.WriteString(v.Kind.String())
	if v.Status != 0 {
		b.WriteString(" status=")
		b.WriteString(strconv.Itoa(v.Status))
	}
	if v.Provider != "" {
		b.WriteString(" provider=")
		b.WriteString(v.Provider)
	}
	if v.Code != "" {
		b.WriteString(" code=")
		b.WriteString(v.Code)
	}
	if v.Limit != LimitUnknown {
		b.WriteString(" limit=")
		b.WriteString(v.Limit.String())
	}
	if v.RetryAfter > 0 {
		b.WriteString(" retry_after=")
		b.WriteString(v.RetryAfter.String())
	}
	return b.String()
}

// secretParams are query parameters that carry credentials. Error texts
// quote the request URL (net/http's *url.Error does), and Gemini's REST API
// accepts its key as ?key=..., so a message could otherwise leak a key
// into logs.
var secretParams = []string{"key=", "api-key=", "api_key=", "access_token=", "token=", "sig="}

// cleanMessage is what Verdict.Message holds: s with credentials in URLs
// redacted, clipped to MaxMessageLen.
func cleanMessage(s string) string {
	// clip reads no further than 4*MaxMessageLen bytes, so neither need this.
	if len(s) > 4*MaxMessageLen {
		s = s[:4*MaxMessageLen]
	}
	return clip(redact(s), MaxMessageLen)
}

// redact replaces the values of secretParams that follow '?' or '&' with
// "REDACTED".
func redact(s string) string {
	for _, p := range secretParams {
		var b strings.Builder
		rest := s
		for {
			i := strings.Index(rest, p)
			if i < 0 {
				break
			}
			end := i + len(p)
			if i == 0 || (rest[i-1] != '?' && rest[i-1] != '&') {
				b.WriteString(rest[:end])
				rest = rest[end:]
				continue
			}
			b.WriteString(rest[:end])
			b.WriteString("REDACTED")
			rest = rest[end:]
			if j := strings.IndexAny(rest, "&\"' \t\n"); j >= 0 {
				rest = rest[j:]
			} else {
				rest = ""
			}
		}
		b.WriteString(rest)
		s = b.String()
	}
	return s
}

// clip makes s safe to carry around: valid UTF-8, runs of whitespace and
// control characters collapsed to one space, at most n bytes, cut on a rune
// boundary. It reads at most a few times n bytes of s, so the work is
// bounded whatever the input's size.
func clip(s string, n int) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s) && i < 4*n && b.Len() < n; {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size <= 1 {
			r = unicode.ReplacementChar
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		extra := utf8.RuneLen(r)
		if space {
			extra++
		}
		if b.Len()+extra > n {
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
