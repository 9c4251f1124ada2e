package fakeprovider

import (
	"encoding/json"
	"io"
	"net/http"
)

// sse writes Server-Sent Events and flushes each one, so a client sees
// the stream arrive piece by piece. A failed write means the client has
// gone; the call is charged either way, so errors are dropped.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// send writes one event; an empty name writes a bare data line, as
// OpenAI does.
func (s sse) send(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	if name != "" {
		_, _ = io.WriteString(s.w, "event: "+name+"\n")
	}
	_, _ = io.WriteString(s.w, "data: "+string(b)+"\n\n")
	_ = s.rc.Flush()
}

// writeStream writes the 200 of an admitted call that asked for
// "stream": true. The rate-limit headers come first, as with any answer.
func writeStream(w http.ResponseWriter, style Style, c call, d decision) {
	h := w.Header()
	setRateHeaders(h, style, d.limits)
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := sse{w: w, rc: http.NewResponseController(w)}
	if style == Anthropic {
		streamAnthropic(s, c, d)
		return
	}
	streamOpenAI(s, c, d)
}

type openAIChunk struct {
	ID      string              `json:"id"`
	Object  string              `json:"object"`
	Created int64               `json:"created"`
	Model   string              `json:"model"`
	Choices []openAIChunkChoice `json:"choices"`
	// Usage is absent without stream_options.include_usage, null on
	// every chunk but the last with it, and the totals on the last.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type openAIChunkChoice struct {
	Index        int         `json:"index"`
	Delta        openAIDelta `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
}

type openAIDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// streamOpenAI sends a role chunk, one chunk per word, a chunk with the
// finish reason, the usage chunk (choices empty) if asked, then [DONE].
func streamOpenAI(s sse, c call, d decision) {
	var usage json.RawMessage
	if c.includeUsage {
		usage = json.RawMessage("null")
	}
	chunk := func(delta openAIDelta, finish *string) openAIChunk {
		return openAIChunk{
			ID: d.id, Object: "chat.completion.chunk", Created: d.created.Unix(), Model: c.model,
			Choices: []openAIChunkChoice{{Delta: delta, FinishReason: finish}},
			Usage:   usage,
		}
	}
	empty := ""
	s.send("", chunk(openAIDelta{Role: "assistant", Content: &empty}, nil))
	for _, word := range answerWords(c.output) {
		s.send("", chunk(openAIDelta{Content: &word}, nil))
	}
	reason := stopReason(OpenAI, c.truncated)
	s.send("", chunk(openAIDelta{}, &reason))
	if c.includeUsage {
		last := chunk(openAIDelta{}, nil)
		last.Choices = []openAIChunkChoice{}
		if b, err := json.Marshal(newOpenAIUsage(c)); err == nil {
			last.Usage = b
		}
		s.send("", last)
	}
	_, _ = io.WriteString(s.w, "data: [DONE]\n\n")
	_ = s.rc.Flush()
}

// streamAnthropic sends message_start (with the input tokens),
// content_block_start, ping, one content_block_delta per word,
// content_block_stop, message_delta (stop reason and final output
// tokens), then message_stop.
func streamAnthropic(s sse, c call, d decision) {
	type obj = map[string]any
	s.send("message_start", obj{"type": "message_start", "message": anthropicMessage{
		ID: d.id, Type: "message", Role: "assistant", Content: []anthropicBlock{}, Model: c.model,
		// Like the real API, the start reports the first output token.
		Usage: anthropicUsage{InputTokens: c.prompt, OutputTokens: min(1, c.output)},
	}})
	s.send("content_block_start", obj{"type": "content_block_start", "index": 0,
		"content_block": anthropicBlock{Type: "text", Text: ""}})
	s.send("ping", obj{"type": "ping"})
	for _, word := range answerWords(c.output) {
		s.send("content_block_delta", obj{"type": "content_block_delta", "index": 0,
			"delta": obj{"type": "text_delta", "text": word}})
	}
	s.send("content_block_stop", obj{"type": "content_block_stop", "index": 0})
	s.send("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": stopReason(Anthropic, c.truncated), "stop_sequence": nil},
		"usage": obj{"output_tokens": c.output}})
	s.send("message_stop", obj{"type": "message_stop"})
}
