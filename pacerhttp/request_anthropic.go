package pacerhttp

import (
	"encoding/json"
	"errors"

	"github.com/llmpacer/llmpacer/estimate"
)

// anthropicBody is a Messages API request, with the JSON names of
// anthropic-sdk-go v2's MessageNewParams. max_tokens is required by the
// API and includes any thinking budget, so it is the whole output cap.
type anthropicBody struct {
	Model     string             `json:"model"`
	Stream    bool               `json:"stream"`
	MaxTokens *int64             `json:"max_tokens"`
	System    anthropicContent   `json:"system"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools"`
}

// anthropicMessage is one turn.
type anthropicMessage struct {
	Role    string           `json:"role"`
	Content anthropicContent `json:"content"`
}

// anthropicTool is a tools[] entry. Server tools (web_search, bash, ...)
// have a type and a name but no schema; they are counted by name, which
// the hidden tool preamble estimate already dwarfs.
type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicContent is a content field: a string or a list of blocks.
type anthropicContent struct {
	text   string
	blocks []anthropicBlock
}

// anthropicBlock is one content block. Text and thinking blocks carry
// text; tool_use carries id, name and input; tool_result carries
// tool_use_id and content (a string or blocks). Image, document and
// redacted_thinking blocks are not counted: their cost is not text.
type anthropicBlock struct {
	Type      string           `json:"type"`
	Text      string           `json:"text"`
	Thinking  string           `json:"thinking"`
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	Input     json.RawMessage  `json:"input"`
	ToolUseID string           `json:"tool_use_id"`
	Content   anthropicContent `json:"content"`
}

// UnmarshalJSON reads a string or a list of blocks. Anything else (null,
// or the error object a server tool's result block may hold) has no text.
func (c *anthropicContent) UnmarshalJSON(b []byte) error {
	switch firstByte(b) {
	case '"':
		return json.Unmarshal(b, &c.text)
	case '[':
		return json.Unmarshal(b, &c.blocks)
	}
	return nil
}

// parseAnthropic reads a Messages body. The system prompt becomes a
// "system" message and each tool_result block a message of its own, as
// package estimate's Message doc describes.
func parseAnthropic(c *call, body []byte, est func(string) *estimate.Estimator) error {
	var b anthropicBody
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	if b.Messages == nil {
		return errors.New("no messages")
	}
	c.Model = modelOr(b.Model, c.Model)
	c.Stream = b.Stream

	var msgs []estimate.Message
	if sys := b.System.message("system"); sys.Content != "" || len(sys.Parts) > 0 {
		msgs = append(msgs, sys)
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		msgs = append(msgs, m.Content.message(m.Role))
		for j := range m.Content.blocks {
			if bl := &m.Content.blocks[j]; bl.Type == "tool_result" {
				r := bl.Content.message(m.Role)
				r.ToolCallID = bl.ToolUseID
				msgs = append(msgs, r)
			}
		}
	}
	tools := make([]estimate.Tool, 0, len(b.Tools))
	for _, t := range b.Tools {
		tool := estimate.Tool{Name: t.Name, Description: t.Description}
		if !isNull(t.InputSchema) {
			tool.Parameters = t.InputSchema
		}
		tools = append(tools, tool)
	}
	c.Prompt = promptTokens(est(c.Model), msgs, tools)
	if b.MaxTokens != nil {
		return c.setCap(*b.MaxTokens, 1)
	}
	return nil
}

// message converts content for package estimate: text and thinking blocks
// become parts, tool_use blocks tool calls with their input as JSON text.
// tool_result blocks are left to the caller, which makes each a message.
func (c *anthropicContent) message(role string) estimate.Message {
	m := estimate.Message{Role: role, Content: c.text}
	for i := range c.blocks {
		bl := &c.blocks[i]
		switch bl.Type {
		case "text":
			m.Parts = append(m.Parts, bl.Text)
		case "thinking":
			m.Parts = append(m.Parts, bl.Thinking)
		case "tool_use", "server_tool_use":
			args := ""
			if !isNull(bl.Input) {
				args = string(bl.Input)
			}
			m.ToolCalls = append(m.ToolCalls, estimate.ToolCall{ID: bl.ID, Name: bl.Name, Arguments: args})
		}
	}
	return m
}
