package proxy

import (
	"net/http"
	"testing"
)

// The key a budget is found by is the one the provider charges: sent both
// ways with different values, OpenAI reads Authorization and Anthropic
// x-api-key, Azure api-key and Gemini x-goog-api-key.
func TestAPIKey(t *testing.T) {
	cases := []struct {
		name         string
		bearer, xkey string
		s            style
		want         string
	}{
		{"openai bearer", "sk-a", "", openAI, "sk-a"},
		{"openai x-api-key alone", "", "sk-a", openAI, "sk-a"},
		{"openai both", "sk-a", "sk-b", openAI, "sk-a"},
		{"anthropic x-api-key", "", "sk-b", anthropic, "sk-b"},
		{"anthropic bearer alone", "sk-a", "", anthropic, "sk-a"},
		{"anthropic both", "sk-a", "sk-b", anthropic, "sk-b"},
		{"azure api-key", "", "sk-b", azure, "sk-b"},
		{"azure both", "sk-a", "sk-b", azure, "sk-b"},
		{"gemini x-goog-api-key", "", "sk-b", gemini, "sk-b"},
		{"gemini bearer alone", "sk-a", "", gemini, "sk-a"},
		{"none", "", "", openAI, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.bearer != "" {
				h.Set("Authorization", "Bearer "+c.bearer)
			}
			if c.xkey != "" {
				h.Set(keyHeader(c.s), c.xkey)
			}
			if got := apiKey(h, c.s); got != c.want {
				t.Errorf("apiKey(%v, %v) = %q; want %q", h, c.s, got, c.want)
			}
		})
	}
}
