package classify

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FromHTTP classifies a provider's HTTP response from its status, headers and
// body. Only the first MaxBodyBytes of body are read. h may be nil.
//
// A status below 400 is OK unless the body carries a provider error
// envelope, which is how a stream reports a failure after a 200 has been
// sent; a status of 0 means "not known" and leaves the decision to the body.
// The body's error code decides over the status (Bedrock rate limits arrive
// as 400 ServiceQuotaExceededException), except that a quota or billing
// signal anywhere wins, because a quota error must never be retried. A 429
// whose body cannot be parsed is RateLimited.
func FromHTTP(status int, h http.Header, body []byte) Verdict {
	return fromHTTPAt(status, h, body, time.Now())
}

// fromHTTPAt is FromHTTP with the clock passed in, for tests.
func fromHTTPAt(status int, h http.Header, body []byte, now time.Time) Verdict {
	return decide(status, h, parseBody(body), now)
}

// decide turns the evidence into a verdict. FromHTTP and FromError both end
// here, so the two agree on every rule.
func decide(status int, h http.Header, env envelope, now time.Time) Verdict {
	if h == nil {
		h = http.Header{}
	}
	if env.awsType == "" {
		env.awsType = awsCode(h.Get("X-Amzn-Errortype"))
	}
	if status == 0 || status < 400 && env.isError() {
		if n := numericStatus(env.errCode); n != 0 {
			status = n
		}
	}
	v := Verdict{
		Status:   status,
		Provider: guessProvider(h, env),
		Message:  cleanMessage(env.message),
	}
	if codes := env.codes(); len(codes) > 0 {
		v.Code = clip(codes[0], MaxMessageLen)
	}
	if status > 0 && status < 400 && !env.isError() {
		return Verdict{Status: status, Provider: v.Provider}
	}
	v.Kind = kindOf(status, env)

	limits := ParseHeaders(h, now)
	if v.Kind == RateLimited || v.Kind == QuotaExhausted {
		v.Limit = limitOf(env, limits)
	}
	if v.Kind.Retryable() {
		v.RetryAfter = retryAfterOf(h, env, limits, v.Kind, now)
	}
	return v
}

// kindOf applies the rules in order; the order is the policy.
func kindOf(status int, env envelope) Kind {
	codes := env.codes()
	// 1. Money or a hard quota, by code or status. Checked first because
	// OpenAI sends insufficient_quota as a 429, which on its own reads as a
	// retryable rate limit.
	if anyQuotaCode(codes) || status == 402 {
		return QuotaExhausted
	}
	// 2. Gemini names the violated quota; a daily one will not clear within
	// any retry.
	if perDayQuota(env.quotaIDs) {
		return QuotaExhausted
	}
	// 3. A message that says credits or quota ran out, for providers that
	// report it under a generic code (Anthropic's 400 "credit balance is too
	// low"). Not over a rate-limit code, not for 5xx, and not for Gemini,
	// whose per-minute 429 message also says "exceeded your current quota".
	k, known := codeKind(codes)
	if env.rpcStatus == "" && !(known && k == RateLimited) &&
		(status == 0 || status >= 400 && status < 500) && mentionsQuota(env.message) {
		return QuotaExhausted
	}
	// 4. The provider's code. A generic server-error code is refined to
	// Overloaded when the status (503, 529) or message says so: OpenAI's
	// "engine is currently overloaded" is a 503 with type server_error.
	if known {
		if k == Transient && (statusKind(status) == Overloaded || mentionsOverload(env.message)) {
			return Overloaded
		}
		return k
	}
	// 5. The status alone.
	if status != 0 {
		k := statusKind(status)
		if k == Transient && mentionsOverload(env.message) {
			return Overloaded
		}
		return k
	}
	// 6. No status and no code: only the message is left.
	if mentionsOverload(env.message) {
		return Overloaded
	}
	return Permanent
}

// mentionsOverload reports whether a message says the provider is
// overloaded. The error isn't typed specifically, so we resort to matching
// on the message text.
func mentionsOverload(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "overloaded")
}

// numericStatus reads an HTTP status from a code such as Gemini's 429 or
// Azure's "429"; 0 when it is not one.
func numericStatus(code string) int {
	n, err := strconv.Atoi(code)
	if err != nil || n < 100 || n > 599 {
		return 0
	}
	return n
}

// limitOf says which limit tripped: a structured body field first, then an
// exhausted window in the headers, then (last resort) the message text.
func limitOf(env envelope, rl RateLimits) Limit {
	switch strings.ToLower(env.errType) {
	case "tokens", "tokens_usage_based":
		return LimitTokens
	case "requests":
		return LimitRequests
	}
	for _, id := range env.quotaIDs {
		if l := limitFromQuota(id); l != LimitUnknown {
			return l
		}
	}
	if l, _, _, ok := rl.exhaustedWindow(); ok {
		return l
	}
	return limitFromMessage(env.message)
}

// squash removes separators so that "input_token", "InputTokens" and
// "input tokens" all read "inputtoken".
var squash = strings.NewReplacer("_", "", "-", "", " ", "")

// limitFromQuota reads the limit from a Gemini quota id
// ("GenerateContentInputTokensPerModelPerMinute-FreeTier") or metric
// ("generativelanguage.googleapis.com/generate_content_free_tier_requests").
func limitFromQuota(id string) Limit {
	l := squash.Replace(strings.ToLower(id))
	switch {
	case strings.Contains(l, "inputtoken"):
		return LimitInputTokens
	case strings.Contains(l, "outputtoken"):
		return LimitOutputTokens
	case strings.Contains(l, "token"):
		return LimitTokens
	case strings.Contains(l, "request"):
		return LimitRequests
	}
	return LimitUnknown
}

// limitFromMessage finds a limit named in a message ("50,000 input tokens
// per minute", "exceeded token rate limit", "on requests per min (RPM)").
// Messages aren't typed, so we resort to matching on the text. Tokens are
// checked before requests because Azure's token message starts with
// "Requests to the ... Operation".
func limitFromMessage(msg string) Limit {
	l := squash.Replace(strings.ToLower(msg))
	switch {
	case strings.Contains(l, "inputtokens"):
		return LimitInputTokens
	case strings.Contains(l, "outputtokens"):
		return LimitOutputTokens
	case strings.Contains(l, "tokensper"), strings.Contains(l, "tokenratelimit"),
		strings.Contains(l, "(tpm)"), strings.Contains(l, "(tpd)"):
		return LimitTokens
	case strings.Contains(l, "requestsper"), strings.Contains(l, "callratelimit"),
		strings.Contains(l, "(rpm)"), strings.Contains(l, "(rpd)"):
		return LimitRequests
	}
	return LimitUnknown
}

// retryAfterOf is the longest delay the provider gave anywhere: Retry-After
// style headers and Gemini's RetryInfo. A rate limit with neither falls back
// to the reset of the exhausted window, which is when the provider will
// accept the call again.
func retryAfterOf(h http.Header, env envelope, rl RateLimits, k Kind, now time.Time) time.Duration {
	d, ok := ParseRetryAfter(h, now)
	if rd, rok := parseProtoDuration(env.retryDelay); rok && (!ok || rd > d) {
		d, ok = rd, true
	}
	if !ok && k == RateLimited {
		if _, reset, hasReset, exhausted := rl.exhaustedWindow(); exhausted && hasReset {
			d = reset
		}
	}
	return clampDuration(d)
}
