package fakeprovider

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// geminiQuotaRetry is the RetryInfo of Gemini's per-day quota 429: the
// real API attaches a delay of seconds even though the quota resets at
// midnight Pacific time, which is why a client must read the quota id.
const geminiQuotaRetry = 12 * time.Second

const geminiRateLinks = "For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."

// geminiQuota makes e Gemini's RESOURCE_EXHAUSTED for the limit of dim
// over window: its google.rpc.QuotaFailure names the quota the way Gemini
// does, per minute or per day, and a limit of 0 leaves the value out.
func geminiQuota(e *apiError, model, dim string, window time.Duration, limit int64) {
	per := "PerMinute"
	if window >= 24*time.Hour {
		per = "PerDay"
	}
	e.quotaValue, e.quotaModel = limit, model
	if dim != dimRequests {
		e.quotaID = "GenerateContentInputTokensPerModel" + per
		e.quotaMetric = "generativelanguage.googleapis.com/generate_content_input_token_count"
	} else {
		e.quotaID = "GenerateRequests" + per + "PerProjectPerModel"
		e.quotaMetric = "generativelanguage.googleapis.com/generate_requests_per_model"
	}
	e.message = "You exceeded your current quota, please check your plan and billing details. " + geminiRateLinks +
		fmt.Sprintf("\n* Quota exceeded for metric: %s, limit: %d, model: %s", e.quotaMetric, limit, model)
}

// geminiFaultMessage is the message Gemini sends with an injected status.
func geminiFaultMessage(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "Resource has been exhausted (e.g. check quota)."
	case status == http.StatusServiceUnavailable || status == 529:
		return "The model is overloaded. Please try again later."
	case status == http.StatusUnauthorized:
		return "API key not valid. Please pass a valid API key."
	case status == http.StatusForbidden:
		return "The caller does not have permission"
	case status >= 500:
		return "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	}
	return http.StatusText(status)
}

// rpcStatus is the google.rpc.Code name Gemini gives an HTTP status.
func rpcStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable, 529:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// geminiErrorBody is Google's error envelope: the HTTP status as a number,
// the google.rpc.Code name, and typed details.
type geminiErrorBody struct {
	Error struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details,omitempty"`
	} `json:"error"`
}

// newGeminiErrorBody renders e, with a QuotaFailure if it names a quota
// and a RetryInfo if waiting helps. Google prints the delay in whole
// seconds, rounded up here so that waiting it is enough.
func newGeminiErrorBody(e *apiError) geminiErrorBody {
	var b geminiErrorBody
	b.Error.Code, b.Error.Message, b.Error.Status = e.status, e.message, rpcStatus(e.status)
	if e.quotaID != "" {
		dims := map[string]string{"location": "global"}
		if e.quotaModel != "" {
			dims["model"] = e.quotaModel
		}
		v := map[string]any{"quotaMetric": e.quotaMetric, "quotaId": e.quotaID, "quotaDimensions": dims}
		if e.quotaValue > 0 {
			v["quotaValue"] = strconv.FormatInt(e.quotaValue, 10)
		}
		b.Error.Details = append(b.Error.Details,
			map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{v}},
			map[string]any{"@type": "type.googleapis.com/google.rpc.Help", "links": []any{map[string]string{
				"description": "Learn more about Gemini API quotas",
				"url":         "https://ai.google.dev/gemini-api/docs/rate-limits"}}})
	}
	if e.retryAfter > 0 {
		secs := ceilDiv(int64(e.retryAfter), int64(time.Second))
		b.Error.Details = append(b.Error.Details, map[string]any{
			"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": strconv.FormatInt(secs, 10) + "s"})
	}
	return b
}
