package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// style is a provider's error body shape.
type style int

const (
	openAI    style = iota // {"error":{"message","type","param","code"}}
	anthropic              // {"type":"error","error":{"type","message"}}
	azure                  // OpenAI's shape; the key in api-key
	gemini                 // {"error":{"code","message","status"}}; the key in x-goog-api-key
)

// kind is what a refusal says, spelled in each provider's words by write.
type kind int

const (
	kindRate     kind = iota // no turn within the wait bound: 429
	kindQuota                // the budget is stopped for an exhausted quota
	kindInvalid              // a request the proxy cannot take: 400
	kindTooLarge             // a body over the limit: 413
	kindServer               // Redis or the provider unreachable: 5xx
)

// refusal is an answer the proxy gives itself, sending nothing upstream.
type refusal struct {
	status int
	kind   kind
	msg    string
	retry  time.Duration // > 0 adds Retry-After and retry-after-ms
	tokens bool          // a token limit held it back (OpenAI's error.type "tokens")
}

// write answers f in s's body shape, as the provider would: the client's
// SDK reads it (and retries it, or not) as it would the provider's own.
func (s style) write(w http.ResponseWriter, f refusal) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Llmpacer-Refused", strconv.Itoa(f.status))
	if f.retry > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(f.retry.Seconds())), 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(max(f.retry.Milliseconds(), 1), 10))
	}
	w.WriteHeader(f.status)
	var body any
	switch s {
	case anthropic:
		body = map[string]any{"type": "error", "error": map[string]string{"type": f.anthropicType(), "message": f.msg}}
	case gemini:
		body = map[string]any{"error": map[string]any{"code": f.status, "message": f.msg, "status": f.geminiStatus()}}
	default:
		typ, code := f.openAIType()
		body = map[string]any{"error": map[string]any{"message": f.msg, "type": typ, "param": nil, "code": code}}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// openAIType returns OpenAI's error.type and error.code for f.
func (f refusal) openAIType() (string, any) {
	switch f.kind {
	case kindRate:
		if f.tokens {
			return "tokens", "rate_limit_exceeded"
		}
		return "requests", "rate_limit_exceeded"
	case kindQuota:
		return "insufficient_quota", "insufficient_quota"
	case kindServer:
		return "server_error", nil
	}
	return "invalid_request_error", nil
}

// geminiStatus returns the google.rpc.Code name Gemini gives f.
func (f refusal) geminiStatus() string {
	switch f.status {
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusBadGateway:
		return "INTERNAL"
	}
	return "INVALID_ARGUMENT"
}

// anthropicType returns Anthropic's error.type for f.
func (f refusal) anthropicType() string {
	switch f.kind {
	case kindRate:
		return "rate_limit_error"
	case kindTooLarge:
		return "request_too_large"
	case kindServer:
		if f.status == http.StatusServiceUnavailable {
			return "overloaded_error"
		}
		return "api_error"
	}
	return "invalid_request_error" // a low credit balance too, as Anthropic sends it
}

// The provider's own words for an exhausted quota, which SDKs and
// package classify recognise.
const (
	openAIQuota    = "You exceeded your current quota, please check your plan and billing details."
	anthropicQuota = "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."
)

// failed answers a model call the budget refused, or a request that could
// not reach the provider.
func (p *Proxy) failed(w http.ResponseWriter, r *http.Request, rt *route, err error) {
	var (
		refused *pacer.RefusedError
		up      *upstreamError
	)
	retry, _ := pacer.RetryAfter(err)
	errors.As(err, &refused)
	switch {
	case r.Context().Err() != nil:
		// The client has gone: nobody reads an answer.
		p.log.Debug("client gone before the answer", "path", r.URL.EscapedPath())
		w.WriteHeader(499)
	case errors.Is(err, pacer.ErrQuotaExhausted) && errors.Is(err, pacer.ErrStopped):
		msg := openAIQuota
		status := http.StatusTooManyRequests
		if rt.style == anthropic {
			msg, status = anthropicQuota, http.StatusBadRequest
		}
		rt.style.write(w, refusal{status: status, kind: kindQuota, retry: retry,
			msg: fmt.Sprintf("%s (llmpacer: the budget is stopped for every replica since the provider said so; nothing was sent; the next probe is due in %v)", msg, retry.Round(time.Second))})
	case errors.Is(err, pacer.ErrStopped):
		rt.style.write(w, refusal{status: http.StatusTooManyRequests, kind: kindRate, retry: max(retry, time.Millisecond),
			msg: fmt.Sprintf("llmpacer: the budget is stopped by an operator for %v more; nothing was sent", retry.Round(time.Second))})
	case errors.Is(err, pacer.ErrWaitTimeout) && refused != nil:
		rt.style.write(w, refusal{status: http.StatusTooManyRequests, kind: kindRate, retry: max(retry, time.Millisecond), tokens: tokenLimit(refused.Limit),
			msg: fmt.Sprintf("llmpacer: rate limit: no turn within %v (%s needs %v more); nothing was sent. Please try again in %v.", refused.Bound.Round(time.Millisecond), refused.Limit, retry.Round(time.Millisecond), retry.Round(time.Millisecond))})
	case errors.Is(err, pacer.ErrTooLarge):
		rt.style.write(w, refusal{status: http.StatusTooManyRequests, kind: kindRate, tokens: true,
			msg: "llmpacer: Request too large: the request asks for more tokens than the budget's limit holds at once; reduce the prompt or max tokens. " + err.Error()})
	case errors.Is(err, pacer.ErrUnavailable) || redisTimedOut(r, err):
		// The call cannot be paced, so it is not sent; a 429 makes the
		// client's SDK retry it later, as a 5xx would not always.
		p.log.Warn("the budget's Redis is unreachable; the call was answered 429", "provider", rt.name, "err", err.Error())
		rt.style.write(w, refusal{status: http.StatusTooManyRequests, kind: kindRate, retry: outageRetry,
			msg: fmt.Sprintf("llmpacer: the budget's Redis is unreachable, so the call cannot be paced; nothing was sent. Please try again in %v.", outageRetry)})
	case errors.Is(err, errBadModel):
		rt.style.write(w, refusal{status: http.StatusBadRequest, kind: kindInvalid, msg: err.Error()})
	case errors.Is(err, errTooManyBudgets):
		rt.style.write(w, refusal{status: http.StatusServiceUnavailable, kind: kindServer, retry: time.Second, msg: err.Error()})
	case errors.As(err, &up):
		p.log.Warn("the provider did not answer", "provider", rt.name, "err", up.err.Error())
		rt.style.write(w, refusal{status: http.StatusBadGateway, kind: kindServer, msg: "llmpacer proxy: the provider did not answer: " + up.err.Error()})
	default:
		// Redis answered with an error: a fault the operator must fix.
		p.log.Warn("the budget could not be asked", "provider", rt.name, "err", err.Error())
		rt.style.write(w, refusal{status: http.StatusServiceUnavailable, kind: kindServer, retry: time.Second,
			msg: "llmpacer proxy: the budget's Redis refused the call; nothing was sent: " + err.Error()})
	}
}

// outageRetry is the Retry-After of a call refused while Redis is
// unreachable: the outage circuit probes Redis every 200 ms, so a retry a
// second later finds it back if it is.
const outageRetry = time.Second

// redisTimedOut says whether err is a Redis command that ran out of time
// while the client still waits: a Redis that hangs rather than refuses.
func redisTimedOut(r *http.Request, err error) bool {
	return r.Context().Err() == nil && errors.Is(err, context.DeadlineExceeded)
}

// tokenLimit says whether l counts tokens (OpenAI's 429 then says
// "tokens"), not requests, slots or a pause.
func tokenLimit(l string) bool {
	return l == "tpm" || l == "tpd" || strings.Contains(string(l), "tokens")
}
