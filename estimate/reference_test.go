package estimate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// This file is the test oracle: OpenAI's cookbook functions
// num_tokens_from_messages and num_tokens_for_tools, transcribed to Go
// against the tokenizer directly, without any of the package's code. The
// cookbook's num_tokens_from_messages counts every string value of a message
// dict; here that means role, content, each text part, name (+1),
// tool_call_id, and, for each tool call, its id, type ("function"), name and
// arguments.

// openAITokens returns the "real" prompt tokens of msgs and tools with the
// given encoding, counted the cookbook's way.
func openAITokens(t testing.TB, enc tokenizer.Encoding, msgs []Message, tools []Tool) int64 {
	t.Helper()
	c, err := tokenizer.Get(enc)
	if err != nil {
		t.Fatalf("tokenizer.Get(%s): %v", enc, err)
	}
	count := func(s string) int64 {
		n, err := c.Count(s)
		if err != nil {
			t.Fatalf("Count(%q): %v", s, err)
		}
		return int64(n)
	}
	var n int64
	for _, m := range msgs {
		n += 3 + count(m.Role) + count(m.Content) + count(m.ToolCallID)
		for _, p := range m.Parts {
			n += count(p)
		}
		if m.Name != "" {
			n += count(m.Name) + 1
		}
		for _, tc := range m.ToolCalls {
			n += count(tc.ID) + count("function") + count(tc.Name) + count(tc.Arguments)
		}
	}
	n += 3
	return n + oracleTools(t, enc, count, tools)
}

// oracleTools is num_tokens_for_tools without the messages part.
func oracleTools(t testing.TB, enc tokenizer.Encoding, count func(string) int64, tools []Tool) int64 {
	t.Helper()
	if len(tools) == 0 {
		return 0
	}
	funcInit := int64(10) // gpt-3.5-turbo, gpt-4
	if enc == tokenizer.O200kBase {
		funcInit = 7 // gpt-4o, gpt-4o-mini
	}
	var n int64
	for _, tool := range tools {
		n += funcInit + count(tool.Name+":"+strings.TrimSuffix(tool.Description, "."))
		var schema struct {
			Properties map[string]struct {
				Type        string   `json:"type"`
				Description string   `json:"description"`
				Enum        []string `json:"enum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tool.Parameters, &schema); err != nil {
			t.Fatalf("oracle handles flat string schemas only: %v", err)
		}
		if len(schema.Properties) > 0 {
			n += 3
			for name, p := range schema.Properties {
				n += 3
				if p.Enum != nil {
					n += -3
					for _, item := range p.Enum {
						n += 3 + count(item)
					}
				}
				n += count(name + ":" + p.Type + ":" + strings.TrimSuffix(p.Description, "."))
			}
		}
	}
	return n + 12
}
