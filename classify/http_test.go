package classify

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testNow is the clock every table test runs at.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// hdr builds a header from name/value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// providerResponse is one answer a provider sent, and its verdict.
type providerResponse struct {
	name   string
	status int
	header http.Header
	body   string
	want   Verdict // Message is checked by its own test
}

// providerResponses are real provider answers, as sent on the wire. Besides
// TestFromHTTPProviders, TestFromErrorSDK sends them through the official
// SDKs, so that an SDK's error classifies as its response does.
var providerResponses = []providerResponse{
	{
		name:   "openai rate_limit_exceeded tokens, reset from exhausted window",
		status: 429,
		header: hdr("Openai-Organization", "org-abc",
			"X-Ratelimit-Limit-Requests", "500", "X-Ratelimit-Remaining-Requests", "499", "X-Ratelimit-Reset-Requests", "120ms",
			"X-Ratelimit-Limit-Tokens", "10000", "X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s"),
		body: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 10000, Used 9800, Requested 700. Please try again in 3s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
		want: Verdict{Kind: RateLimited, RetryAfter: 6 * time.Minute, Limit: LimitTokens, Code: "rate_limit_exceeded", Status: 429, Provider: "openai"},
	},
	{
		name:   "openai rate_limit_exceeded requests, retry-after-ms beats its own rounding",
		status: 429,
		header: hdr("Openai-Version", "2020-10-01", "Retry-After", "20", "Retry-After-Ms", "19500"),
		body:   `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		want:   Verdict{Kind: RateLimited, RetryAfter: 19500 * time.Millisecond, Limit: LimitRequests, Code: "rate_limit_exceeded", Status: 429, Provider: "openai"},
	},
	{
		name:   "openai 20 ms delay is not held back a whole second by retry-after: 1",
		status: 429,
		header: hdr("Retry-After", "1", "Retry-After-Ms", "20"),
		body:   `{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29990, Requested 30. Please try again in 20ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
		want:   Verdict{Kind: RateLimited, RetryAfter: 20 * time.Millisecond, Limit: LimitTokens, Code: "rate_limit_exceeded", Status: 429, Provider: "openai"},
	},
	{
		name:   "contradictory retry headers: the longest wins",
		status: 429,
		header: hdr("Retry-After", "60", "Retry-After-Ms", "500"),
		body:   `{"error":{"message":"Rate limit reached","type":"tokens","code":"rate_limit_exceeded"}}`,
		want:   Verdict{Kind: RateLimited, RetryAfter: time.Minute, Limit: LimitTokens, Code: "rate_limit_exceeded", Status: 429, Provider: "openai"},
	},
	{
		name:   "openai insufficient_quota is a 429 that must not be retried",
		status: 429,
		header: hdr("Openai-Organization", "org-abc", "Retry-After", "1"),
		body:   `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
		want:   Verdict{Kind: QuotaExhausted, Code: "insufficient_quota", Status: 429, Provider: "openai"},
	},
	{
		name:   "openai billing_hard_limit_reached",
		status: 400,
		body:   `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}}`,
		want:   Verdict{Kind: QuotaExhausted, Code: "billing_hard_limit_reached", Status: 400, Provider: "openai"},
	},
	{
		// The same code also arrives as a 429, which on its own reads as a
		// rate limit that pauses the whole budget.
		name:   "openai billing_hard_limit_reached as a 429",
		status: 429,
		header: hdr("Openai-Organization", "org-abc"),
		body:   `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}}`,
		want:   Verdict{Kind: QuotaExhausted, Code: "billing_hard_limit_reached", Status: 429, Provider: "openai"},
	},
	{
		name:   "openai 500 server_error",
		status: 500,
		body:   `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
		want:   Verdict{Kind: Transient, Code: "server_error", Status: 500, Provider: "openai"},
	},
	{
		name:   "openai 503 engine overloaded",
		status: 503,
		body:   `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`,
		want:   Verdict{Kind: Overloaded, Code: "server_error", Status: 503, Provider: "openai"},
	},
	{
		name:   "openai 401 invalid_api_key",
		status: 401,
		body:   `{"error":{"message":"Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
		want:   Verdict{Kind: Permanent, Code: "invalid_api_key", Status: 401, Provider: "openai"},
	},
	{
		name:   "openai 400 context_length_exceeded",
		status: 400,
		body:   `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
		want:   Verdict{Kind: Permanent, Code: "context_length_exceeded", Status: 400, Provider: "openai"},
	},
	{
		name:   "anthropic 429 rate_limit_error on input tokens",
		status: 429,
		header: hdr("Retry-After", "30", "Request-Id", "req_1",
			"Anthropic-Ratelimit-Input-Tokens-Limit", "50000", "Anthropic-Ratelimit-Input-Tokens-Remaining", "0",
			"Anthropic-Ratelimit-Input-Tokens-Reset", "2025-06-01T12:00:20Z",
			"Anthropic-Ratelimit-Requests-Remaining", "49"),
		body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."},"request_id":"req_1"}`,
		want: Verdict{Kind: RateLimited, RetryAfter: 30 * time.Second, Limit: LimitInputTokens, Code: "rate_limit_error", Status: 429, Provider: "anthropic"},
	},
	{
		name:   "anthropic 429 without retry-after waits for the window reset",
		status: 429,
		body:   `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
		header: hdr("Anthropic-Ratelimit-Output-Tokens-Remaining", "0", "Anthropic-Ratelimit-Output-Tokens-Reset", "2025-06-01T12:00:09.5Z"),
		want:   Verdict{Kind: RateLimited, RetryAfter: 9500 * time.Millisecond, Limit: LimitOutputTokens, Code: "rate_limit_error", Status: 429, Provider: "anthropic"},
	},
	{
		name:   "anthropic 529 overloaded_error",
		status: 529,
		body:   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		want:   Verdict{Kind: Overloaded, Code: "overloaded_error", Status: 529, Provider: "anthropic"},
	},
	{
		name:   "anthropic credit balance too low is a 400 that means no money",
		status: 400,
		body:   `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`,
		want:   Verdict{Kind: QuotaExhausted, Code: "invalid_request_error", Status: 400, Provider: "anthropic"},
	},
	{
		name:   "anthropic 429 enforced_spend_limit_reached",
		status: 429,
		header: hdr("Retry-After", "60"),
		body:   `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your spend cap.","details":{"error_code":"enforced_spend_limit_reached"}}}`,
		want:   Verdict{Kind: QuotaExhausted, Code: "enforced_spend_limit_reached", Status: 429, Provider: "anthropic"},
	},
	{
		name:   "anthropic 402 billing_error",
		status: 402,
		body:   `{"type":"error","error":{"type":"billing_error","message":"Payment required"}}`,
		want:   Verdict{Kind: QuotaExhausted, Code: "billing_error", Status: 402, Provider: "anthropic"},
	},
	{
		name:   "anthropic 400 prompt too long",
		status: 400,
		body:   `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215000 tokens > 200000 maximum"}}`,
		want:   Verdict{Kind: Permanent, Code: "invalid_request_error", Status: 400, Provider: "anthropic"},
	},
	{
		name:   "anthropic 500 api_error",
		status: 500,
		body:   `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
		want:   Verdict{Kind: Transient, Code: "api_error", Status: 500, Provider: "anthropic"},
	},
	{
		name:   "azure 429 with contradictory retry headers takes the longest",
		status: 429,
		header: hdr("Retry-After", "5", "Retry-After-Ms", "4500", "X-Ms-Retry-After-Ms", "6000",
			"X-Ms-Region", "East US", "Apim-Request-Id", "b1c2", "X-Ratelimit-Remaining-Tokens", "0"),
		body: `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}`,
		want: Verdict{Kind: RateLimited, RetryAfter: 6 * time.Second, Limit: LimitTokens, Code: "429", Status: 429, Provider: "azure"},
	},
	{
		name:   "azure call volume quota",
		status: 403,
		header: hdr("Apim-Request-Id", "b1c2"),
		body:   `{"error":{"code":"403","message":"Out of call volume quota for OpenAI API. Quota will be replenished in 2.08:13:20."}}`,
		want:   Verdict{Kind: QuotaExhausted, Code: "403", Status: 403, Provider: "azure"},
	},
	{
		name:   "gemini per-minute RESOURCE_EXHAUSTED with RetryInfo",
		status: 429,
		body: `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"1000000"}]},` +
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`,
		want: Verdict{Kind: RateLimited, RetryAfter: 37 * time.Second, Limit: LimitInputTokens, Code: "RESOURCE_EXHAUSTED", Status: 429, Provider: "gemini"},
	},
	{
		name:   "gemini per-day quota will not clear within a retry",
		status: 429,
		body: `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250"}]},` +
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22s"}]}}`,
		want: Verdict{Kind: QuotaExhausted, Limit: LimitRequests, Code: "RESOURCE_EXHAUSTED", Status: 429, Provider: "gemini"},
	},
	{
		name:   "gemini 503 UNAVAILABLE",
		status: 503,
		body:   `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`,
		want:   Verdict{Kind: Overloaded, Code: "UNAVAILABLE", Status: 503, Provider: "gemini"},
	},
	{
		name:   "bedrock ThrottlingException from the errortype header",
		status: 429,
		header: hdr("X-Amzn-Errortype", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", "X-Amzn-Requestid", "r-1"),
		body:   `{"message":"Too many requests, please wait before trying again."}`,
		want:   Verdict{Kind: RateLimited, Code: "ThrottlingException", Status: 429, Provider: "bedrock"},
	},
	{
		name:   "bedrock ServiceQuotaExceededException is documented as retry later",
		status: 400,
		body:   `{"__type":"com.amazon.coral.service#ServiceQuotaExceededException","message":"Too many tokens per day, please wait before trying again."}`,
		want:   Verdict{Kind: RateLimited, Limit: LimitTokens, Code: "ServiceQuotaExceededException", Status: 400, Provider: "bedrock"},
	},
	{
		name:   "bedrock ModelNotReadyException",
		status: 429,
		header: hdr("X-Amzn-Errortype", "ModelNotReadyException"),
		body:   `{"message":"Model is not ready for inference."}`,
		want:   Verdict{Kind: Overloaded, Code: "ModelNotReadyException", Status: 429, Provider: "bedrock"},
	},
	{
		name:   "html 502 from a proxy",
		status: 502,
		header: hdr("Content-Type", "text/html"),
		body:   "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
		want:   Verdict{Kind: Transient, Status: 502},
	},
	{
		name:   "429 with an unparseable body is still a rate limit",
		status: 429,
		body:   "Too Many Requests",
		want:   Verdict{Kind: RateLimited, Status: 429},
	},
	{
		name:   "truncated json keeps its leading fields",
		status: 429,
		body:   `{"error":{"type":"tokens","code":"rate_limit_exceeded","message":"Rate limit reached for gpt-4o on tok`,
		want:   Verdict{Kind: RateLimited, Limit: LimitTokens, Code: "rate_limit_exceeded", Status: 429, Provider: "openai"},
	},
	{
		name:   "stream error after a 200",
		status: 200,
		body:   "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		want:   Verdict{Kind: Overloaded, Code: "overloaded_error", Status: 200, Provider: "anthropic"},
	},
	{
		name:   "success",
		status: 200,
		header: hdr("Openai-Organization", "org-abc"),
		body:   `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`,
		want:   Verdict{Status: 200, Provider: "openai"},
	},
	{
		name:   "anthropic success has a root type that is not an error",
		status: 200,
		body:   `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}]}`,
		want:   Verdict{Status: 200},
	},
	{
		name:   "mistral flat error body",
		status: 429,
		body:   `{"object":"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}`,
		want:   Verdict{Kind: RateLimited, Code: "rate_limited", Status: 429, Provider: "openai"},
	},
	{
		name:   "unknown status with nothing to go on",
		status: 0,
		want:   Verdict{Kind: Permanent},
	},
}

