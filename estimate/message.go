package estimate

import "encoding/json"

// Message is one chat message, reduced to the text a provider turns into
// prompt tokens. It maps directly from the OpenAI and Anthropic SDK types:
//
//   - OpenAI chat: Role, Content (a string) or Parts (the text of each
//     content part), Name, ToolCalls from an assistant message, and
//     ToolCallID from a "tool" message.
//   - Anthropic messages: the system prompt as a Message with Role "system";
//     each text block as a Part; each tool_use block as a ToolCall with its
//     input marshalled to JSON; each tool_result block as a Message with
//     ToolCallID set to the tool_use_id and its text as Content.
//
// Images, audio and files are not counted: their cost depends on their size
// and on provider rules this package does not model. Callers that send them
// should add their own figure to the reserve.
type Message struct {
	// Role is "system", "developer", "user", "assistant" or "tool".
	Role string

	// Content is the message text. Leave it empty when the content is a
	// list of parts.
	Content string

	// Parts holds the text of each part when the content is a list of
	// parts. They are counted in addition to Content.
	Parts []string

	// Name is the optional participant name. A non-empty name costs one
	// extra token on top of its text, as OpenAI documents.
	Name string

	// ToolCalls are the tool calls an assistant message made.
	ToolCalls []ToolCall

	// ToolCallID links a tool-result message to the call it answers.
	ToolCallID string
}

// ToolCall is one function call made by the assistant.
type ToolCall struct {
	// ID is the provider's call id (OpenAI "call_…", Anthropic "toolu_…").
	ID string

	// Name is the function name.
	Name string

	// Arguments is the JSON text of the arguments, as the provider sent it.
	Arguments string
}

// Tool is one function definition offered to the model. Definitions are
// prompt tokens too, rendered by the provider into a hidden system message.
type Tool struct {
	// Name is the function name.
	Name string

	// Description says what the function does.
	Description string

	// Parameters is the JSON Schema of the arguments as sent to the provider:
	// OpenAI's function.parameters or Anthropic's input_schema, marshalled.
	// It may be empty for a function without arguments.
	Parameters json.RawMessage
}
