package estimate

import "testing"

func TestEncodingForModel(t *testing.T) {
	cases := []struct {
		model string
		want  string
	}{
		// o200k_base families.
		{"gpt-4o", O200kBase},
		{"gpt-4o-mini", O200kBase},
		{"gpt-4o-2024-08-06", O200kBase},
		{"chatgpt-4o-latest", O200kBase},
		{"gpt-4.1", O200kBase},
		{"gpt-4.1-nano", O200kBase},
		{"gpt-4.5-preview", O200kBase},
		{"gpt-5", O200kBase},
		{"gpt-5-mini", O200kBase},
		{"gpt-5.1-codex", O200kBase},
		{"gpt-oss-120b", O200kBase},
		{"o1", O200kBase},
		{"o1-preview", O200kBase},
		{"o3-mini", O200kBase},
		{"o4-mini", O200kBase},
		// cl100k_base families.
		{"gpt-4", Cl100kBase},
		{"gpt-4-0613", Cl100kBase},
		{"gpt-4-turbo", Cl100kBase},
		{"gpt-4-32k", Cl100kBase},
		{"gpt-3.5-turbo", Cl100kBase},
		{"gpt-3.5-turbo-16k", Cl100kBase},
		{"gpt-35-turbo", Cl100kBase},
		{"text-embedding-3-small", Cl100kBase},
		{"text-embedding-3-large", Cl100kBase},
		{"text-embedding-ada-002", Cl100kBase},
		// Case, space and provider prefixes.
		{"GPT-4o", O200kBase},
		{"  gpt-4o-mini ", O200kBase},
		{"openai:gpt-4o", O200kBase},
		{"azure/gpt-4.1", O200kBase},
		{"Azure/GPT-35-Turbo", Cl100kBase},
		{"openrouter/openai/gpt-5", O200kBase},
		{"ft:gpt-4o-mini-2024-07-18:acme::abc123", O200kBase},
		{"ft:gpt-3.5-turbo-0125:acme::abc123", Cl100kBase},
		// Boundaries: a family prefix followed by more name is not a match.
		{"o10", CharBased},
		{"gpt-4x", CharBased},
		{"gpt-50", CharBased},
		// Everything else falls back.
		{"", CharBased},
		{"claude-sonnet-4-5", CharBased},
		{"anthropic:claude-3-5-haiku-20241022", CharBased},
		{"anthropic.claude-3-5-sonnet-20240620-v1:0", CharBased},
		{"gemini-2.5-pro", CharBased},
		{"models/gemini-1.5-flash", CharBased},
		{"meta-llama/Llama-3.1-70B-Instruct", CharBased},
		{"mistral-large-latest", CharBased},
		{"azure/prod-chat", CharBased},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			e, err := New(tc.model)
			if err != nil {
				t.Fatalf("New(%q): %v", tc.model, err)
			}
			if got := e.Encoding(); got != tc.want {
				t.Errorf("New(%q).Encoding() = %q, want %q", tc.model, got, tc.want)
			}
			if got, want := e.Fallback(), tc.want == CharBased; got != want {
				t.Errorf("New(%q).Fallback() = %v, want %v", tc.model, got, want)
			}
		})
	}
}

func TestWithEncodingOverridesModel(t *testing.T) {
	e, err := New("azure/prod-chat", WithEncoding(O200kBase))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if got := e.Encoding(); got != O200kBase {
		t.Errorf("Encoding() = %q, want %q", got, O200kBase)
	}
	e, err = New("gpt-4o", WithEncoding(CharBased))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if !e.Fallback() {
		t.Errorf("New(gpt-4o, WithEncoding(CharBased)).Fallback() = false, want true")
	}
}