func TestFromHTTPProviders(t *testing.T) {
	for _, tt := range providerResponses {
		t.Run(tt.name, func(t *testing.T) {
			got := fromHTTPAt(tt.status, tt.header, []byte(tt.body), testNow)
			got.Message = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromHTTP(%d, ...) mismatch (-want +got):\n%s", tt.status, diff)
			}
		})
	}
}

func TestFromHTTPMessage(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"json message", `{"error":{"message":"Rate limit\n  reached","code":"rate_limit_exceeded"}}`, "Rate limit reached"},
		{"html title", "<HTML><HEAD><TITLE>503 Service Unavailable</TITLE></HEAD><body>x</body></HTML>", "503 Service Unavailable"},
		{"plain text", "upstream connect error or disconnect/reset before headers", "upstream connect error or disconnect/reset before headers"},
		{"invalid utf-8", "bad \xff byte", "bad \uFFFD byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromHTTPAt(503, nil, []byte(tt.body), testNow).Message; got != tt.want {
				t.Errorf("FromHTTP(503, nil, %q).Message = %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}

func TestFromHTTPHugeBody(t *testing.T) {
	// A 10 MB body: only MaxBodyBytes are read, so the message is whatever
	// the prefix holds, bounded, and the call stays fast.
	body := `{"error":{"type":"rate_limit_error","message":"` + strings.Repeat("a", 10<<20) + `"}}`
	start := time.Now()
	got := fromHTTPAt(429, nil, []byte(body), testNow)
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("FromHTTP on 10 MB took %v, want bounded work", elapsed)
	}
	if got.Kind != RateLimited || got.Code != "rate_limit_error" {
		t.Errorf("FromHTTP(429, huge) = %v, want rate_limited code=rate_limit_error", got)
	}
	if len(got.Message) > MaxMessageLen {
		t.Errorf("len(Message) = %d, want <= %d", len(got.Message), MaxMessageLen)
	}
}

func TestFromHTTPRetryAfterDate(t *testing.T) {
	// The HTTP-date is measured against the response's Date header, not the
	// local clock, which here is an hour off.
	h := hdr("Date", "Sun, 01 Jun 2025 12:00:00 GMT", "Retry-After", "Sun, 01 Jun 2025 12:00:45 GMT")
	got := fromHTTPAt(503, h, nil, testNow.Add(time.Hour))
	if got.RetryAfter != 45*time.Second {
		t.Errorf("FromHTTP(503, Retry-After date).RetryAfter = %v, want 45s", got.RetryAfter)
	}
}

func TestVerdictString(t *testing.T) {
	v := Verdict{Kind: RateLimited, RetryAfter: 6 * time.Second, Limit: LimitTokens, Code: "rate_limit_exceeded", Status: 429, Provider: "openai"}
	want := "rate_limited status=429 provider=openai code=rate_limit_exceeded limit=tokens retry_after=6s"
	if got := v.String(); got != want {
		t.Errorf("Verdict.String() = %q, want %q", got, want)
	}
}
