package pacerhttp

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// usage is a call's real token usage as the provider reported it: what
// the transport settles the call's reservation with.
type usage struct {
	Input      int64 // prompt / input tokens, as the provider counts them toward its limits (Anthropic: input_tokens only, uncached)
	CacheRead  int64 // Anthropic cache_read_input_tokens
	CacheWrite int64 // Anthropic cache_creation_input_tokens
	Cached     int64 // OpenAI cached_tokens, Gemini cachedContentTokenCount (already inside Input: reported only)
	Output     int64 // completion / output tokens (reasoning included), Gemini candidates+thoughts
	Total      int64 // what the budget settles
}

// count is a token count as a provider sends it. It reads null as 0
// (Anthropic's message_delta sends null input fields), an integral float
// as its integer, and clamps a negative or huge value into [0, MaxInt64],
// so that one odd field never loses the whole usage and a hostile one
// never settles a negative charge.
type count int64

// UnmarshalJSON reads a JSON number or null; anything else is an error,
// since a string or object in a count field means a shape not understood.
func (c *count) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = 0
		return nil
	}
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*c = count(max(n, 0))
		return nil
	}
	// ParseFloat rounds out-of-range numbers to ±Inf or 0 with ErrRange;
	// the comparisons below keep them in range.
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return err
	}
	switch {
	case !(f > 0):
		*c = 0
	case f >= math.MaxInt64:
		*c = math.MaxInt64
	default:
		*c = count(f)
	}
	return nil
}

// wireUsage is every provider's usage object in one: OpenAI chat,
// completions and embeddings send prompt/completion/total_tokens
// (openai-go CompletionUsage, CreateEmbeddingResponseUsage); Responses
// sends input/output/total_tokens (responses.ResponseUsage); Anthropic
// sends input/output tokens and the cache fields (anthropic-sdk-go Usage,
// MessageDeltaUsage). Each api reads its own fields.
type wireUsage struct {
	PromptTokens             count         `json:"prompt_tokens"`
	CompletionTokens         count         `json:"completion_tokens"`
	TotalTokens              count         `json:"total_tokens"`
	PromptTokensDetails      *tokenDetails `json:"prompt_tokens_details"`
	InputTokens              count         `json:"input_tokens"`
	OutputTokens             count         `json:"output_tokens"`
	InputTokensDetails       *tokenDetails `json:"input_tokens_details"`
	CacheReadInputTokens     count         `json:"cache_read_input_tokens"`
	CacheCreationInputTokens count         `json:"cache_creation_input_tokens"`
}

// tokenDetails is OpenAI's prompt_tokens_details / input_tokens_details.
type tokenDetails struct {
	CachedTokens count `json:"cached_tokens"`
}

// geminiUsage is Gemini's usageMetadata. promptTokenCount includes the
// cached tokens; totalTokenCount includes thoughts and tool-use prompts.
type geminiUsage struct {
	PromptTokenCount        count `json:"promptTokenCount"`
	CandidatesTokenCount    count `json:"candidatesTokenCount"`
	ThoughtsTokenCount      count `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount count `json:"toolUsePromptTokenCount"`
	CachedContentTokenCount count `json:"cachedContentTokenCount"`
	TotalTokenCount         count `json:"totalTokenCount"`
}

// answer is a complete JSON answer, reduced to its usage.
type answer struct {
	Usage         *wireUsage   `json:"usage"`
	UsageMetadata *geminiUsage `json:"usageMetadata"`
}

// usageFromJSON reads the usage of a complete (non-streamed) JSON answer
// of endpoint a. It reports false when the answer holds none, or is not
// JSON of the endpoint's shape: the transport then settles the estimate.
// For apiGeminiStream it also reads the whole JSON array a stream without
// alt=sse sends, taking the last chunk's usage.
func usageFromJSON(a api, body []byte) (usage, bool) {
	if a == apiGeminiStream && firstByte(body) == '[' {
		var chunks []answer
		if json.Unmarshal(body, &chunks) != nil {
			return usage{}, false
		}
		for i := len(chunks) - 1; i >= 0; i-- {
			if chunks[i].UsageMetadata != nil {
				return chunks[i].UsageMetadata.usage(), true
			}
		}
		return usage{}, false
	}
	var ans answer
	if json.Unmarshal(body, &ans) != nil {
		return usage{}, false
	}
	return ans.usage(a)
}

// usage picks the answer's usage for endpoint a.
func (ans *answer) usage(a api) (usage, bool) {
	switch a {
	case apiGeminiGenerate, apiGeminiStream:
		if ans.UsageMetadata == nil {
			return usage{}, false
		}
		return ans.UsageMetadata.usage(), true
	case apiNone:
		return usage{}, false
	}
	if ans.Usage == nil {
		return usage{}, false
	}
	return ans.Usage.usage(a), true
}

// usage reads w the way endpoint a fills it.
func (w *wireUsage) usage(a api) usage {
	var u usage
	switch a {
	case apiOpenAIResponses:
		u.Input, u.Output = int64(w.InputTokens), int64(w.OutputTokens)
		if w.InputTokensDetails != nil {
			u.Cached = int64(w.InputTokensDetails.CachedTokens)
		}
		u.Total = orSum(int64(w.TotalTokens), u.Input, u.Output)
	case apiAnthropicMessages:
		u.Input, u.Output = int64(w.InputTokens), int64(w.OutputTokens)
		u.CacheRead, u.CacheWrite = int64(w.CacheReadInputTokens), int64(w.CacheCreationInputTokens)
		u.Total = u.anthropicTotal()
	default: // chat, completions, embeddings
		u.Input, u.Output = int64(w.PromptTokens), int64(w.CompletionTokens)
		if w.PromptTokensDetails != nil {
			u.Cached = int64(w.PromptTokensDetails.CachedTokens)
		}
		u.Total = orSum(int64(w.TotalTokens), u.Input, u.Output)
	}
	return u
}

// anthropicTotal is everything Anthropic counts toward its limits: its
// input_tokens exclude the cache reads and writes, which are reported
// apart.
func (u usage) anthropicTotal() int64 {
	return addSat(addSat(u.Input, u.CacheRead), addSat(u.CacheWrite, u.Output))
}

// usage reads Gemini's usageMetadata. Thinking is billed as output, so
// Output adds thoughts to the candidates.
func (g *geminiUsage) usage() usage {
	u := usage{
		Input:  int64(g.PromptTokenCount),
		Cached: int64(g.CachedContentTokenCount),
		Output: addSat(int64(g.CandidatesTokenCount), int64(g.ThoughtsTokenCount)),
	}
	u.Total = orSum(int64(g.TotalTokenCount), addSat(u.Input, int64(g.ToolUsePromptTokenCount)), u.Output)
	return u
}

// orSum returns total when the provider sent one, else in+out: an
// OpenAI-compatible server may leave total out.
func orSum(total, in, out int64) int64 {
	if total > 0 {
		return total
	}
	return addSat(in, out)
}
