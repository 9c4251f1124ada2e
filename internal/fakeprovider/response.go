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

// words are the pieces of the text of one choice of c: its visible
// output, without the reasoning.
func (c call) words() []string { return answerWords(c.output - c.reasoning) }

// text is the whole text of one choice of c.
func (c call) text() string { return strings.Join(c.words(), "") }

// stopReason is why the answer ended, in the words of the style.
func stopReason(style Style, truncated bool) string {
	switch {
	case style == Anthropic && truncated:
		return "max_tokens"
	case style == Anthropic:
		return "end_turn"
	case style == Gemini && truncated:
		return "MAX_TOKENS"
	case style == Gemini:
		return "STOP"
	case truncated:
		return "length"
	}
	return "stop"
}

// writeAnswer writes the 200 of an admitted, non-streaming call.
func writeAnswer(w http.ResponseWriter, style Style, c call, d decision) {
	setRateHeaders(w.Header(), style, d.limits)
	var body any
	switch c.ep {
	case Messages:
		body = newAnthropicMessage(c, d)
	case Responses:
		body = newResponse(c, d, true)
	case Completions:
		body = newTextCompletion(c, d)
	case Embeddings:
		body = newEmbeddings(c)
	case GenerateContent:
		body = newGeminiResponse(c, d, c.words(), true)
	default:
		body = newChatCompletion(c, d)
	}
	writeJSON(w, http.StatusOK, body)
}
