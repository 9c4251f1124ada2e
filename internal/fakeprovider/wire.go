package fakeprovider

import (
	"encoding/json"
	"fmt"
)

// wireRequest holds the fields read from every endpoint's request body.
type wireRequest struct {
	Model               string          `json:"model"`
	Messages            []wireMessage   `json:"messages"`     // chat, Anthropic
	System              json.RawMessage `json:"system"`       // Anthropic
	Instructions        json.RawMessage `json:"instructions"` // responses
	Input               json.RawMessage `json:"input"`        // responses, embeddings
	Prompt              json.RawMessage `json:"prompt"`       // completions
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"` // chat
	MaxOutputTokens     *int64          `json:"max_output_tokens"`     // responses
	N                   *int64          `json:"n"`                     // chat, completions
	EncodingFormat      string          `json:"encoding_format"`       // embeddings
	Dimensions          *int64          `json:"dimensions"`            // embeddings
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`

	// Gemini
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	GenerationConfig  *struct {
		MaxOutputTokens *int64 `json:"maxOutputTokens"`
		CandidateCount  *int64 `json:"candidateCount"`
	} `json:"generationConfig"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type geminiContent struct {
	Role  string `json:"role,omitempty"`
	Parts []struct {
		Text string `json:"text"`
	} `json:"parts"`
}

// defaultDimensions is the length of an embedding when the request does
// not set one; maxDimensions caps what it may ask for.
const (
	defaultDimensions = 8
	maxDimensions     = 4096
)

// fill checks the fields the endpoint requires and copies into c the
// model, the output cap, the number of choices and the stream options.
func (req wireRequest) fill(c *call, style Style) *apiError {
	if c.model == "" {
		c.model = req.Model
	}
	if c.model == "" {
		return invalidRequest("model", "you must provide a model parameter")
	}
	c.n, c.stream = 1, req.Stream
	var apiErr *apiError
	switch c.ep {
	case ChatCompletions, Messages:
		if len(req.Messages) == 0 {
			return invalidRequest("messages", "messages: at least one message is required")
		}
		c.maxTokens, apiErr = req.messagesCap(style)
		if apiErr == nil && c.ep == ChatCompletions {
			c.n, apiErr = pickCount(style, "n", req.N, 1, maxChoices)
		}
	case Completions:
		if len(req.Prompt) == 0 || string(req.Prompt) == "null" {
			return invalidRequest("prompt", "prompt: you must provide a prompt")
		}
		c.maxTokens, apiErr = pickCount(style, "max_tokens", req.MaxTokens, defaultMaxTokens, maxCount)
		if apiErr == nil {
			c.n, apiErr = pickCount(style, "n", req.N, 1, maxChoices)
		}
	case Responses:
		if len(req.Input) == 0 || string(req.Input) == "null" {
			return invalidRequest("input", "input: you must provide an input")
		}
		c.maxTokens, apiErr = pickCount(style, "max_output_tokens", req.MaxOutputTokens, defaultMaxTokens, maxCount)
	case Embeddings:
		c.stream = false
		apiErr = req.fillEmbeddings(c, style)
	case GenerateContent, StreamGenerateContent:
		if len(req.Contents) == 0 {
			return invalidRequest("contents", "* GenerateContentRequest.contents: contents is not specified")
		}
		c.stream = c.ep == StreamGenerateContent
		var gc struct{ max, n *int64 }
		if g := req.GenerationConfig; g != nil {
			gc.max, gc.n = g.MaxOutputTokens, g.CandidateCount
		}
		c.maxTokens, apiErr = pickCount(style, "generationConfig.maxOutputTokens", gc.max, defaultMaxTokens, maxCount)
		if apiErr == nil {
			c.n, apiErr = pickCount(style, "generationConfig.candidateCount", gc.n, 1, maxChoices)
		}
	}
	if c.stream && req.StreamOptions != nil && style == OpenAI {
		c.includeUsage = req.StreamOptions.IncludeUsage
	}
	return apiErr
}

// messagesCap returns the output cap of a chat or Anthropic request.
func (req wireRequest) messagesCap(style Style) (int64, *apiError) {
	if style == Anthropic && req.MaxTokens == nil {
		return 0, invalidRequest("max_tokens", "max_tokens: Field required")
	}
	if req.MaxCompletionTokens != nil {
		// The newer OpenAI name wins, as it does for the real API's
		// reasoning models that reject max_tokens.
		return pickCount(style, "max_completion_tokens", req.MaxCompletionTokens, defaultMaxTokens, maxCount)
	}
	return pickCount(style, "max_tokens", req.MaxTokens, defaultMaxTokens, maxCount)
}

// fillEmbeddings reads the inputs and the vector format of an embeddings
// request, which has no output.
func (req wireRequest) fillEmbeddings(c *call, style Style) *apiError {
	inputs, _, err := embeddingInputs(req.Input)
	if err != nil || inputs == 0 {
		return invalidRequest("input", "input: must be a non-empty string, array of strings, array of tokens or array of token arrays")
	}
	dims, apiErr := pickCount(style, "dimensions", req.Dimensions, defaultDimensions, maxDimensions)
	if apiErr != nil {
		return apiErr
	}
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		return invalidRequest("encoding_format", fmt.Sprintf("encoding_format: %q is not one of float, base64", req.EncodingFormat))
	}
	c.inputs, c.dimensions, c.base64 = inputs, int(dims), req.EncodingFormat == "base64"
	return nil
}

