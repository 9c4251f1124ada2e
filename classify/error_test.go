package classify

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
)

// genaiError is shaped like google genai's APIError: fields only.
type genaiError struct {
	Code    int
	Message string
	Status  string
	Details []map[string]any
}

func (e genaiError) Error() string {
	return fmt.Sprintf("Error %d, Message: %s, Status: %s, Details: %v", e.Code, e.Message, e.Status, e.Details)
}

// awsException is shaped like a Bedrock modelled exception.
type awsException struct{ code, msg string }

func (e *awsException) Error() string        { return e.code + ": " + e.msg }
func (e *awsException) ErrorCode() string    { return e.code }
func (e *awsException) ErrorMessage() string { return e.msg }

// awsResponseError is shaped like smithy-go's *http.ResponseError.
type awsResponseError struct {
	status int
	err    error
}

func (e *awsResponseError) Error() string {
	return fmt.Sprintf("https response error StatusCode: %d, RequestID: r-1, %v", e.status, e.err)
}
func (e *awsResponseError) HTTPStatusCode() int { return e.status }
func (e *awsResponseError) Unwrap() error       { return e.err }

// responseError carries the *http.Response, the convention FromError offers.
type responseError struct{ resp *http.Response }

func (e *responseError) Error() string                { return "call failed" }
func (e *responseError) HTTPResponse() *http.Response { return e.resp }

func TestFromError(t *testing.T) {
	// Real SDK errors as a caller's own test might build them, without a
	// response: openai-go's DumpResponse then panics.
	halfOpenAI := &openai.Error{StatusCode: 429}
	if err := halfOpenAI.UnmarshalJSON([]byte(`{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}`)); err != nil {
		t.Fatal(err)
	}
	halfAnthropic := &anthropic.Error{StatusCode: 429}
	if err := halfAnthropic.UnmarshalJSON([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)); err != nil {
		t.Fatal(err)
	}

	// Errors from real calls are in TestFromErrorSDK.
	tests := []struct {
		name string
		err  error
		want Verdict // Message is not compared
	}{
		{"nil", nil, Verdict{}},
		{
			"half-built openai-go error",
			halfOpenAI,
			Verdict{Kind: RateLimited, Limit: LimitRequests, Code: "rate_limit_exceeded", Status: 429, Provider: "openai"},
		},
		{
			"half-built anthropic-sdk-go error",
			halfAnthropic,
			Verdict{Kind: RateLimited, Code: "rate_limit_error", Provider: "anthropic"},
		},
		{
			"flattened openai-go text",
			errors.New("OpenAI API error: 503 Service Unavailable"),
			Verdict{Kind: Overloaded, Status: 503},
		},
		{
			"google genai APIError per-minute",
			genaiError{Code: 429, Message: "You exceeded your current quota, please check your plan and billing details.", Status: "RESOURCE_EXHAUSTED",
				Details: []map[string]any{
					{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{"quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier"}}},
					{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
				}},
			Verdict{Kind: RateLimited, RetryAfter: 37 * time.Second, Limit: LimitInputTokens, Code: "RESOURCE_EXHAUSTED", Status: 429, Provider: "gemini"},
		},
		{
			"google genai APIError per-day",
			genaiError{Code: 429, Message: "You exceeded your current quota", Status: "RESOURCE_EXHAUSTED",
				Details: []map[string]any{
					{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}}},
				}},
			Verdict{Kind: QuotaExhausted, Limit: LimitRequests, Code: "RESOURCE_EXHAUSTED", Status: 429, Provider: "gemini"},
		},
		{
			"bedrock throttling through smithy wrappers",
			fmt.Errorf("operation error Bedrock Runtime: InvokeModel, %w",
				&awsResponseError{status: 429, err: &awsException{"ThrottlingException", "Too many requests, please wait before trying again."}}),
			Verdict{Kind: RateLimited, Code: "ThrottlingException", Status: 429, Provider: "bedrock"},
		},
		{
			"bedrock service unavailable",
			&awsResponseError{status: 503, err: &awsException{"ServiceUnavailableException", "Bedrock is unable to process your request."}},
			Verdict{Kind: Overloaded, Code: "ServiceUnavailableException", Status: 503, Provider: "bedrock"},
		},
		{
			"error carrying its http.Response",
			&responseError{resp: &http.Response{StatusCode: 429, Header: hdr("Retry-After", "3", "Anthropic-Ratelimit-Requests-Remaining", "0")}},
			Verdict{Kind: RateLimited, RetryAfter: 3 * time.Second, Limit: LimitRequests, Status: 429, Provider: "anthropic"},
		},
		{
			"flattened openai text",
			errors.New(`POST "https://api.openai.com/v1/chat/completions": 503 Service Unavailable {"error":{"message":"The engine is currently overloaded","type":"server_error","param":null,"code":null}}`),
			Verdict{Kind: Overloaded, Code: "server_error", Status: 503, Provider: "openai"},
		},
		{
			"go-openai style text",
			errors.New("error, status code: 429, status: 429 Too Many Requests, message: You exceeded your current quota"),
			Verdict{Kind: QuotaExhausted, Status: 429},
		},
		{"context canceled", context.Canceled, Verdict{Kind: Canceled}},
		{
			"caller deadline inside url.Error",
			&url.Error{Op: "Post", URL: "https://api.anthropic.com/v1/messages", Err: context.DeadlineExceeded},
			Verdict{Kind: Canceled, Provider: "anthropic"},
		},
		{
			"connection refused",
			&url.Error{Op: "Post", URL: "https://api.openai.com/v1/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}},
			Verdict{Kind: Transient, Provider: "openai"},
		},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), Verdict{Kind: Transient}},
		{"unexpected EOF", fmt.Errorf("decode: %w", io.ErrUnexpectedEOF), Verdict{Kind: Transient}},
		{"flattened reset", errors.New("read tcp 10.0.0.1:5555->1.2.3.4:443: read: connection reset by peer"), Verdict{Kind: Transient}},
		{"bad certificate", &url.Error{Op: "Post", URL: "https://x", Err: x509.UnknownAuthorityError{}}, Verdict{Kind: Permanent}},
		{"unsupported scheme is not a network failure", &url.Error{Op: "Post", URL: "htps://x", Err: errors.New(`unsupported protocol scheme "htps"`)}, Verdict{Kind: Permanent}},
		{"unknown", errors.New("boom"), Verdict{Kind: Permanent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromErrorAt(tt.err, testNow)
			got.Message = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromError(%v) mismatch (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

func TestFromErrorClientTimeout(t *testing.T) {
	// A real http.Client.Timeout: its error matches context.DeadlineExceeded,
	// yet it is a per-attempt timeout and so Transient.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	c := &http.Client{Timeout: 20 * time.Millisecond}
	_, err := c.Get(srv.URL)
	if err == nil {
		t.Fatal("Get() error = nil, want a timeout")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("note: %v no longer matches context.DeadlineExceeded", err)
	}
	if got := FromError(err); got.Kind != Transient {
		t.Errorf("FromError(%v).Kind = %v, want transient", err, got.Kind)
	}
}
