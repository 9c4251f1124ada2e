package pacerhttp

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmpacer/llmpacer/estimate"
)

// newEst is the estimator lookup the tests hand parseRequest: a fresh
// default Estimator per model, as the transport's cache would return.
func newEst(model string) *estimate.Estimator {
	e, err := estimate.New(model)
	if err != nil {
		panic(err) // no options: New cannot fail
	}
	return e
}

// marshal encodes v, which for the SDK param types is the exact body the
// SDK sends.
func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withStream adds "stream": true as the SDKs' streaming methods do: the
// param types have no such field.
func withStream(t testing.TB, body []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["stream"] = json.RawMessage("true")
	return marshal(t, m)
}

// prompt is package estimate's own figure for msgs and tools, margin
// included: what parseRequest must report.
func prompt(t testing.TB, model string, msgs []estimate.Message, tools []estimate.Tool) int64 {
	t.Helper()
	n, err := newEst(model).Estimate(estimate.Request{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// weather is the cookbook's function schema, as both SDKs send it.
var weather = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"location": map[string]any{"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
		"unit":     map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
	},
	"required": []string{"location"},
}

// weatherJSON is weather as the SDKs marshal it.
var weatherJSON = func() json.RawMessage {
	b, _ := json.Marshal(weather)
	return b
}()

// TestParseChat checks a chat body built by openai-go against package
// estimate's count of the same messages, and the output cap × n.
func TestParseChat(t *testing.T) {
	params := openai.ChatCompletionNewParams{
		Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a terse weather bot."),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("What is the weather in Paris?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/sky.png"}),
				openai.TextContentPart("And in Lyon?"),
			}),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       "call_abc",
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"location":"Paris"}`},
					},
				}},
			}},
			openai.ToolMessage(`{"temp":18}`, "call_abc"),
			{OfUser: &openai.ChatCompletionUserMessageParam{
				Name:    openai.String("ann"),
				Content: openai.ChatCompletionUserMessageParamContentUnion{OfString: openai.String("Thanks!")},
			}},
		},
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name:        "get_weather",
				Description: openai.String("Get the current weather."),
				Parameters:  weather,
			}),
		},
		MaxCompletionTokens: openai.Int(500),
		MaxTokens:           openai.Int(999), // deprecated: max_completion_tokens wins
		N:                   openai.Int(3),
		StreamOptions:       openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	body := withStream(t, marshal(t, params))

	got, err := parseRequest(apiOpenAIChat, "", body, newEst)
	if err != nil {
		t.Fatalf("parseRequest() error = %v", err)
	}
	msgs := []estimate.Message{
		{Role: "system", Content: "You are a terse weather bot."},
		{Role: "user", Parts: []string{"What is the weather in Paris?", "And in Lyon?"}},
		{Role: "assistant", ToolCalls: []estimate.ToolCall{{ID: "call_abc", Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
		{Role: "tool", Content: `{"temp":18}`, ToolCallID: "call_abc"},
		{Role: "user", Content: "Thanks!", Name: "ann"},
	}
	tools := []estimate.Tool{{Name: "get_weather", Description: "Get the current weather.", Parameters: weatherJSON}}
	want := call{
		Model: "gpt-4o", Stream: true, Prompt: prompt(t, "gpt-4o", msgs, tools),
		MaxOutput: 1500, HasMaxOutput: true, WantsUsage: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
	}
	// The figure is a real count, not a constant: o200k counts these
	// messages and tools at well over a hundred tokens.
	if got.Prompt < 100 {
		t.Errorf("Prompt = %d, implausibly small", got.Prompt)
	}
}

// TestParseChatVariants covers the other spellings of the cap, the
// deprecated function fields, refusals and Azure's model-less bodies.
func TestParseChatVariants(t *testing.T) {
	tests := []struct {
		name, urlModel, body string
		msgs                 []estimate.Message
		tools                []estimate.Tool
		want                 call // Prompt is filled from msgs and tools
	}{
		{
			name: "max_tokens alone, n absent",
			body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":64}`,
			msgs: []estimate.Message{{Role: "user", Content: "hi"}},
			want: call{Model: "gpt-4o-mini", MaxOutput: 64, HasMaxOutput: true},
		},
		{
			name: "no cap",
			body: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`,
			msgs: []estimate.Message{{Role: "user", Content: "hi"}},
			want: call{Model: "gpt-4o", Stream: true},
		},
		{
			name: "include_usage without stream is not wanted",
			body: `{"model":"gpt-4o","messages":[],"stream_options":{"include_usage":true},"max_completion_tokens":0}`,
			want: call{Model: "gpt-4o", HasMaxOutput: true},
		},
		{
			name:     "azure deployment names the model",
			urlModel: "prod-chat",
			body:     `{"messages":[{"role":"user","content":"hi"}],"max_tokens":10,"n":null}`,
			msgs:     []estimate.Message{{Role: "user", Content: "hi"}},
			want:     call{Model: "prod-chat", MaxOutput: 10, HasMaxOutput: true},
		},
		{
			name:     "body model wins over the deployment",
			urlModel: "prod-chat",
			body:     `{"model":"gpt-4.1","messages":[{"role":"user","content":"hi"}]}`,
			msgs:     []estimate.Message{{Role: "user", Content: "hi"}},
			want:     call{Model: "gpt-4.1"},
		},
		{
			name: "deprecated functions and function_call, refusal, custom tool call",
			body: `{"model":"gpt-4","messages":[
				{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{\"a\":1}"}},
				{"role":"function","name":"f","content":"42"},
				{"role":"assistant","refusal":"I can't.","content":[{"type":"refusal","refusal":"No."}]},
				{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"sql","input":"SELECT 1"}}]}],
				"functions":[{"name":"f","description":"Adds.","parameters":{"type":"object","properties":{}}}],
				"tools":[{"type":"custom","custom":{"name":"sql","description":"Runs SQL."}}]}`,
			msgs: []estimate.Message{
				{Role: "assistant", ToolCalls: []estimate.ToolCall{{Name: "f", Arguments: `{"a":1}`}}},
				{Role: "function", Name: "f", Content: "42"},
				{Role: "assistant", Parts: []string{"No.", "I can't."}},
				{Role: "assistant", ToolCalls: []estimate.ToolCall{{ID: "c1", Name: "sql", Arguments: "SELECT 1"}}},
			},
			tools: []estimate.Tool{
				{Name: "sql", Description: "Runs SQL."},
				{Name: "f", Description: "Adds.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
			},
			want: call{Model: "gpt-4"},
		},
		{
			name: "a cap times n saturates instead of wrapping",
			body: `{"model":"gpt-4o","messages":[],"max_completion_tokens":9000000000000000000,"n":10}`,
			want: call{Model: "gpt-4o", MaxOutput: math.MaxInt64, HasMaxOutput: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequest(apiOpenAIChat, tt.urlModel, []byte(tt.body), newEst)
			if err != nil {
				t.Fatalf("parseRequest() error = %v", err)
			}
			tt.want.Prompt = prompt(t, tt.want.Model, tt.msgs, tt.tools)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseRequestErrors checks that bodies the provider would refuse are
// errors, not estimates, and that the URL's facts survive.
func TestParseRequestErrors(t *testing.T) {
	tests := []struct {
		name     string
		a        api
		urlModel string
		body     string
	}{
		{"empty", apiOpenAIChat, "", ""},
		{"array", apiOpenAIChat, "", `[{"role":"user"}]`},
		{"null", apiAnthropicMessages, "", `null`},
		{"string", apiOpenAIResponses, "", `"hi"`},
		{"truncated", apiOpenAIChat, "", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"`},
		{"messages not a list", apiOpenAIChat, "", `{"model":"gpt-4o","messages":5}`},
		{"no messages", apiOpenAIChat, "", `{"model":"gpt-4o"}`},
		{"negative cap", apiOpenAIChat, "", `{"messages":[],"max_tokens":-1}`},
		{"cap not a number", apiAnthropicMessages, "", `{"messages":[],"max_tokens":"100"}`},
		{"no anthropic messages", apiAnthropicMessages, "", `{"model":"claude","max_tokens":10}`},
		{"no prompt", apiOpenAICompletions, "", `{"model":"x"}`},
		{"mixed prompt list", apiOpenAICompletions, "", `{"prompt":[1,"a"]}`},
		{"number prompt", apiOpenAICompletions, "", `{"prompt":5}`},
		{"no input", apiOpenAIEmbeddings, "", `{"model":"x","input":null}`},
		{"object input", apiOpenAIResponses, "", `{"input":{}}`},
		{"no contents", apiGeminiStream, "gemini-2.0-flash", `{"generationConfig":{}}`},
		{"not a model call", apiNone, "", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequest(tt.a, tt.urlModel, []byte(tt.body), newEst)
			if err == nil {
				t.Fatalf("parseRequest(%s) = %+v, want an error", tt.body, got)
			}
			want := call{Model: tt.urlModel, Stream: tt.a == apiGeminiStream}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parseRequest() on error mismatch (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(err.Error(), "pacerhttp: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}
