package fakeprovider

import (
	"net/http"
	"strings"
)

// filler is the text answers are made of; only their token counts matter.
const filler = "the quick brown fox jumps over the lazy dog while the provider counts every token"

// maxAnswerWords caps the answer text, so a call with a huge max_tokens
// does not make the simulator write megabytes. The usage still reports the
// full count.
const maxAnswerWords = 64

// answerWords returns the pieces of an answer of n tokens, one word per
// token, each but the first with its leading space.
func answerWords(n int64) []string {
	words := strings.Fields(filler)
	out := make([]string, min(n, maxAnswerWords))
	for i := range out {
		out[i] = words[i%len(words)]
		if i > 0 {
			out[i] = " " + out[i]
		}
	}
	return out
}

// stopReason is why the answer ended, in the words of the style.
func stopReason(style Style, truncated bool) string {
	switch {
	case style == Anthropic && truncated:
		return "max_tokens"
	case style == Anthropic:
		return "end_turn"
	case truncated:
		return "length"
	}
	return "stop"
}

type openAICompletion struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []openAIChoice `json:"choices"`
	Usage   openAIUsage    `json:"usage"`
}

type openAIChoice struct {
	Index        int           `json:"index"`
	Message      openAIMessage `json:"message"`
	FinishReason string        `json:"finish_reason"`
}

type openAIMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type openAIUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

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

type anthropicUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

func newOpenAIUsage(c call) openAIUsage {
	return openAIUsage{PromptTokens: c.prompt, CompletionTokens: c.output, TotalTokens: c.prompt + c.output}
}

// writeAnswer writes the 200 of an admitted, non-streaming call.
func writeAnswer(w http.ResponseWriter, style Style, c call, d decision) {
	setRateHeaders(w.Header(), style, d.limits)
	text := strings.Join(answerWords(c.output), "")
	reason := stopReason(style, c.truncated)
	if style == Anthropic {
		writeJSON(w, http.StatusOK, anthropicMessage{
			ID: d.id, Type: "message", Role: "assistant",
			Content:    []anthropicBlock{{Type: "text", Text: text}},
			Model:      c.model,
			StopReason: &reason,
			Usage:      anthropicUsage{InputTokens: c.prompt, OutputTokens: c.output},
		})
		return
	}
	writeJSON(w, http.StatusOK, openAICompletion{
		ID: d.id, Object: "chat.completion", Created: d.created.Unix(), Model: c.model,
		Choices: []openAIChoice{{
			Message:      openAIMessage{Role: "assistant", Content: text},
			FinishReason: reason,
		}},
		Usage: newOpenAIUsage(c),
	})
}
