package pacerhttp

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmpacer/llmpacer/estimate"
)

// geminiBodyCamel and geminiBodySnake are the same request in the two
// spellings Gemini's REST API accepts.
const (
	geminiBodyCamel = `{
  "systemInstruction": {"parts": [{"text": "You are a weather bot."}]},
  "contents": [
    {"role": "user", "parts": [{"text": "Weather in Paris?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]},
    {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"location": "Paris"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 18}}}]}
  ],
  "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "Get the weather.", "parameters": {"type": "OBJECT", "properties": {"location": {"type": "STRING"}}}}]}, {"googleSearch": {}}],
  "generationConfig": {"maxOutputTokens": 256, "candidateCount": 2, "temperature": 0.2}
}`
	geminiBodySnake = `{
  "system_instruction": {"parts": [{"text": "You are a weather bot."}]},
  "contents": [
    {"role": "user", "parts": [{"text": "Weather in Paris?"}, {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}]},
    {"role": "model", "parts": [{"function_call": {"name": "get_weather", "args": {"location": "Paris"}}}]},
    {"role": "user", "parts": [{"function_response": {"name": "get_weather", "response": {"temp": 18}}}]}
  ],
  "tools": [{"function_declarations": [{"name": "get_weather", "description": "Get the weather.", "parameters": {"type": "OBJECT", "properties": {"location": {"type": "STRING"}}}}]}],
  "generation_config": {"max_output_tokens": 256, "candidate_count": 2}
}`
)

// TestParseGemini checks both spellings of a Gemini body, the URL model,
// and maxOutputTokens × candidateCount.
func TestParseGemini(t *testing.T) {
	msgs := []estimate.Message{
		{Role: "system", Parts: []string{"You are a weather bot."}},
		{Role: "user", Parts: []string{"Weather in Paris?"}},
		{Role: "model", ToolCalls: []estimate.ToolCall{{Name: "get_weather", Arguments: `{"location": "Paris"}`}}},
		{Role: "user", Parts: []string{"get_weather", `{"temp": 18}`}},
	}
	tools := []estimate.Tool{{Name: "get_weather", Description: "Get the weather.", Parameters: json.RawMessage(`{"type": "OBJECT", "properties": {"location": {"type": "STRING"}}}`)}}
	for _, tt := range []struct {
		name string
		a    api
		body string
	}{
		{"camel generate", apiGeminiGenerate, geminiBodyCamel},
		{"snake stream", apiGeminiStream, geminiBodySnake},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequest(tt.a, "gemini-2.0-flash", []byte(tt.body), newEst)
			if err != nil {
				t.Fatalf("parseRequest() error = %v", err)
			}
			want := call{
				Model: "gemini-2.0-flash", Stream: tt.a == apiGeminiStream,
				Prompt:    prompt(t, "gemini-2.0-flash", msgs, tools),
				MaxOutput: 512, HasMaxOutput: true,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
