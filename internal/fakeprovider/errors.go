package fakeprovider

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// apiError is a refusal, rendered in the body shape of either style.
type apiError struct {
	status     int
	kind       string // error.type in both styles
	code       string // OpenAI error.code; "" renders as null
	param      string // OpenAI error.param; "" renders as null
	message    string
	retryAfter time.Duration // > 0 adds the retry-after headers
	allow      string        // the Allow header of a 405
	// Gemini's google.rpc.QuotaFailure violation, if any.
	quotaID, quotaMetric, quotaModel string
	quotaValue                       int64
}

// Limit names used in messages and in the OpenAI error.type of a 429.
const (
	dimTokens       = "tokens"
	dimRequests     = "requests"
	dimInputTokens  = "input-tokens"  // Anthropic's header name
	dimOutputTokens = "output-tokens" // Anthropic's header name
)

const (
	openAIOrg       = "org-fakeprovider"
	openAIRateLinks = "Visit https://platform.openai.com/account/rate-limits to learn more."
)

func invalidRequest(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: "invalid_request_error", param: param, message: msg}
}

func belowMinimum(style Style, param string, got int64) *apiError {
	if style == Anthropic {
		return invalidRequest(param, param+": Input should be greater than or equal to 1")
	}
	e := invalidRequest(param, fmt.Sprintf(
		"Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", param, got))
	e.code = "integer_below_min_value"
	return e
}

func notFound(style Style, method, path string) *apiError {
	switch style {
	case Anthropic:
		return &apiError{status: http.StatusNotFound, kind: "not_found_error", message: "Not Found"}
	case Gemini:
		return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("Requested entity was not found: %s %s", method, path)}
	}
	return &apiError{status: http.StatusNotFound, kind: "invalid_request_error",
		message: fmt.Sprintf("Invalid URL (%s %s)", method, path)}
}

func methodNotAllowed(style Style, method, path, allow string) *apiError {
	e := notFound(style, method, path)
	e.status, e.allow = http.StatusMethodNotAllowed, allow
	e.message = fmt.Sprintf("Method %s not allowed on %s; use %s", method, path, allow)
	return e
}

// rateLimited is the 429 for a call that fits later: wait is the exact time
// until it would fit, and limit/used/requested are in units of dim.
func rateLimited(style Style, model, dim string, limit, used, requested int64, window, wait time.Duration) *apiError {
	e := &apiError{status: http.StatusTooManyRequests, retryAfter: wait}
	switch style {
	case Gemini:
		geminiQuota(e, model, dim, window, limit)
		e.message += fmt.Sprintf("\nPlease retry in %gs.", ceilMillis(wait).Seconds())
		return e
	case Anthropic:
		e.kind = "rate_limit_error"
		e.message = fmt.Sprintf("This request would exceed your organization's rate limit of %d %s per %s. "+
			"Please try again in %s, or reduce the prompt length or max_tokens.",
			limit, dimWord(dim), windowWord(window), openAIDuration(wait))
		return e
	}
	e.kind, e.code = openAIKind(dim), "rate_limit_exceeded"
	e.message = fmt.Sprintf("Rate limit reached for %s in organization %s on %s: Limit %d, Used %d, Requested %d. "+
		"Please try again in %s. %s",
		model, openAIOrg, limitName(dim, window), limit, used, requested, openAIDuration(wait), openAIRateLinks)
	return e
}

// tooLarge is the 429 for a call whose charge exceeds the token limit
// itself: it can never fit, so it carries no retry-after. OpenAI answers
// this case with a 429 rate_limit_exceeded whose message starts
// "Request too large".
func tooLarge(style Style, model, dim string, limit, requested int64, window time.Duration) *apiError {
	e := &apiError{status: http.StatusTooManyRequests}
	switch style {
	case Gemini:
		geminiQuota(e, model, dim, window, limit)
		e.message += fmt.Sprintf("\nThis request asks for %d tokens at once.", requested)
		return e
	case Anthropic:
		e.kind = "rate_limit_error"
		e.message = fmt.Sprintf("This request asks for %d %s, more than your organization's rate limit of "+
			"%d %s per %s allows at once. Reduce the prompt length or max_tokens.",
			requested, dimWord(dim), limit, dimWord(dim), windowWord(window))
		return e
	}
	e.kind, e.code = openAIKind(dim), "rate_limit_exceeded"
	e.message = fmt.Sprintf("Request too large for %s in organization %s on %s: Limit %d, Requested %d. "+
		"The input or output tokens must be reduced in order to run successfully. %s",
		model, openAIOrg, limitName(dim, window), limit, requested, openAIRateLinks)
	return e
}

