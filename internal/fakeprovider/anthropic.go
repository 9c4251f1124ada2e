package fakeprovider

// This file has Anthropic's message bodies and stream events.

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Content      []anthropicBlock `json:"content"`
	Model        string           `json:"model"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// anthropicUsage is Anthropic's usage. Its input_tokens leave out the
// tokens read from or written to the prompt cache, which have their own
// fields: the three add up to the prompt.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// newAnthropicUsage is the usage of c once output tokens are out.
func newAnthropicUsage(c call, output int64) anthropicUsage {
	return anthropicUsage{InputTokens: c.prompt - c.cacheRead - c.cacheWrite,
		CacheCreationInputTokens: c.cacheWrite, CacheReadInputTokens: c.cacheRead, OutputTokens: output}
}

func newAnthropicMessage(c call, d decision) anthropicMessage {
	reason := stopReason(Anthropic, c.truncated)
	return anthropicMessage{
		ID: d.id, Type: "message", Role: "assistant",
		Content:    []anthropicBlock{{Type: "text", Text: c.text()}},
		Model:      c.model,
		StopReason: &reason,
		Usage:      newAnthropicUsage(c, c.output),
	}
}

// anthropicEvents are message_start (with the input and cache tokens),
// content_block_start, ping, one content_block_delta per word,
// content_block_stop, message_delta (stop reason and the cumulative
// usage: final output tokens, input and cache tokens again), then
// message_stop.
func anthropicEvents(c call, d decision) []event {
	type obj = map[string]any
	out := []event{
		{"message_start", obj{"type": "message_start", "message": anthropicMessage{
			ID: d.id, Type: "message", Role: "assistant", Content: []anthropicBlock{}, Model: c.model,
			// Like the real API, the start reports the first output token.
			Usage: newAnthropicUsage(c, min(1, c.output)),
		}}},
		{"content_block_start", obj{"type": "content_block_start", "index": 0,
			"content_block": anthropicBlock{Type: "text", Text: ""}}},
		{"ping", obj{"type": "ping"}},
	}
	for _, word := range c.words() {
		out = append(out, event{"content_block_delta", obj{"type": "content_block_delta", "index": 0,
			"delta": obj{"type": "text_delta", "text": word}}})
	}
	return append(out,
		event{"content_block_stop", obj{"type": "content_block_stop", "index": 0}},
		event{"message_delta", obj{"type": "message_delta",
			"delta": obj{"stop_reason": stopReason(Anthropic, c.truncated), "stop_sequence": nil},
			"usage": newAnthropicUsage(c, c.output)}},
		event{"message_stop", obj{"type": "message_stop"}},
	)
}
