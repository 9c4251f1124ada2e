package pacerhttp

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/llmpacer/llmpacer/estimate"
)

// TestParseAnthropic checks a Messages body built by anthropic-sdk-go:
// system blocks, tool_use and tool_result blocks, an image left out, the
// tool definitions and max_tokens.
func TestParseAnthropic(t *testing.T) {
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		System:    []anthropic.TextBlockParam{{Text: "You are a weather bot."}, {Text: "Be brief."}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"), anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo=")),
			anthropic.NewAssistantMessage(anthropic.NewTextBlock("Checking."), anthropic.NewToolUseBlock("toolu_1", map[string]any{"location": "Paris"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "18 degrees", false), anthropic.NewTextBlock("Thanks")),
		},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "get_weather",
			Description: anthropic.String("Get the current weather."),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: weather["properties"], Required: []string{"location"}},
		}}},
	}
	body := withStream(t, marshal(t, params))
	got, err := parseRequest(apiAnthropicMessages, "", body, newEst)
	if err != nil {
		t.Fatalf("parseRequest() error = %v", err)
	}
	var sent struct {
		Tools []anthropicTool `json:"tools"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	msgs := []estimate.Message{
		{Role: "system", Parts: []string{"You are a weather bot.", "Be brief."}},
		{Role: "user", Parts: []string{"Weather in Paris?"}},
		{Role: "assistant", Parts: []string{"Checking."}, ToolCalls: []estimate.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
		{Role: "user", Parts: []string{"Thanks"}},
		{Role: "user", ToolCallID: "toolu_1", Parts: []string{"18 degrees"}},
	}
	tools := []estimate.Tool{{Name: "get_weather", Description: "Get the current weather.", Parameters: sent.Tools[0].InputSchema}}
	want := call{Model: "claude-sonnet-4-5", Stream: true, Prompt: prompt(t, "claude-sonnet-4-5", msgs, tools), MaxOutput: 1024, HasMaxOutput: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
	}

	t.Run("string system and content", func(t *testing.T) {
		body := `{"model":"claude-haiku-4-5","max_tokens":100,"system":"Be kind.","messages":[{"role":"user","content":"Hello"},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"image","source":{}}]},
			{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"redacted_thinking","data":"zz"}]}]}`
		got, err := parseRequest(apiAnthropicMessages, "", []byte(body), newEst)
		if err != nil {
			t.Fatalf("parseRequest() error = %v", err)
		}
		msgs := []estimate.Message{
			{Role: "system", Content: "Be kind."},
			{Role: "user", Content: "Hello"},
			{Role: "user", Parts: []string{"hmm"}},
			{Role: "user", ToolCallID: "t1", Parts: []string{"a"}},
		}
		want := call{Model: "claude-haiku-4-5", Prompt: prompt(t, "claude-haiku-4-5", msgs, nil), MaxOutput: 100, HasMaxOutput: true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
		}
	})
}
