package fakeprovider

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
)

// This file has OpenAI's chat completions, legacy completions and
// embeddings bodies; responses.go has the Responses API.

type openAICompletion struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []openAIChoice `json:"choices"`
	Usage   openAIUsage    `json:"usage"`
}

// openAIChoice is a choice of a chat completion (Message) or of a legacy
// completion (Text).
type openAIChoice struct {
	Index        int64          `json:"index"`
	Message      *openAIMessage `json:"message,omitempty"`
	Text         *string        `json:"text,omitempty"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type openAIMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type openAIUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func newOpenAIUsage(c call) openAIUsage {
	u := openAIUsage{PromptTokens: c.prompt, CompletionTokens: c.outputTotal(), TotalTokens: c.prompt + c.outputTotal()}
	u.PromptTokensDetails.CachedTokens = c.cacheRead
	u.CompletionTokensDetails.ReasoningTokens = c.reasoning * c.n
	return u
}

// newChatCompletion is the body of a chat completion with c.n choices.
func newChatCompletion(c call, d decision) openAICompletion {
	out := openAICompletion{ID: d.id, Object: "chat.completion", Created: d.created.Unix(), Model: c.model,
		Usage: newOpenAIUsage(c)}
	for i := range c.n {
		out.Choices = append(out.Choices, openAIChoice{Index: i,
			Message:      &openAIMessage{Role: "assistant", Content: c.text()},
			FinishReason: stopReason(OpenAI, c.truncated)})
	}
	return out
}

// newTextCompletion is the body of a legacy completion with c.n choices.
func newTextCompletion(c call, d decision) openAICompletion {
	out := openAICompletion{ID: d.id, Object: "text_completion", Created: d.created.Unix(), Model: c.model,
		Usage: newOpenAIUsage(c)}
	for i := range c.n {
		text := c.text()
		out.Choices = append(out.Choices, openAIChoice{Index: i, Text: &text,
			FinishReason: stopReason(OpenAI, c.truncated)})
	}
	return out
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

// openAIChunkChoice is a choice of a chat chunk (Delta) or of a legacy
// completion chunk (Text).
type openAIChunkChoice struct {
	Index        int64        `json:"index"`
	Delta        *openAIDelta `json:"delta,omitempty"`
	Text         *string      `json:"text,omitempty"`
	FinishReason *string      `json:"finish_reason"`
}

type openAIDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// openAIChunks are the events of a streamed chat or legacy completion:
// for each choice a role chunk (chat only), one chunk per word and a chunk
// with the finish reason; then the usage chunk (choices empty) if
// stream_options.include_usage asked for it, as OpenAI sends it; then
// [DONE]. Without include_usage no chunk has a usage field at all.
func openAIChunks(c call, d decision) []event {
	chat := c.ep == ChatCompletions
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	var usage json.RawMessage
	if c.includeUsage {
		usage = json.RawMessage("null")
	}
	chunk := func(choices ...openAIChunkChoice) event {
		return event{data: openAIChunk{ID: d.id, Object: object, Created: d.created.Unix(), Model: c.model,
			Choices: choices, Usage: usage}}
	}
	piece := func(i int64, s string) openAIChunkChoice {
		if chat {
			return openAIChunkChoice{Index: i, Delta: &openAIDelta{Content: &s}}
		}
		return openAIChunkChoice{Index: i, Text: &s}
	}
	var out []event
	reason := stopReason(OpenAI, c.truncated)
	for i := range c.n {
		if chat {
			empty := ""
			out = append(out, chunk(openAIChunkChoice{Index: i, Delta: &openAIDelta{Role: "assistant", Content: &empty}}))
		}
		for _, word := range c.words() {
			out = append(out, chunk(piece(i, word)))
		}
		last := piece(i, "")
		if chat {
			last.Delta = &openAIDelta{}
		}
		last.FinishReason = &reason
		out = append(out, chunk(last))
	}
	if c.includeUsage {
		last := chunk()
		u := last.data.(openAIChunk)
		u.Choices = []openAIChunkChoice{}
		if b, err := json.Marshal(newOpenAIUsage(c)); err == nil {
			u.Usage = b
		}
		out = append(out, event{data: u})
	}
	return append(out, event{data: rawData("[DONE]")})
}

type openAIEmbeddings struct {
	Object string            `json:"object"`
	Data   []openAIEmbedding `json:"data"`
	Model  string            `json:"model"`
	Usage  struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

type openAIEmbedding struct {
	Object string `json:"object"`
	Index  int    `json:"index"`
	// Embedding is a []float32, or with encoding_format "base64" the
	// base64 of its little-endian bytes, as OpenAI sends it.
	Embedding any `json:"embedding"`
}

// newEmbeddings is the body of an embeddings call: one vector per input,
// and a usage with no output tokens.
func newEmbeddings(c call) openAIEmbeddings {
	out := openAIEmbeddings{Object: "list", Model: c.model}
	out.Usage.PromptTokens, out.Usage.TotalTokens = c.prompt, c.prompt
	for i := range c.inputs {
		vec := make([]float32, c.dimensions)
		for j := range vec {
			// Any fixed numbers will do; these differ per input.
			vec[j] = float32(math.Sin(float64(i*c.dimensions + j + 1)))
		}
		var emb any = vec
		if c.base64 {
			b := make([]byte, 0, 4*len(vec))
			for _, f := range vec {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(b)
		}
		out.Data = append(out.Data, openAIEmbedding{Object: "embedding", Index: i, Embedding: emb})
	}
	return out
}
