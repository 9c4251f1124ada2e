package estimate

import (
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// The cookbook's examples, with the prompt_tokens the OpenAI API reported
// for them ("How to count tokens with tiktoken", sections 6 and 7).

var cookbookMessages = []Message{
	{Role: "system", Content: "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
	{Role: "system", Name: "example_user", Content: "New synergies will help drive top-line growth."},
	{Role: "system", Name: "example_assistant", Content: "Things working well together will increase revenue."},
	{Role: "system", Name: "example_user", Content: "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
	{Role: "system", Name: "example_assistant", Content: "Let's talk later when we're less busy about how to do better."},
	{Role: "user", Content: "This late pivot means we don't have time to boil the ocean for the client deliverable."},
}

var cookbookToolMessages = []Message{
	{Role: "system", Content: "You are a helpful assistant that can answer to questions about the weather."},
	{Role: "user", Content: "What's the weather like in San Francisco?"},
}

var cookbookTools = []Tool{{
	Name:        "get_current_weather",
	Description: "Get the current weather in a given location",
	Parameters: []byte(`{
		"type": "object",
		"properties": {
			"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
			"unit": {"type": "string", "description": "The unit of temperature to return", "enum": ["celsius", "fahrenheit"]}
		},
		"required": ["location"]
	}`),
}}

// TestCookbookAPICounts checks both the oracle and the Estimator, with no
// margin, against the counts the API reported.
func TestCookbookAPICounts(t *testing.T) {
	cases := []struct {
		name  string
		model string
		enc   tokenizer.Encoding
		msgs  []Message
		tools []Tool
		want  int64
	}{
		{"messages gpt-4", "gpt-4", tokenizer.Cl100kBase, cookbookMessages, nil, 129},
		{"messages gpt-3.5-turbo", "gpt-3.5-turbo", tokenizer.Cl100kBase, cookbookMessages, nil, 129},
		{"messages gpt-4o", "gpt-4o", tokenizer.O200kBase, cookbookMessages, nil, 124},
		{"messages gpt-4o-mini", "gpt-4o-mini", tokenizer.O200kBase, cookbookMessages, nil, 124},
		{"tools gpt-4", "gpt-4", tokenizer.Cl100kBase, cookbookToolMessages, cookbookTools, 105},
		{"tools gpt-4o", "gpt-4o", tokenizer.O200kBase, cookbookToolMessages, cookbookTools, 101},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := openAITokens(t, tc.enc, tc.msgs, tc.tools); got != tc.want {
				t.Errorf("oracle = %d, want %d (API prompt_tokens)", got, tc.want)
			}
			e, err := New(tc.model, WithMargin(0))
			if err != nil {
				t.Fatalf("New(%q): %v", tc.model, err)
			}
			got, err := e.Estimate(Request{Messages: tc.msgs, Tools: tc.tools})
			if err != nil {
				t.Fatalf("Estimate: %v", err)
			}
			if got != tc.want {
				t.Errorf("New(%q, WithMargin(0)).Estimate() = %d, want %d (API prompt_tokens)", tc.model, got, tc.want)
			}
		})
	}
}
