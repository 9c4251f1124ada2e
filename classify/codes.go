package classify

import "strings"

// codeKinds maps providers' error codes and types, lower-cased, to a Kind.
// Sources: OpenAI and Azure OpenAI error.code/error.type, Anthropic
// error.type and error.details.error_code, Gemini google.rpc status names,
// Bedrock exception names.
var codeKinds = map[string]Kind{
	// Money: never retried.
	"insufficient_quota":           QuotaExhausted, // OpenAI 429
	"billing_hard_limit_reached":   QuotaExhausted, // OpenAI
	"billing_not_active":           QuotaExhausted, // OpenAI
	"credit_balance_exhausted":     QuotaExhausted, // OpenAI
	"billing_error":                QuotaExhausted, // Anthropic 402
	"enforced_spend_limit_reached": QuotaExhausted, // Anthropic 429 details.error_code
	"insufficientquota":            QuotaExhausted, // Azure
	"quotaexceeded":                QuotaExhausted, // Azure API Management call-volume quota
	"quota_exceeded":               QuotaExhausted,

	// Rate limits: pause the shared budget, then retry.
	"rate_limit_exceeded":      RateLimited, // OpenAI code
	"tokens":                   RateLimited, // OpenAI type on a TPM/TPD 429
	"requests":                 RateLimited, // OpenAI type on an RPM/RPD 429
	"rate_limit_error":         RateLimited, // Anthropic
	"ratelimitreached":         RateLimited, // Azure
	"ratelimitexceeded":        RateLimited, // Azure
	"429":                      RateLimited, // Azure puts the status in error.code
	"rate_limited":             RateLimited, // Mistral
	"too_many_requests":        RateLimited,
	"resource_exhausted":       RateLimited, // Gemini; per-day quotas are caught before this table
	"throttlingexception":      RateLimited, // Bedrock
	"toomanyrequestsexception": RateLimited,
	// Bedrock documents ServiceQuotaExceededException (HTTP 400) as "You can
	// resubmit your request later", so it is a rate limit, not exhaustion.
	"servicequotaexceededexception": RateLimited,

	// Provider capacity: back off and retry.
	"overloaded_error":            Overloaded, // Anthropic 529
	"modelnotreadyexception":      Overloaded, // Bedrock
	"serviceunavailableexception": Overloaded, // Bedrock 503
	"unavailable":                 Overloaded, // Gemini 503 "The model is overloaded"

	// Passing server trouble: retry with backoff.
	"api_error":                 Transient, // Anthropic 500
	"server_error":              Transient, // OpenAI 500/503
	"internal_error":            Transient,
	"internal":                  Transient, // Gemini 500
	"deadline_exceeded":         Transient, // Gemini 504: the server's deadline, not the caller's
	"conflict_error":            Transient, // Anthropic 409, documented as retryable
	"internalserverexception":   Transient, // Bedrock 500
	"internalfailure":           Transient, // AWS
	"modeltimeoutexception":     Transient, // Bedrock 408
	"modelstreamerrorexception": Transient, // Bedrock 424 mid-stream
	"timeout":                   Transient,

	// The request is wrong: never retried.
	"invalid_request_error":       Permanent, // Anthropic 400, OpenAI
	"authentication_error":        Permanent, // Anthropic 401
	"permission_error":            Permanent, // Anthropic 403
	"not_found_error":             Permanent, // Anthropic 404
	"request_too_large":           Permanent, // Anthropic 413
	"invalid_api_key":             Permanent, // OpenAI 401
	"context_length_exceeded":     Permanent, // OpenAI 400
	"model_not_found":             Permanent, // OpenAI 404
	"content_filter":              Permanent, // Azure 400
	"invalid_argument":            Permanent, // Gemini 400
	"failed_precondition":         Permanent, // Gemini 400 (region, billing not enabled)
	"permission_denied":           Permanent, // Gemini 403
	"unauthenticated":             Permanent, // Gemini 401
	"not_found":                   Permanent, // Gemini 404
	"validationexception":         Permanent, // Bedrock 400
	"accessdeniedexception":       Permanent, // Bedrock 403
	"resourcenotfoundexception":   Permanent, // Bedrock 404
	"unrecognizedclientexception": Permanent, // AWS bad credentials
	"modelerrorexception":         Permanent, // Bedrock 424: the model failed on this input
}

// codeKind looks the codes up in order and returns the first known kind.
func codeKind(codes []string) (Kind, bool) {
	for _, c := range codes {
		if k, ok := codeKinds[strings.ToLower(c)]; ok {
			return k, true
		}
	}
	return OK, false
}

// anyQuotaCode reports whether any of the codes means money or a hard quota
// ran out.
func anyQuotaCode(codes []string) bool {
	for _, c := range codes {
		if codeKinds[strings.ToLower(c)] == QuotaExhausted {
			return true
		}
	}
	return false
}

// statusKind is the kind an HTTP status implies on its own. It follows the
// official SDKs' retry rules (408, 409, 429 and 5xx are retried) and splits
// out 503 and 529 as provider capacity. Statuses below 400 are OK; 0 (not
// known) and unrecognised 4xx are Permanent, since retrying what we cannot
// recognise risks a retry storm for nothing.
func statusKind(status int) Kind {
	switch {
	case status >= 100 && status < 400:
		return OK
	case status == 429:
		return RateLimited
	case status == 402: // Payment Required: Anthropic billing_error, Gemini
		return QuotaExhausted
	case status == 408, status == 409, status == 425:
		return Transient
	case status == 503, status == 529:
		return Overloaded
	case status >= 500 && status < 600:
		return Transient
	}
	return Permanent
}

// quotaPhrases are message fragments that mean money or a hard quota ran
// out when no code says so: Anthropic reports a low credit balance as a 400
// invalid_request_error, and Azure's call-volume quota has only a message.
// These errors aren't typed specifically, so we resort to matching on the
// message. Gemini is excluded by the caller: its per-minute 429 message also
// says "You exceeded your current quota".
var quotaPhrases = []string{
	"credit balance",
	"exceeded your current quota",
	"api usage limits",
	"spend limit",
	"out of call volume quota",
}

// mentionsQuota reports whether msg contains one of quotaPhrases.
func mentionsQuota(msg string) bool {
	lower := strings.ToLower(msg)
	for _, p := range quotaPhrases {
		if strings.Contains(lower, p) {
			return true
		}
	}
	return false
}

// perDayQuota reports whether one of Gemini's violated quota ids is a daily
// one ("GenerateRequestsPerDayPerProjectPerModel-FreeTier"). A daily quota
// resets at midnight Pacific time, far beyond any retry, so the 429 is
// QuotaExhausted even though Gemini attaches a RetryInfo of a few seconds.
func perDayQuota(ids []string) bool {
	for _, id := range ids {
		if strings.Contains(strings.ToLower(id), "perday") {
			return true
		}
	}
	return false
}