// dimWord spells a limit's name in a message: "input tokens".
func dimWord(dim string) string { return strings.ReplaceAll(dim, "-", " ") }

// openAIKind is the error.type of an OpenAI 429 for a limit of dim:
// "requests" or, for any token limit, "tokens".
func openAIKind(dim string) string {
	if dim == dimRequests {
		return dimRequests
	}
	return dimTokens
}

// quotaExceeded is the answer once the credit is used up. Waiting does not
// help, so there is no retry-after. Anthropic reports an empty balance as a
// 400 invalid_request_error, not a 429. Gemini has no credit to run out
// of: its hard stop is a per-day quota, a 429 whose RetryInfo still says a
// few seconds, as the real one does.
func quotaExceeded(style Style, model string) *apiError {
	switch style {
	case Anthropic:
		return invalidRequest("", "Your credit balance is too low to access the Anthropic API. "+
			"Please go to Plans & Billing to upgrade or purchase credits.")
	case Gemini:
		e := &apiError{status: http.StatusTooManyRequests, retryAfter: geminiQuotaRetry}
		geminiQuota(e, model, dimRequests, 24*time.Hour, 0)
		return e
	}
	return &apiError{status: http.StatusTooManyRequests, kind: "insufficient_quota", code: "insufficient_quota",
		message: "You exceeded your current quota, please check your plan and billing details. " +
			"For more information on this error, read the docs: " +
			"https://platform.openai.com/docs/guides/error-codes/api-errors."}
}

// fault is an injected failure with the body a real provider sends for
// that status. An injected 429 asks for a one-second wait.
func fault(style Style, status int, wait time.Duration) *apiError {
	e := &apiError{status: status}
	switch style {
	case Anthropic:
		e.kind, e.message = anthropicFaultKind(status, wait)
	case Gemini:
		e.message = geminiFaultMessage(status)
	default:
		e.kind, e.message = openAIFaultKind(status, wait)
	}
	if status == http.StatusTooManyRequests {
		e.retryAfter = wait
		switch style {
		case OpenAI:
			e.code = "rate_limit_exceeded"
		case Gemini:
			geminiQuota(e, "", dimRequests, time.Minute, 0)
		}
	}
	return e
}

func anthropicFaultKind(status int, wait time.Duration) (kind, msg string) {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error", "Number of requests has exceeded your rate limit. Please try again in " + wait.String() + "."
	case status == 529 || status == http.StatusServiceUnavailable:
		return "overloaded_error", "Overloaded"
	case status == http.StatusUnauthorized:
		return "authentication_error", "invalid x-api-key"
	case status == http.StatusForbidden:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case status == http.StatusNotFound:
		return "not_found_error", "Not Found"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case status >= 500:
		return "api_error", "Internal server error"
	}
	return "invalid_request_error", http.StatusText(status)
}

func openAIFaultKind(status int, wait time.Duration) (kind, msg string) {
	switch {
	case status == http.StatusTooManyRequests:
		return dimRequests, "Rate limit reached. Please try again in " + wait.String() + ". " + openAIRateLinks
	case status == 529 || status == http.StatusServiceUnavailable:
		return "server_error", "That model is currently overloaded with other requests. You can retry your request."
	case status == http.StatusUnauthorized:
		return "invalid_request_error", "Incorrect API key provided."
	case status >= 500:
		return "server_error", "The server had an error while processing your request. Sorry about that!"
	}
	return "invalid_request_error", http.StatusText(status)
}

// limitName is how OpenAI names a limit in its messages, e.g.
// "tokens per min (TPM)". Other windows than a minute or a day have no
// published name; the window itself is spelled out.
func limitName(dim string, window time.Duration) string {
	abbrev := "T"
	if dim == dimRequests {
		abbrev = "R"
	}
	switch window {
	case time.Minute:
		return dimWord(dim) + " per min (" + abbrev + "PM)"
	case 24 * time.Hour:
		return dimWord(dim) + " per day (" + abbrev + "PD)"
	}
	return dimWord(dim) + " per " + openAIDuration(window)
}

// windowWord spells a window the way Anthropic's messages do.
func windowWord(window time.Duration) string {
	switch window {
	case time.Minute:
		return "minute"
	case 24 * time.Hour:
		return "day"
	}
	return openAIDuration(window)
}
