package classify

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter is the longest delay this package reports. Larger values,
// whether a proxy's garbage or a real "come back tomorrow", are clamped to
// it: a long wait is still conveyed, and a caller can never be told to sleep
// for years.
const MaxRetryAfter = 24 * time.Hour

// maxHeaderValues bounds how many values of one header are looked at, so a
// response with thousands of repeated headers costs no more than a normal one.
const maxHeaderValues = 8

// ParseRetryAfter reads how long the response asks the caller to wait from
// the headers providers use for it:
//
//   - retry-after-ms: milliseconds (OpenAI, Azure OpenAI), fractions allowed;
//   - x-ms-retry-after-ms: milliseconds (Azure);
//   - retry-after: seconds (fractions tolerated) or an HTTP-date.
//
// When several are present and disagree, the longest valid delay wins: it is
// the most conservative reading, and waiting a little too long costs less
// than a second 429 that every process sharing the budget would then see.
// One disagreement is no disagreement at all: providers send retry-after in
// whole seconds rounded up beside the exact retry-after-ms, so a
// retry-after within a second above the millisecond value is taken as that
// rounding, and the precise value wins. Otherwise a 429 asking for 20 ms
// would hold a whole fleet back for a second.
//
// An HTTP-date is measured against the response's own Date header when that
// parses, because both stamps then come from the provider's clock and local
// clock skew cancels out; otherwise against now. A date in the past means
// "retry now" and yields (0, true).
//
// Negative, NaN, infinite and unparseable values are ignored; values above
// MaxRetryAfter are clamped to it. The boolean is false when no header gave
// a valid delay.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	ms, msOK := longest(nil, h, "Retry-After-Ms", "X-Ms-Retry-After-Ms")
	base := responseTime(h, now)
	secs, secsOK := longest(&base, h, "Retry-After")
	switch {
	case msOK && secsOK:
		if secs >= ms && secs-ms <= time.Second {
			return ms, true // retry-after is the millisecond value rounded up
		}
		return max(ms, secs), true
	case msOK:
		return ms, true
	default:
		return secs, secsOK
	}
}

// longest returns the longest valid delay among the values of keys. With
// base nil the values are milliseconds; otherwise they are seconds or
// HTTP-dates measured against base.
func longest(base *time.Time, h http.Header, keys ...string) (time.Duration, bool) {
	var best time.Duration
	found := false
	take := func(d time.Duration, ok bool) {
		if ok && (!found || d > best) {
			best, found = d, true
		}
	}
	for _, key := range keys {
		for _, v := range headerValues(h, key) {
			if base == nil {
				for _, part := range splitList(v) {
					take(parseScaled(part, float64(time.Millisecond)))
				}
				continue
			}
			// An HTTP-date contains a comma itself, so try it whole first.
			if t, err := http.ParseTime(strings.TrimSpace(v)); err == nil {
				take(clampDuration(t.Sub(*base)), true)
				continue
			}
			for _, part := range splitList(v) {
				take(parseScaled(part, float64(time.Second)))
			}
		}
	}
	return best, found
}

// headerValues returns at most maxHeaderValues values of key.
func headerValues(h http.Header, key string) []string {
	vs := h.Values(key)
	if len(vs) > maxHeaderValues {
		vs = vs[:maxHeaderValues]
	}
	return vs
}

// splitList splits a comma-joined header value, as a proxy merging two
// responses' headers produces, into at most maxHeaderValues parts.
func splitList(v string) []string {
	return strings.SplitN(v, ",", maxHeaderValues)
}

// responseTime is the instant absolute stamps in h are measured against: the
// Date header when it parses, else now.
func responseTime(h http.Header, now time.Time) time.Time {
	if d := h.Get("Date"); d != "" {
		if t, err := http.ParseTime(d); err == nil {
			return t
		}
	}
	return now
}

// parseScaled parses a non-negative decimal number of units (unit given in
// nanoseconds). It rejects anything strconv.ParseFloat rejects, negatives,
// NaN and infinities, and hex or exponent forms that no provider sends.
func parseScaled(s string, unit float64) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "xXpPeEiInN_") {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	return scaled(f, unit), true
}

// scaled converts f units to a duration, clamped to MaxRetryAfter. The
// comparison happens in float64 so that a huge f cannot overflow int64.
func scaled(f, unit float64) time.Duration {
	ns := f * unit
	if ns >= float64(MaxRetryAfter) {
		return MaxRetryAfter
	}
	return time.Duration(ns)
}

// clampDuration limits d to [0, MaxRetryAfter].
func clampDuration(d time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d > MaxRetryAfter:
		return MaxRetryAfter
	}
	return d
}

// parseGoDuration parses the reset durations OpenAI sends in
// x-ratelimit-reset-* ("6m0s", "1s", "20ms", "7.66s", "1h30m", "0.5s"),
// which are Go's time.Duration format, plus an optional leading day count
// ("1d2h") and a bare number of seconds as Azure OpenAI sends it ("60").
// The result is clamped to MaxRetryAfter.
func parseGoDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return 0, false
	}
	// Bare seconds (Azure) first; a unit letter means it cannot be a
	// number, and a failed ParseFloat allocates its error on every answer.
	if !strings.ContainsAny(s, "hmsuµd") {
		if d, ok := parseScaled(s, float64(time.Second)); ok {
			return d, true
		}
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, false
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return clampDuration(days), true
		}
	}
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, false
	}
	if d > MaxRetryAfter || days >= MaxRetryAfter {
		return MaxRetryAfter, true
	}
	return clampDuration(days + d), true
}

// parseProtoDuration parses a google.protobuf.Duration in its JSON form, as
// Gemini's RetryInfo.retryDelay carries it: decimal seconds with an "s"
// suffix ("37s", "0.5s", "48.805646254s").
func parseProtoDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	num, ok := strings.CutSuffix(s, "s")
	if !ok {
		return 0, false
	}
	return parseScaled(num, float64(time.Second))
}
