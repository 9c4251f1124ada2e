package pacerhttp

import (
	"encoding/json"
	"errors"

	"github.com/llmpacer/llmpacer/estimate"
)

// responsesBody is a Responses API create request (openai-go's
// responses.ResponseNewParams). Its prompt is instructions plus input;
// earlier turns named by previous_response_id or conversation, and stored
// prompt templates, are on the server and cannot be counted here: the
// settle step corrects for them.
type responsesBody struct {
	Model           string          `json:"model"`
	Stream          bool            `json:"stream"`
	Instructions    textContent     `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	Tools           []responsesTool `json:"tools"`
	MaxOutputTokens *int64          `json:"max_output_tokens"`
}

// responsesTool is a tools[] entry. Function and custom tools are flat
// here, unlike chat's; built-in tools (web_search, file_search, ...) have
// only a type, and their hidden cost is not documented, so they are not
// counted.
type responsesTool struct {
	Type string `json:"type"`
	functionDef
}

// responsesItem is one input item. A message (type "message", or no type
// with a role) has content; a function_call has call_id, name and
// arguments; a function_call_output has call_id and output; custom tool
// calls have input instead of arguments; a reasoning item has summary
// (and maybe content) parts.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   textContent     `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	Output    textContent     `json:"output"`
	Summary   textContent     `json:"summary"`
}

// parseResponses reads a Responses create body. Input may be a string (one
// user message) or a list of items; the cap is max_output_tokens, which
// covers reasoning too.
func parseResponses(c *call, body []byte, est func(string) *estimate.Estimator) error {
	var b responsesBody
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	c.Model = modelOr(b.Model, c.Model)
	c.Stream = b.Stream

	var msgs []estimate.Message
	if b.Instructions.text != "" || len(b.Instructions.parts) > 0 {
		msgs = append(msgs, estimate.Message{Role: "developer", Content: b.Instructions.text, Parts: b.Instructions.parts})
	}
	switch firstByte(b.Input) {
	case 0, 'n':
	case '"':
		var s string
		if err := json.Unmarshal(b.Input, &s); err != nil {
			return err
		}
		msgs = append(msgs, estimate.Message{Role: "user", Content: s})
	case '[':
		var items []responsesItem
		if err := json.Unmarshal(b.Input, &items); err != nil {
			return err
		}
		for i := range items {
			msgs = append(msgs, items[i].message())
		}
	default:
		return errors.New("input is neither a string nor a list")
	}
	var tools []estimate.Tool
	for i := range b.Tools {
		if b.Tools[i].Type == "function" || b.Tools[i].Type == "custom" {
			tools = append(tools, b.Tools[i].tool())
		}
	}
	c.Prompt = promptTokens(est(c.Model), msgs, tools)
	if b.MaxOutputTokens != nil {
		return c.setCap(*b.MaxOutputTokens, 1)
	}
	return nil
}

// message converts an input item for package estimate: tool calls become
// an assistant message with a ToolCall, tool outputs a "tool" message, so
// that each costs what the chat rules charge for it.
func (it *responsesItem) message() estimate.Message {
	switch it.Type {
	case "function_call", "custom_tool_call", "mcp_call":
		args, _ := rawString(it.Arguments)
		if args == "" {
			args, _ = rawString(it.Input)
		}
		return estimate.Message{Role: "assistant", ToolCalls: []estimate.ToolCall{{ID: it.CallID, Name: it.Name, Arguments: args}}}
	case "function_call_output", "custom_tool_call_output":
		return estimate.Message{Role: "tool", ToolCallID: it.CallID, Content: it.Output.text, Parts: it.Output.parts}
	}
	m := estimate.Message{Role: it.Role, Content: it.Content.text, Parts: it.Content.parts}
	m.Parts = append(m.Parts, it.Summary.parts...)
	return m
}
