package classify

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// seedBodies are real provider error bodies plus the hostile shapes the
// classifier must survive.
var seedBodies = []string{
	`{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 10000, Used 9800, Requested 700.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
	`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	`{"type":"error","error":{"type":"rate_limit_error","message":"spend cap","details":{"error_code":"enforced_spend_limit_reached"}}}`,
	`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation have exceeded token rate limit. Please retry after 6 seconds."}}`,
	`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"m_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22s"}]}}`,
	`[{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}]`,
	`{"__type":"com.amazon.coral.service#ThrottlingException","message":"Too many requests"}`,
	"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
	"<html><head><title>502 Bad Gateway</title></head></html>",
	`{"error":{"type":"tokens","code":"rate_limit_exceeded","message":"cut`,
	`{"error":{"retryDelay":"-1s","details":{"retryDelay":"NaNs"}}}`,
	"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{\"error\":{\"code\":\"x\"}}",
	"\xff\xfe\x00garbage",
	"",
}

// seedHeaders are header blocks in "Name: value" lines.
var seedHeaders = []string{
	"Retry-After: 6\nRetry-After-Ms: 4500\nX-Ms-Retry-After-Ms: 6000",
	"Retry-After: Sun, 01 Jun 2025 12:01:00 GMT\nDate: Sun, 01 Jun 2025 12:00:00 GMT",
	"X-Ratelimit-Limit-Tokens: 10000\nX-Ratelimit-Remaining-Tokens: 0\nX-Ratelimit-Reset-Tokens: 1h2m3.5s",
	"Anthropic-Ratelimit-Input-Tokens-Remaining: 0\nAnthropic-Ratelimit-Input-Tokens-Reset: 2025-06-01T12:00:20Z",
	"X-Amzn-Errortype: ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
	"Retry-After: -1\nRetry-After-Ms: NaN\nX-Ratelimit-Reset-Requests: 99999999999h",
	"Retry-After: 1e309\nX-Ratelimit-Remaining-Requests: -1\nDate: garbage",
	"",
}

// parseHeaderBlock turns "Name: value" lines into a header, skipping lines
// without a colon, so the fuzzer can explore header names and values.
func parseHeaderBlock(s string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return h
}

// checkVerdict asserts what must hold for any input.
func checkVerdict(t *testing.T, v Verdict) {
	t.Helper()
	if v.Kind < OK || v.Kind > Canceled {
		t.Errorf("Kind = %d, want a defined kind", int(v.Kind))
	}
	if v.Limit < LimitUnknown || v.Limit > LimitOutputTokens {
		t.Errorf("Limit = %d, want a defined limit", int(v.Limit))
	}
	if v.RetryAfter < 0 || v.RetryAfter > MaxRetryAfter {
		t.Errorf("RetryAfter = %v, want within [0, %v]", v.RetryAfter, MaxRetryAfter)
	}
	if !v.Retryable() && v.RetryAfter != 0 {
		t.Errorf("RetryAfter = %v on a %v verdict, want 0", v.RetryAfter, v.Kind)
	}
	for name, s := range map[string]string{"Message": v.Message, "Code": v.Code} {
		if len(s) > MaxMessageLen || !utf8.ValidString(s) {
			t.Errorf("%s = %q (%d bytes), want valid UTF-8 of at most %d bytes", name, s, len(s), MaxMessageLen)
		}
	}
	switch v.Provider {
	case "", ProviderOpenAI, ProviderAnthropic, ProviderAzure, ProviderGemini, ProviderBedrock:
	default:
		t.Errorf("Provider = %q, want a known provider or empty", v.Provider)
	}
}

