package pacerhttp

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
)

// TestParseCompletions checks the legacy endpoint: raw-text prompts with
// no chat framing, token ids counted exactly, best_of, and the
// documented default cap of 16.
func TestParseCompletions(t *testing.T) {
	e := newEst("gpt-3.5-turbo-instruct")
	tests := []struct {
		name   string
		params openai.CompletionNewParams
		want   call
	}{
		{
			name: "strings, best_of beats n",
			params: openai.CompletionNewParams{
				Model:     "gpt-3.5-turbo-instruct",
				Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"Say this is a test.", "And this."}},
				MaxTokens: openai.Int(50), N: openai.Int(2), BestOf: openai.Int(4),
				Suffix: openai.String(" Done."),
			},
			want: call{Model: "gpt-3.5-turbo-instruct", Prompt: e.Text("Say this is a test.") + e.Text("And this.") + e.Text(" Done."), MaxOutput: 200, HasMaxOutput: true},
		},
		{
			name: "token arrays, default cap times n",
			params: openai.CompletionNewParams{
				Model:  "gpt-3.5-turbo-instruct",
				Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{{1, 2, 3}, {4, 5}}},
				N:      openai.Int(3),
			},
			want: call{Model: "gpt-3.5-turbo-instruct", Prompt: 5, MaxOutput: 48, HasMaxOutput: true},
		},
		{
			name: "one string, stream with usage",
			params: openai.CompletionNewParams{
				Model:         "gpt-3.5-turbo-instruct",
				Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
				MaxTokens:     openai.Int(7),
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			},
			want: call{Model: "gpt-3.5-turbo-instruct", Stream: true, Prompt: e.Text("Once upon a time"), MaxOutput: 7, HasMaxOutput: true, WantsUsage: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := marshal(t, tt.params)
			if tt.want.Stream {
				body = withStream(t, body)
			}
			got, err := parseRequest(apiOpenAICompletions, "", body, newEst)
			if err != nil {
				t.Fatalf("parseRequest() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseEmbeddings checks every input shape openai-go can send: text
// is counted bare, token ids one each, and no output is reserved.
func TestParseEmbeddings(t *testing.T) {
	e := newEst("text-embedding-3-small")
	tests := []struct {
		name  string
		input openai.EmbeddingNewParamsInputUnion
		want  int64
	}{
		{"string", openai.EmbeddingNewParamsInputUnion{OfString: openai.String("The food was delicious.")}, e.Text("The food was delicious.")},
		{"strings", openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a cat", "a dog sat"}}, e.Text("a cat") + e.Text("a dog sat")},
		{"tokens", openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{791, 3691, 574, 18406, 13}}, 5},
		{"token arrays", openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}, {3}, {}}}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := marshal(t, openai.EmbeddingNewParams{Model: "text-embedding-3-small", Input: tt.input})
			got, err := parseRequest(apiOpenAIEmbeddings, "", body, newEst)
			if err != nil {
				t.Fatalf("parseRequest() error = %v", err)
			}
			// An embedding generates nothing: its output cap is 0, set.
			want := call{Model: "text-embedding-3-small", Prompt: tt.want, HasMaxOutput: true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
