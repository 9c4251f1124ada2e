package pacerhttp

import (
	"encoding/json"
	"fmt"

	"github.com/llmpacer/llmpacer/estimate"
)

// textContent is a content field that is either a string or a list of
// parts, as OpenAI's chat messages, Responses items and tool outputs send
// it. Only text is kept: images, audio and files cost tokens by rules that
// package estimate does not model, so they are left to the margin and the
// settle step.
type textContent struct {
	text  string   // the content when it is a string
	parts []string // the text of each text or refusal part
}

// contentPart is one part of an OpenAI content list. Text parts ("text",
// "input_text", "output_text", reasoning and summary text) carry text;
// refusal parts carry refusal; the rest carry neither.
type contentPart struct {
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// UnmarshalJSON reads a string or a list of parts. Any other value (null,
// or the object a computer_call_output holds) has no text to count.
func (c *textContent) UnmarshalJSON(b []byte) error {
	switch firstByte(b) {
	case '"':
		return json.Unmarshal(b, &c.text)
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		for _, p := range parts {
			if p.Text != "" {
				c.parts = append(c.parts, p.Text)
			}
			if p.Refusal != "" {
				c.parts = append(c.parts, p.Refusal)
			}
		}
	}
	return nil
}

// firstByte returns b's first byte that is not JSON white space, or 0.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// rawText counts a raw-text prompt: a string, a list of strings, a list of
// token ids, or a list of token-id lists, as the legacy completions and
// embeddings endpoints take them. Token ids count one each, exactly.
// Strings count with e.Text and no chat framing, since none is added.
func rawText(e *estimate.Estimator, raw json.RawMessage) (int64, error) {
	switch firstByte(raw) {
	case 0, 'n':
		return 0, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return e.Text(s), nil
	case '[':
	default:
		return 0, fmt.Errorf("prompt is neither a string nor a list")
	}
	// A flat list of token ids is the common large case: decode it
	// straight into numbers rather than one RawMessage per id.
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err == nil {
		return int64(len(ids)), nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return 0, err
	}
	var n int64
	for _, it := range items {
		switch firstByte(it) {
		case '"':
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return 0, err
			}
			n = addSat(n, e.Text(s))
		case '[':
			if err := json.Unmarshal(it, &ids); err != nil {
				return 0, err
			}
			n = addSat(n, int64(len(ids)))
		default:
			return 0, fmt.Errorf("prompt list holds %.20q", it)
		}
	}
	return n, nil
}
