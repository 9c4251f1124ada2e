package pacerhttp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmpacer/llmpacer/estimate"
)

// fuzzModels are the estimators the fuzzer picks from: both BPE encodings
// and the fallback, built once so that each input costs only its count.
var fuzzModels = map[string]*estimate.Estimator{
	"gpt-4o": newEst("gpt-4o"), "gpt-4": newEst("gpt-4"), "claude": newEst("claude"),
}

// fuzzEst returns a shared estimator for any model name.
func fuzzEst(model string) *estimate.Estimator {
	if e, ok := fuzzModels[model]; ok {
		return e
	}
	return fuzzModels["claude"]
}

// requestSeeds are bodies of every endpoint, most marshalled by the SDKs.
func requestSeeds(t testing.TB) map[api][][]byte {
	chat := marshal(t, openai.ChatCompletionNewParams{
		Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."), openai.UserMessage("Weather in Paris?"),
			openai.ToolMessage(`{"t":18}`, "call_1"),
		},
		MaxCompletionTokens: openai.Int(100), N: openai.Int(2),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeObfuscation: openai.Bool(false)},
	})
	resp := marshal(t, responses.ResponseNewParams{
		Model: "gpt-4o", Instructions: openai.String("Be brief."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Hi", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"a":1}`, "c1", "f"),
		}},
		Tools:           []responses.ToolUnionParam{responses.ToolParamOfFunction("f", weather, true)},
		MaxOutputTokens: openai.Int(64),
	})
	ant := marshal(t, anthropic.MessageNewParams{
		Model: "claude-sonnet-4-5", MaxTokens: 1024,
		System: []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Hi")),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("t1", map[string]any{"a": 1}, "f")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("t1", "ok", false)),
		},
	})
	comp := marshal(t, openai.CompletionNewParams{Model: "gpt-3.5-turbo-instruct",
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"a", "b"}}, BestOf: openai.Int(3)})
	emb := marshal(t, openai.EmbeddingNewParams{Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}, {3}}}})
	return map[api][][]byte{
		apiOpenAIChat:        {chat, withStream(t, chat), []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream_options":null}`)},
		apiOpenAIResponses:   {resp, []byte(`{"input":"hi","stream":true}`)},
		apiOpenAICompletions: {comp, []byte(`{"prompt":[[1,2],[3]],"max_tokens":5,"n":2}`)},
		apiOpenAIEmbeddings:  {emb, []byte(`{"input":["a","b"]}`)},
		apiAnthropicMessages: {ant, []byte(`{"system":"s","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)},
		apiGeminiGenerate:    {[]byte(geminiBodyCamel)},
		apiGeminiStream:      {[]byte(geminiBodySnake)},
		apiNone:              {[]byte(`{}`), []byte(`[`), []byte("")},
	}
}

// FuzzParseRequest checks that parseRequest never panics and reports no
// negative figures, and that withIncludeUsage, on any body, either leaves
// it alone or returns valid JSON that differs only in include_usage.
func FuzzParseRequest(f *testing.F) {
	for a, bodies := range requestSeeds(f) {
		for _, b := range bodies {
			f.Add(uint8(a), "gpt-4o", b)
		}
	}
	f.Fuzz(func(t *testing.T, a uint8, urlModel string, body []byte) {
		ap := api(a % uint8(len(apiNames)))
		c, err := parseRequest(ap, urlModel, body, fuzzEst)
		if c.Prompt < 0 || c.MaxOutput < 0 || (!c.HasMaxOutput && c.MaxOutput != 0) {
			t.Errorf("parseRequest(%v, %q) = %+v, %v: negative or stray figures", ap, body, c, err)
		}
		if err != nil && (c.Prompt != 0 || c.MaxOutput != 0 || c.HasMaxOutput || c.WantsUsage) {
			t.Errorf("parseRequest(%v, %q) = %+v with error %v: want only the URL's facts", ap, body, c, err)
		}
		if ap == apiGeminiStream && !c.Stream {
			t.Errorf("parseRequest(gemini stream) = %+v: Stream false", c)
		}
		checkIncludeUsage(t, body)
	})
}

// checkIncludeUsage checks withIncludeUsage on one body.
func checkIncludeUsage(t *testing.T, body []byte) {
	orig := bytes.Clone(body)
	got, changed := withIncludeUsage(body)
	if !bytes.Equal(body, orig) {
		t.Fatalf("withIncludeUsage wrote to its input")
	}
	if !changed {
		if !bytes.Equal(got, body) {
			t.Errorf("withIncludeUsage(%q) = %q but reports no change", body, got)
		}
		return
	}
	var before, after map[string]json.RawMessage
	if err := json.Unmarshal(body, &before); err != nil {
		t.Fatalf("withIncludeUsage changed a body that is not an object: %q", body)
	}
	if err := json.Unmarshal(got, &after); err != nil {
		t.Fatalf("withIncludeUsage(%q) = %q, not a JSON object: %v", body, got, err)
	}
	var opts map[string]json.RawMessage
	if err := json.Unmarshal(after["stream_options"], &opts); err != nil || string(opts["include_usage"]) != "true" {
		t.Errorf("withIncludeUsage(%q) = %q: stream_options.include_usage not true", body, got)
	}
	var oldOpts map[string]json.RawMessage
	if json.Unmarshal(before["stream_options"], &oldOpts) == nil {
		for k, v := range oldOpts {
			if k != "include_usage" && !bytes.Equal(opts[k], v) {
				t.Errorf("withIncludeUsage(%q) changed stream_options.%s", body, k)
			}
		}
	}
	delete(before, "stream_options")
	delete(after, "stream_options")
	if len(before) != len(after) {
		t.Errorf("withIncludeUsage(%q) = %q: members added or lost", body, got)
	}
	for k, v := range before {
		if !bytes.Equal(after[k], v) {
			t.Errorf("withIncludeUsage(%q) changed member %q", body, k)
		}
	}
}