// embeddingInputs counts the inputs of an embeddings request and the
// prompt tokens they hold: a string or strings are estimated from their
// text, token arrays are counted as they are.
func embeddingInputs(raw json.RawMessage) (inputs int, tokens int64, err error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return 1, ceilDiv(int64(len(s)), 4), nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		for _, s := range ss {
			tokens += ceilDiv(int64(len(s)), 4)
		}
		return len(ss), tokens, nil
	}
	var toks []int64
	if err := json.Unmarshal(raw, &toks); err == nil {
		return min(len(toks), 1), int64(len(toks)), nil
	}
	var arrays [][]int64
	if err := json.Unmarshal(raw, &arrays); err != nil {
		return 0, 0, err
	}
	for _, a := range arrays {
		tokens += int64(len(a))
	}
	return len(arrays), tokens, nil
}

// estimatePrompt counts one token per four bytes of input text, rounded
// up: the usual rule of thumb for English, and good enough for a
// simulator.
func (req wireRequest) estimatePrompt(ep Endpoint) (int64, *apiError) {
	switch ep {
	case Embeddings:
		_, n, _ := embeddingInputs(req.Input) // checked by fill
		return n, nil
	case Completions:
		// A legacy prompt is a string, strings or token arrays, like an
		// embeddings input.
		_, n, err := embeddingInputs(req.Prompt)
		if err != nil {
			return 0, invalidRequest("prompt", "prompt: must be a string, an array of strings or token arrays")
		}
		return n, nil
	case GenerateContent, StreamGenerateContent:
		var size int
		contents := req.Contents
		if req.SystemInstruction != nil {
			contents = append(contents, *req.SystemInstruction)
		}
		for _, c := range contents {
			for _, p := range c.Parts {
				size += len(p.Text)
			}
		}
		return ceilDiv(int64(size), 4), nil
	}
	var size int64
	for _, f := range req.textFields(ep) {
		text, err := contentText(f.raw)
		if err != nil {
			return 0, invalidRequest(f.param, f.param+": must be a string or an array of text parts")
		}
		size += int64(len(text))
	}
	return ceilDiv(size, 4), nil
}

// textField is one request field that holds prompt text.
type textField struct {
	param string
	raw   json.RawMessage
}

// textFields lists the fields that hold the prompt of an OpenAI or
// Anthropic request.
func (req wireRequest) textFields(ep Endpoint) []textField {
	var out []textField
	switch ep {
	case Responses:
		out = append(out, textField{"instructions", req.Instructions})
		var items []wireMessage
		if json.Unmarshal(req.Input, &items) != nil {
			// Not a list of items: a string, or an error contentText reports.
			return append(out, textField{"input", req.Input})
		}
		for i, m := range items {
			out = append(out, textField{fmt.Sprintf("input[%d].content", i), m.Content})
		}
		return out
	}
	out = append(out, textField{"system", req.System})
	for i, m := range req.Messages {
		out = append(out, textField{fmt.Sprintf("messages[%d].content", i), m.Content})
	}
	return out
}

// contentText returns the text of a content field, which every API
// accepts as a string or as an array of parts with a "text" field.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	for _, p := range parts {
		s += p.Text
	}
	return s, nil
}
