package pacerhttp

import (
	"net/http/httptest"
	"testing"
)

// TestRecognize covers every paced endpoint on its own host, Azure and
// Vertex spellings, and the neighbouring paths that must pass unpaced.
func TestRecognize(t *testing.T) {
	tests := []struct {
		name, method, url string
		want              api
		wantModel         string
	}{
		{"openai chat", "POST", "https://api.openai.com/v1/chat/completions", apiOpenAIChat, ""},
		{"openai responses", "POST", "https://api.openai.com/v1/responses", apiOpenAIResponses, ""},
		{"openai completions", "POST", "https://api.openai.com/v1/completions", apiOpenAICompletions, ""},
		{"openai embeddings", "POST", "https://api.openai.com/v1/embeddings", apiOpenAIEmbeddings, ""},
		{"proxy prefix", "POST", "http://127.0.0.1:4000/openai/proxy/v1/chat/completions", apiOpenAIChat, ""},
		{"gemini openai layer", "POST", "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions", apiOpenAIChat, ""},
		{"azure chat", "POST", "https://x.openai.azure.com/openai/deployments/prod-chat/chat/completions?api-version=2024-10-21", apiOpenAIChat, "prod-chat"},
		{"azure completions", "POST", "https://x.openai.azure.com/openai/deployments/inst/completions?api-version=2024-10-21", apiOpenAICompletions, "inst"},
		{"azure embeddings", "POST", "https://x.openai.azure.com/openai/deployments/emb-3/embeddings?api-version=2024-10-21", apiOpenAIEmbeddings, "emb-3"},
		{"azure responses", "POST", "https://x.openai.azure.com/openai/deployments/r1/responses?api-version=2025-03-01-preview", apiOpenAIResponses, "r1"},
		{"azure v1 chat", "POST", "https://x.openai.azure.com/openai/v1/chat/completions", apiOpenAIChat, ""},
		{"azure v1 responses", "POST", "https://x.openai.azure.com/openai/v1/responses?api-version=preview", apiOpenAIResponses, ""},
		{"anthropic", "POST", "https://api.anthropic.com/v1/messages", apiAnthropicMessages, ""},
		{"anthropic beta query", "POST", "https://api.anthropic.com/v1/messages?beta=true", apiAnthropicMessages, ""},
		{"gemini generate", "POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent", apiGeminiGenerate, "gemini-2.0-flash"},
		{"gemini stream sse", "POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", apiGeminiStream, "gemini-2.5-pro"},
		{"gemini tuned", "POST", "https://generativelanguage.googleapis.com/v1beta/tunedModels/my-model:generateContent", apiGeminiGenerate, "my-model"},
		{"vertex", "POST", "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash-001:generateContent", apiGeminiGenerate, "gemini-2.0-flash-001"},
		{"vertex stream", "POST", "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-flash:streamGenerateContent", apiGeminiStream, "gemini-2.5-flash"},

		{"models list", "GET", "https://api.openai.com/v1/models", apiNone, ""},
		{"get chat", "GET", "https://api.openai.com/v1/chat/completions", apiNone, ""},
		{"files", "POST", "https://api.openai.com/v1/files", apiNone, ""},
		{"batches", "POST", "https://api.openai.com/v1/batches", apiNone, ""},
		{"count tokens", "POST", "https://api.anthropic.com/v1/messages/count_tokens", apiNone, ""},
		{"message batches", "POST", "https://api.anthropic.com/v1/messages/batches", apiNone, ""},
		{"get response", "GET", "https://api.openai.com/v1/responses/resp_123", apiNone, ""},
		{"delete response", "DELETE", "https://api.openai.com/v1/responses/resp_123", apiNone, ""},
		{"cancel response", "POST", "https://api.openai.com/v1/responses/resp_123/cancel", apiNone, ""},
		{"input items", "GET", "https://api.openai.com/v1/responses/resp_123/input_items", apiNone, ""},
		{"responses input tokens", "POST", "https://api.openai.com/v1/responses/input_tokens", apiNone, ""},
		{"stored chat completion", "POST", "https://api.openai.com/v1/chat/completions/chatcmpl-1", apiNone, ""},
		{"assistants message", "POST", "https://api.openai.com/v1/threads/thread_1/messages", apiNone, ""},
		{"gemini count tokens", "POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:countTokens", apiNone, ""},
		{"gemini embed", "POST", "https://generativelanguage.googleapis.com/v1beta/models/text-embedding-004:embedContent", apiNone, ""},
		{"gemini get model", "GET", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash", apiNone, ""},
		{"colon elsewhere", "POST", "https://example.com/v1/things/x:generateContent", apiNone, ""},
		{"empty model", "POST", "https://example.com/v1beta/models/:generateContent", apiNone, ""},
		{"root", "POST", "https://example.com/", apiNone, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.url, nil)
			got, model := recognize(r)
			if got != tt.want || model != tt.wantModel {
				t.Errorf("recognize(%s %s) = %v, %q; want %v, %q", tt.method, tt.url, got, model, tt.want, tt.wantModel)
			}
			if Paced(r) != (tt.want != apiNone) {
				t.Errorf("Paced(%s %s) = %v, want %v", tt.method, tt.url, Paced(r), tt.want != apiNone)
			}
			if m := PathModel(r); m != tt.wantModel {
				t.Errorf("PathModel(%s %s) = %q, want %q", tt.method, tt.url, m, tt.wantModel)
			}
		})
	}
}

// TestRecognizeNil checks that a request without a URL is not a model
// call rather than a panic.
func TestRecognizeNil(t *testing.T) {
	if got, _ := recognize(nil); got != apiNone {
		t.Errorf("recognize(nil) = %v, want none", got)
	}
	r := httptest.NewRequest("POST", "/v1/messages", nil)
	r.URL = nil
	if got, _ := recognize(r); got != apiNone {
		t.Errorf("recognize(no URL) = %v, want none", got)
	}
}

// TestAPIString pins the names that appear in logs.
func TestAPIString(t *testing.T) {
	for a, want := range map[api]string{
		apiNone: "none", apiOpenAIChat: "openai_chat", apiOpenAIResponses: "openai_responses",
		apiOpenAICompletions: "openai_completions", apiOpenAIEmbeddings: "openai_embeddings",
		apiAnthropicMessages: "anthropic_messages", apiGeminiGenerate: "gemini_generate",
		apiGeminiStream: "gemini_stream", api(42): "api(42)", api(-1): "api(-1)",
	} {
		if got := a.String(); got != want {
			t.Errorf("api(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}
