package pacerhttp

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
)

// TestWithIncludeUsage pins the exact bytes: everything but the one edit
// must reach the provider as the caller wrote it.
func TestWithIncludeUsage(t *testing.T) {
	tests := []struct {
		name, in, want string
		changed        bool
	}{
		{"absent", `{"model":"gpt-4o","stream":true}`, `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`, true},
		{"empty object", `{}`, `{"stream_options":{"include_usage":true}}`, true},
		{"spacing kept", "{\n  \"n\": 1.0e0,\n  \"stream\": true\n}\n", "{\n  \"n\": 1.0e0,\n  \"stream\": true,\"stream_options\":{\"include_usage\":true}\n}\n", true},
		{"null", `{"stream_options":null,"stream":true}`, `{"stream_options":{"include_usage":true},"stream":true}`, true},
		{"other members kept", `{"stream_options":{"include_obfuscation":false}}`, `{"stream_options":{"include_usage":true,"include_obfuscation":false}}`, true},
		{"empty options", `{"stream_options": { } }`, `{"stream_options": {"include_usage":true } }`, true},
		{"false", `{"stream_options":{"include_usage":false,"x":1}}`, `{"stream_options":{"include_usage":true,"x":1}}`, true},
		{"already true", `{"stream_options":{"include_usage": true}}`, `{"stream_options":{"include_usage": true}}`, false},
		{"repeated key: the last counts", `{"stream_options":{"include_usage":true},"stream_options":{}}`, `{"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}}`, true},
		{"wrong type replaced", `{"stream_options":"yes"}`, `{"stream_options":{"include_usage":true}}`, true},
		{"nested look-alike ignored", `{"messages":[{"content":"\"stream_options\":{}","stream_options":1}]}`, `{"messages":[{"content":"\"stream_options\":{}","stream_options":1}],"stream_options":{"include_usage":true}}`, true},
		{"escaped key matches", `{"stream\u005foptions":{"include_usage":true}}`, `{"stream\u005foptions":{"include_usage":true}}`, false},
		{"not JSON", `{"stream":`, `{"stream":`, false},
		{"array", `[1]`, `[1]`, false},
		{"empty", ``, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got, changed := withIncludeUsage(in)
			if string(got) != tt.want || changed != tt.changed {
				t.Errorf("withIncludeUsage(%s) = %s, %v; want %s, %v", tt.in, got, changed, tt.want, tt.changed)
			}
			if string(in) != tt.in {
				t.Errorf("withIncludeUsage wrote to its input: now %s", in)
			}
		})
	}
}

// TestWithIncludeUsageSDK checks an openai-go body end to end: the edited
// body decodes, through the SDK's own param type, to the same request
// with include_usage set, and parseRequest then sees WantsUsage.
func TestWithIncludeUsageSDK(t *testing.T) {
	params := openai.ChatCompletionNewParams{
		Model:               "gpt-4o-mini",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		MaxCompletionTokens: openai.Int(20),
		StreamOptions:       openai.ChatCompletionStreamOptionsParam{IncludeObfuscation: openai.Bool(false)},
	}
	body := withStream(t, marshal(t, params))
	got, changed := withIncludeUsage(body)
	if !changed {
		t.Fatalf("withIncludeUsage(%s) changed nothing", body)
	}
	var before, after map[string]any
	if err := json.Unmarshal(body, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &after); err != nil {
		t.Fatalf("edited body is not JSON: %v\n%s", err, got)
	}
	before["stream_options"].(map[string]any)["include_usage"] = true
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("edited body mismatch (-want +got):\n%s", diff)
	}
	c, err := parseRequest(apiOpenAIChat, "", got, newEst)
	if err != nil || !c.WantsUsage {
		t.Errorf("parseRequest(edited) = %+v, %v; want WantsUsage", c, err)
	}
}