// checkWindow asserts what must hold for any parsed window.
func checkWindow(t *testing.T, name string, w Window) {
	t.Helper()
	if w.Limit < 0 || w.Remaining < 0 {
		t.Errorf("%s = %+v, want non-negative counts", name, w)
	}
	if w.Reset < 0 || w.Reset > MaxRetryAfter {
		t.Errorf("%s.Reset = %v, want within [0, %v]", name, w.Reset, MaxRetryAfter)
	}
	if !w.HasLimit && w.Limit != 0 || !w.HasRemaining && w.Remaining != 0 || !w.HasReset && w.Reset != 0 {
		t.Errorf("%s = %+v, want unknown fields left zero", name, w)
	}
}

func FuzzFromHTTP(f *testing.F) {
	for i, b := range seedBodies {
		f.Add(429, seedHeaders[i%len(seedHeaders)], []byte(b))
		f.Add(200+i*25, "", []byte(b))
	}
	f.Fuzz(func(t *testing.T, status int, header string, body []byte) {
		checkVerdict(t, fromHTTPAt(status, parseHeaderBlock(header), body, testNow))
	})
}

func FuzzFromErrorText(f *testing.F) {
	for _, b := range seedBodies {
		f.Add(`POST "https://api.openai.com/v1/chat/completions": 429 Too Many Requests ` + b)
	}
	f.Add("Error 429, Message: quota, Status: RESOURCE_EXHAUSTED, Details: [map[@type:type.googleapis.com/google.rpc.RetryInfo retryDelay:37s] map[violations:[map[quotaId:GenerateRequestsPerDayPerProjectPerModel-FreeTier]]]]")
	f.Add("operation error Bedrock Runtime: InvokeModel, https response error StatusCode: 429, RequestID: r, ThrottlingException: slow")
	f.Add("read tcp 10.0.0.1:1->1.2.3.4:443: read: connection reset by peer")
	f.Add(`Get "http://x": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`)
	f.Fuzz(func(t *testing.T, s string) {
		checkVerdict(t, fromErrorAt(errors.New(s), testNow))
	})
}

func FuzzParseHeaders(f *testing.F) {
	for _, h := range seedHeaders {
		f.Add(h)
	}
	f.Add("Anthropic-Ratelimit-Tokens-Reset: 2025-06-01T12:00:30.250+02:00\nX-Ratelimit-Reset-Requests: 1d2h")
	f.Fuzz(func(t *testing.T, header string) {
		rl := ParseHeaders(parseHeaderBlock(header), testNow)
		checkWindow(t, "Requests", rl.Requests)
		checkWindow(t, "Tokens", rl.Tokens)
		checkWindow(t, "InputTokens", rl.InputTokens)
		checkWindow(t, "OutputTokens", rl.OutputTokens)
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	f.Add("6", "4500", "6000", "")
	f.Add("Sun, 01 Jun 2025 12:01:00 GMT", "", "", "Sun, 01 Jun 2025 12:00:00 GMT")
	f.Add("-2", "NaN", "+Inf", "garbage")
	f.Add("99999999999", "1e3", "0x1p4", "")
	f.Add("3, 7", "1.5", "", "")
	f.Fuzz(func(t *testing.T, retryAfter, ms, xms, date string) {
		h := http.Header{}
		for k, v := range map[string]string{"Retry-After": retryAfter, "Retry-After-Ms": ms, "X-Ms-Retry-After-Ms": xms, "Date": date} {
			if v != "" {
				h.Set(k, v)
			}
		}
		d, ok := ParseRetryAfter(h, testNow)
		if d < 0 || d > MaxRetryAfter || !ok && d != 0 {
			t.Errorf("ParseRetryAfter(%v) = %v, %v; want a delay within [0, %v], 0 when not ok", h, d, ok, MaxRetryAfter)
		}
	})
}

func FuzzParseGoDuration(f *testing.F) {
	for _, s := range []string{"6m0s", "1s", "20ms", "7.66s", "1h30m", "0.5s", "60", "1d2h", "-1s", "9999999999h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseGoDuration(s)
		if d < 0 || d > MaxRetryAfter || !ok && d != 0 {
			t.Errorf("parseGoDuration(%q) = %v, %v; want within [0, %v]", s, d, ok, MaxRetryAfter)
		}
	})
}
