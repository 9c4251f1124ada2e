package pacerhttp

import (
	"encoding/json"
	"errors"

	"github.com/llmpacer/llmpacer/estimate"
)

// The OpenAI request shapes below keep only what costs tokens or sets the
// output cap. Their JSON names are those of openai-go v3's param types
// (ChatCompletionNewParams, CompletionNewParams, EmbeddingNewParams,
// responses.ResponseNewParams); "stream" is not a param field there
// because the SDK's streaming methods add it to the body themselves.

// streamOptions is stream_options, read to know whether the caller asked
// for the final usage chunk already.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatBody is a chat/completions request.
type chatBody struct {
	Model               string         `json:"model"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	Messages            []chatMessage  `json:"messages"`
	Tools               []chatTool     `json:"tools"`
	Functions           []functionDef  `json:"functions"`
	MaxCompletionTokens *int64         `json:"max_completion_tokens"`
	MaxTokens           *int64         `json:"max_tokens"`
	N                   *int64         `json:"n"`
}

// chatMessage is one message of any role. Assistant messages carry
// tool_calls (or the deprecated function_call) and maybe a refusal; tool
// messages carry tool_call_id.
type chatMessage struct {
	Role         string          `json:"role"`
	Content      textContent     `json:"content"`
	Name         string          `json:"name"`
	Refusal      string          `json:"refusal"`
	ToolCalls    []chatToolCall  `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall *functionCallIn `json:"function_call"`
}

// chatToolCall is a function tool call, or a custom tool call whose text
// is its input.
type chatToolCall struct {
	ID       string         `json:"id"`
	Function functionCallIn `json:"function"`
	Custom   struct {
		Name  string `json:"name"`
		Input string `json:"input"`
	} `json:"custom"`
}

// functionCallIn is a call's name and its arguments as JSON text.
type functionCallIn struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatTool is a tools[] entry: a function, or a custom tool (which has no
// schema).
type chatTool struct {
	Function *functionDef `json:"function"`
	Custom   *functionDef `json:"custom"`
}

// functionDef is a function definition, as chat's tools[].function,
// chat's deprecated functions[] and Responses' flat tools[] spell it.
type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// tool converts a definition for package estimate.
func (f *functionDef) tool() estimate.Tool {
	t := estimate.Tool{Name: f.Name, Description: f.Description}
	if !isNull(f.Parameters) {
		t.Parameters = f.Parameters
	}
	return t
}

// parseChat reads a chat/completions body. The output cap is
// max_completion_tokens, else the deprecated max_tokens, times n: each
// of the n choices may use the whole cap.
func parseChat(c *call, body []byte, est func(string) *estimate.Estimator) error {
	var b chatBody
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	if b.Messages == nil {
		return errors.New("no messages")
	}
	c.Model = modelOr(b.Model, c.Model)
	c.Stream = b.Stream
	c.WantsUsage = b.Stream && b.StreamOptions != nil && b.StreamOptions.IncludeUsage

	msgs := make([]estimate.Message, 0, len(b.Messages))
	for i := range b.Messages {
		msgs = append(msgs, b.Messages[i].message())
	}
	var tools []estimate.Tool
	for i := range b.Tools {
		if f := b.Tools[i].Function; f != nil {
			tools = append(tools, f.tool())
		} else if f := b.Tools[i].Custom; f != nil {
			tools = append(tools, f.tool())
		}
	}
	for i := range b.Functions {
		tools = append(tools, b.Functions[i].tool())
	}
	c.Prompt = promptTokens(est(c.Model), msgs, tools)

	capTokens := b.MaxCompletionTokens
	if capTokens == nil {
		capTokens = b.MaxTokens
	}
	if capTokens != nil {
		return c.setCap(*capTokens, deref(b.N))
	}
	return nil
}

// message converts a chat message for package estimate.
func (m *chatMessage) message() estimate.Message {
	out := estimate.Message{
		Role:       m.Role,
		Content:    m.Content.text,
		Parts:      m.Content.parts,
		Name:       m.Name,
		ToolCallID: m.ToolCallID,
	}
	if m.Refusal != "" {
		out.Parts = append(out.Parts, m.Refusal)
	}
	for _, tc := range m.ToolCalls {
		call := estimate.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		if call.Name == "" && call.Arguments == "" {
			call.Name, call.Arguments = tc.Custom.Name, tc.Custom.Input
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	if f := m.FunctionCall; f != nil {
		out.ToolCalls = append(out.ToolCalls, estimate.ToolCall{Name: f.Name, Arguments: f.Arguments})
	}
	return out
}

// completionsBody is a legacy completions request.
type completionsBody struct {
	Model         string          `json:"model"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	Prompt        json.RawMessage `json:"prompt"`
	Suffix        *string         `json:"suffix"`
	MaxTokens     *int64          `json:"max_tokens"`
	N             *int64          `json:"n"`
	BestOf        *int64          `json:"best_of"`
}

// completionsDefaultMax is the legacy endpoint's max_tokens when the body
// sets none, per OpenAI's API reference ("Defaults to 16"). The cap is
// then known, so the call reports it as set.
const completionsDefaultMax = 16

// parseCompletions reads a legacy completions body. The server generates
// best_of completions and returns n of them (best_of must exceed n), so
// the larger of the two multiplies the cap.
func parseCompletions(c *call, body []byte, est func(string) *estimate.Estimator) error {
	var b completionsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	if isNull(b.Prompt) {
		return errors.New("no prompt")
	}
	c.Model = modelOr(b.Model, c.Model)
	c.Stream = b.Stream
	c.WantsUsage = b.Stream && b.StreamOptions != nil && b.StreamOptions.IncludeUsage

	e := est(c.Model)
	n, err := rawText(e, b.Prompt)
	if err != nil {
		return err
	}
	if b.Suffix != nil {
		n = addSat(n, e.Text(*b.Suffix))
	}
	c.Prompt = n

	maxTokens := int64(completionsDefaultMax)
	if b.MaxTokens != nil {
		maxTokens = *b.MaxTokens
	}
	return c.setCap(maxTokens, max(deref(b.N), deref(b.BestOf)))
}

// embeddingsBody is an embeddings request.
type embeddingsBody struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

// parseEmbeddings reads an embeddings body. Embeddings produce no output
// tokens, so the call's output cap is 0 and it reserves its input alone.
func parseEmbeddings(c *call, body []byte, est func(string) *estimate.Estimator) error {
	var b embeddingsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	if isNull(b.Input) {
		return errors.New("no input")
	}
	c.Model = modelOr(b.Model, c.Model)
	n, err := rawText(est(c.Model), b.Input)
	if err != nil {
		return err
	}
	c.Prompt = n
	// A cap of 0, not none: without one the transport would add
	// DefaultMaxOutput to a call that generates nothing.
	c.HasMaxOutput = true
	return nil
}

// deref returns *p, or 0 for nil.
func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
