package fakeprovider

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// limitState is what the rate-limit headers of one answer report.
type limitState struct {
	at       time.Time // the provider's clock when the answer was decided
	requests dimState
	tokens   dimState
	input    dimState // Anthropic's input-tokens limit
	output   dimState // Anthropic's output-tokens limit
}

// dimState is one limit as seen by a caller. A zero limit means there is
// no such limit, and its headers are left out.
type dimState struct {
	limit     int64
	remaining int64
	reset     time.Duration // until the limit is back to its initial state
}

// openAIDuration formats d the way OpenAI's x-ratelimit-reset-* headers
// and "Please try again in …" messages do: "20ms" below a second, then
// "1s", "8.64s", "6m0s", "1h0m0s". It rounds up to the millisecond, so
// that waiting the printed time is always enough; at that precision Go's
// Duration.String already has OpenAI's shape.
func openAIDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return ceilMillis(d).String()
}

// ceilMillis rounds d up to a whole number of milliseconds.
func ceilMillis(d time.Duration) time.Duration {
	return time.Duration(ceilDiv(int64(d), int64(time.Millisecond))) * time.Millisecond
}

// setRateHeaders writes the rate-limit headers of the style. Gemini sends
// none: a client learns its limits only from a 429's body.
func setRateHeaders(h http.Header, style Style, ls limitState) {
	if style == Gemini {
		return
	}
	for _, d := range []struct {
		name string
		s    dimState
	}{{dimRequests, ls.requests}, {dimTokens, ls.tokens}, {dimInputTokens, ls.input}, {dimOutputTokens, ls.output}} {
		if d.s.limit == 0 || (style != Anthropic && (d.name == dimInputTokens || d.name == dimOutputTokens)) {
			// OpenAI has no headers for input and output limits.
			continue
		}
		limit, remaining := strconv.FormatInt(d.s.limit, 10), strconv.FormatInt(d.s.remaining, 10)
		if style == Anthropic {
			// Anthropic gives the reset as a moment, not a duration.
			// Rounding up to the second never promises a refill early.
			reset := ls.at.Add(d.s.reset + time.Second - 1).Truncate(time.Second).UTC()
			h.Set("anthropic-ratelimit-"+d.name+"-limit", limit)
			h.Set("anthropic-ratelimit-"+d.name+"-remaining", remaining)
			h.Set("anthropic-ratelimit-"+d.name+"-reset", reset.Format(time.RFC3339))
			continue
		}
		h.Set("x-ratelimit-limit-"+d.name, limit)
		h.Set("x-ratelimit-remaining-"+d.name, remaining)
		h.Set("x-ratelimit-reset-"+d.name, openAIDuration(d.s.reset))
	}
}

// setRetryHeaders writes retry-after in whole seconds, rounded up, and for
// OpenAI also retry-after-ms, rounded up to the millisecond: waiting either
// one is enough for the call to fit.
func setRetryHeaders(h http.Header, style Style, d time.Duration) {
	h.Set("retry-after", strconv.FormatInt(ceilDiv(int64(d), int64(time.Second)), 10))
	if style == OpenAI {
		h.Set("retry-after-ms", strconv.FormatInt(int64(ceilMillis(d)/time.Millisecond), 10))
	}
}

// openAIErrorBody is OpenAI's error envelope.
type openAIErrorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// anthropicErrorBody is Anthropic's error envelope.
type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError writes a refusal with the headers every answer carries.
func writeError(w http.ResponseWriter, style Style, e *apiError, ls limitState) {
	h := w.Header()
	setRateHeaders(h, style, ls)
	if e.allow != "" {
		h.Set("Allow", e.allow)
	}
	if style == Gemini {
		// Gemini's delay is in the body's RetryInfo, not in a header.
		writeJSON(w, e.status, newGeminiErrorBody(e))
		return
	}
	if e.retryAfter > 0 {
		setRetryHeaders(h, style, e.retryAfter)
	}
	if style == Anthropic {
		var b anthropicErrorBody
		b.Type, b.Error.Type, b.Error.Message = "error", e.kind, e.message
		writeJSON(w, e.status, b)
		return
	}
	var b openAIErrorBody
	b.Error.Message, b.Error.Type = e.message, e.kind
	b.Error.Param, b.Error.Code = nullable(e.param), nullable(e.code)
	writeJSON(w, e.status, b)
}

// nullable maps "" to a JSON null.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// writeJSON writes v as the body. The bodies are plain structs that always
// marshal, and once the status is out a write error only means the client
// has gone, so neither error has anyone to go to.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "fakeprovider: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
