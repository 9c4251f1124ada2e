package fakeprovider

// This file has Gemini's generateContent bodies and stream events.

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata geminiUsage       `json:"usageMetadata"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

type geminiCandidate struct {
	Content      geminiReply `json:"content"`
	FinishReason string      `json:"finishReason,omitempty"`
	Index        int64       `json:"index"`
}

type geminiReply struct {
	Parts []geminiPart `json:"parts"`
	Role  string       `json:"role"`
}

type geminiPart struct {
	Text string `json:"text"`
}

// geminiUsage is Gemini's usageMetadata. Like the real API's JSON it
// leaves out counts that are zero. The prompt includes the cached tokens;
// the thoughts are not in the candidates' count but are in the total.
type geminiUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount,omitempty"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount,omitempty"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

// newGeminiUsage is the usage of c, final or, before the last chunk of a
// stream, with the prompt only.
func newGeminiUsage(c call, final bool) geminiUsage {
	u := geminiUsage{PromptTokenCount: c.prompt, CachedContentTokenCount: c.cacheRead, TotalTokenCount: c.prompt}
	if final {
		u.CandidatesTokenCount = (c.output - c.reasoning) * c.n
		u.ThoughtsTokenCount = c.reasoning * c.n
		u.TotalTokenCount += c.outputTotal()
	}
	return u
}

// newGeminiResponse is a response whose c.n candidates each hold the
// given words, with the finish reason and the final usage if last.
func newGeminiResponse(c call, d decision, words []string, last bool) geminiResponse {
	r := geminiResponse{UsageMetadata: newGeminiUsage(c, last), ModelVersion: c.model, ResponseID: d.id}
	var text string
	for _, w := range words {
		text += w
	}
	for i := range c.n {
		cand := geminiCandidate{Content: geminiReply{Parts: []geminiPart{{Text: text}}, Role: "model"}, Index: i}
		if last {
			cand.FinishReason = stopReason(Gemini, c.truncated)
		}
		r.Candidates = append(r.Candidates, cand)
	}
	return r
}

// geminiEvents are the chunks of streamGenerateContent?alt=sse: one per
// word, every candidate in step, each with the prompt's usage; the last
// one carries the finish reason and the final usage.
func geminiEvents(c call, d decision) []event {
	words := c.words()
	if len(words) == 0 {
		words = []string{""}
	}
	out := make([]event, len(words))
	for i, w := range words {
		out[i] = event{data: newGeminiResponse(c, d, []string{w}, i == len(words)-1)}
	}
	return out
}
