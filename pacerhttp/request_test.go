package pacerhttp

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
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
			want := call{Model: "text-embedding-3-small", Prompt: tt.want, HasMaxOutput: true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parseRequest() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

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
