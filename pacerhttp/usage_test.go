package pacerhttp

import (
	"math"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestUsageFromJSON reads answers built by json.Marshal of the SDKs' own
// response types, so the field names are the SDKs', not ours.
func TestUsageFromJSON(t *testing.T) {
	tests := []struct {
		name string
		a    api
		body []byte
		want usage
	}{
		{
			name: "openai chat",
			a:    apiOpenAIChat,
			body: marshal(t, openai.ChatCompletion{ID: "chatcmpl-1", Model: "gpt-4o", Usage: openai.CompletionUsage{
				PromptTokens: 1200, CompletionTokens: 300, TotalTokens: 1500,
				PromptTokensDetails:     openai.CompletionUsagePromptTokensDetails{CachedTokens: 1024},
				CompletionTokensDetails: openai.CompletionUsageCompletionTokensDetails{ReasoningTokens: 200},
			}}),
			want: usage{Input: 1200, Cached: 1024, Output: 300, Total: 1500},
		},
		{
			name: "openai legacy completions",
			a:    apiOpenAICompletions,
			body: marshal(t, openai.Completion{ID: "cmpl-1", Usage: openai.CompletionUsage{PromptTokens: 5, CompletionTokens: 16, TotalTokens: 21}}),
			want: usage{Input: 5, Output: 16, Total: 21},
		},
		{
			name: "openai embeddings",
			a:    apiOpenAIEmbeddings,
			body: marshal(t, openai.CreateEmbeddingResponse{Model: "text-embedding-3-small", Usage: openai.CreateEmbeddingResponseUsage{PromptTokens: 8, TotalTokens: 8}}),
			want: usage{Input: 8, Total: 8},
		},
		{
			name: "openai responses",
			a:    apiOpenAIResponses,
			body: marshal(t, responses.Response{ID: "resp_1", Usage: responses.ResponseUsage{
				InputTokens: 500, OutputTokens: 900, TotalTokens: 1400,
				InputTokensDetails:  responses.ResponseUsageInputTokensDetails{CachedTokens: 100},
				OutputTokensDetails: responses.ResponseUsageOutputTokensDetails{ReasoningTokens: 700},
			}}),
			want: usage{Input: 500, Cached: 100, Output: 900, Total: 1400},
		},
		{
			name: "anthropic",
			a:    apiAnthropicMessages,
			body: marshal(t, anthropic.Message{ID: "msg_1", Usage: anthropic.Usage{
				InputTokens: 12, CacheReadInputTokens: 2000, CacheCreationInputTokens: 300, OutputTokens: 150,
			}}),
			want: usage{Input: 12, CacheRead: 2000, CacheWrite: 300, Output: 150, Total: 2462},
		},
		{
			// Gemini has no Go SDK in go.mod: the names are those of the
			// REST reference's UsageMetadata.
			name: "gemini",
			a:    apiGeminiGenerate,
			body: []byte(`{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP"}],
				"usageMetadata":{"promptTokenCount":1000,"candidatesTokenCount":50,"thoughtsTokenCount":120,"cachedContentTokenCount":800,"totalTokenCount":1170},
				"modelVersion":"gemini-2.5-flash"}`),
			want: usage{Input: 1000, Cached: 800, Output: 170, Total: 1170},
		},
		{
			name: "gemini without a total adds tool-use prompt",
			a:    apiGeminiGenerate,
			body: []byte(`{"usageMetadata":{"promptTokenCount":10,"toolUsePromptTokenCount":4,"candidatesTokenCount":3}}`),
			want: usage{Input: 10, Output: 3, Total: 17},
		},
		{
			name: "gemini stream read whole",
			a:    apiGeminiStream,
			body: readStream(t, "gemini_array.json"),
			want: usage{Input: 8, Output: 6, Total: 14},
		},
		{
			name: "no total: the sum",
			a:    apiOpenAIChat,
			body: []byte(`{"usage":{"prompt_tokens":7,"completion_tokens":2}}`),
			want: usage{Input: 7, Output: 2, Total: 9},
		},
		{
			name: "odd numbers: float, negative, huge",
			a:    apiOpenAIChat,
			body: []byte(`{"usage":{"prompt_tokens":7.0,"completion_tokens":-3,"total_tokens":1e300}}`),
			want: usage{Input: 7, Total: math.MaxInt64},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := usageFromJSON(tt.a, tt.body)
			if !ok {
				t.Fatalf("usageFromJSON(%v, %.200s) found no usage", tt.a, tt.body)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("usageFromJSON() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUsageFromJSONNone checks the answers that hold no usage to settle.
func TestUsageFromJSONNone(t *testing.T) {
	tests := []struct {
		name string
		a    api
		body string
	}{
		{"absent", apiOpenAIChat, `{"id":"x","choices":[]}`},
		{"null", apiOpenAIChat, `{"usage":null}`},
		{"gemini fields on openai", apiOpenAIChat, `{"usageMetadata":{"promptTokenCount":1}}`},
		{"openai fields on gemini", apiGeminiGenerate, `{"usage":{"prompt_tokens":1}}`},
		{"count as string", apiAnthropicMessages, `{"usage":{"input_tokens":"12"}}`},
		{"not JSON", apiOpenAIChat, `{"usage":{"prompt_tokens":1`},
		{"array", apiOpenAIChat, `[{"usage":{"prompt_tokens":1}}]`},
		{"gemini array without usage", apiGeminiStream, `[{"candidates":[]}]`},
		{"gemini array broken", apiGeminiStream, `[{"usageMetadata":{}},`},
		{"not a model call", apiNone, `{"usage":{"prompt_tokens":1}}`},
		{"empty", apiOpenAIResponses, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := usageFromJSON(tt.a, []byte(tt.body)); ok {
				t.Errorf("usageFromJSON(%v, %s) = %+v, true; want none", tt.a, tt.body, got)
			}
		})
	}
}
