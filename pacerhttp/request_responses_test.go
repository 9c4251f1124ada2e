package pacerhttp

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmpacer/llmpacer/estimate"
)

// TestParseResponses checks a Responses body built by openai-go: string
// and item-list input, instructions, flat function tools, the cap.
func TestParseResponses(t *testing.T) {
	params := responses.ResponseNewParams{
		Model:        "gpt-5",
		Instructions: openai.String("Answer in French."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				responses.ResponseInputContentParamOfInputText("Look at this:"),
				{OfInputImage: &responses.ResponseInputImageParam{ImageURL: openai.String("https://example.com/a.png"), Detail: responses.ResponseInputImageDetailAuto}},
			}, responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"location":"Paris"}`, "call_1", "get_weather"),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String("call_1"),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"temp":18}`)},
			}},
		}},
		Tools: []responses.ToolUnionParam{
			responses.ToolParamOfFunction("get_weather", weather, true),
			{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}},
		},
		MaxOutputTokens: openai.Int(2048),
	}
	body := withStream(t, marshal(t, params))
	got, err := parseRequest(apiOpenAIResponses, "", body, newEst)
	if err != nil {
		t.Fatalf("parseRequest() error = %v", err)
	}
	// The SDK sends the function's description as null; strict is not text.
	var sent struct {
		Tools []functionDef `json:"tools"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	msgs := []estimate.Message{
		{Role: "developer", Content: "Answer in French."},
		{Role: "user", Content: "What is the weather in Paris?"},
		{Role: "user", Parts: []string{"Look at this:"}},
		{Role: "assistant", ToolCalls: []estimate.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
		{Role: "tool", ToolCallID: "call_1", Content: `{"temp":18}`},
	}
	tools := []estimate.Tool{{Name: "get_weather", Parameters: sent.Tools[0].Parameters}}
	want := call{Model: "gpt-5", Stream: true, Prompt: prompt(t, "gpt-5", msgs, tools), MaxOutput: 2048, HasMaxOutput: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
	}

	t.Run("string input", func(t *testing.T) {
		body := marshal(t, responses.ResponseNewParams{Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hi.")}})
		got, err := parseRequest(apiOpenAIResponses, "", body, newEst)
		if err != nil {
			t.Fatalf("parseRequest() error = %v", err)
		}
		want := call{Model: "gpt-4o", Prompt: prompt(t, "gpt-4o", []estimate.Message{{Role: "user", Content: "Say hi."}}, nil)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
		}
	})
}
