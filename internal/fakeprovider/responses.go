package fakeprovider

import "strings"

// This file has OpenAI's Responses API bodies and stream events.

type response struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	CreatedAt         int64            `json:"created_at"`
	Status            string           `json:"status"`
	Error             *struct{}        `json:"error"`
	IncompleteDetails *incomplete      `json:"incomplete_details"`
	Instructions      *string          `json:"instructions"`
	MaxOutputTokens   int64            `json:"max_output_tokens"`
	Model             string           `json:"model"`
	Output            []responseItem   `json:"output"`
	ParallelToolCalls bool             `json:"parallel_tool_calls"`
	Metadata          map[string]any   `json:"metadata"`
	Temperature       float64          `json:"temperature"`
	TopP              float64          `json:"top_p"`
	ToolChoice        string           `json:"tool_choice"`
	Tools             []any            `json:"tools"`
	Truncation        string           `json:"truncation"`
	Usage             *responsesUsage  `json:"usage"`
	Text              map[string]any   `json:"text"`
	Reasoning         map[string]*bool `json:"reasoning"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type responseItem struct {
	ID      string         `json:"id"`
	Type    string         `json:"type"`
	Status  string         `json:"status"`
	Role    string         `json:"role"`
	Content []responsePart `json:"content"`
}

type responsePart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// newResponse is the Response object of c: when done, with its output and
// usage, status "completed" or, cut at max_output_tokens, "incomplete";
// before that, as response.created shows it, "in_progress" with neither.
func newResponse(c call, d decision, done bool) response {
	r := response{
		ID: d.id, Object: "response", CreatedAt: d.created.Unix(), Status: "in_progress",
		MaxOutputTokens: c.maxTokens, Model: c.model, Output: []responseItem{},
		ParallelToolCalls: true, Metadata: map[string]any{}, Temperature: 1, TopP: 1,
		ToolChoice: "auto", Tools: []any{}, Truncation: "disabled",
		Text:      map[string]any{"format": map[string]string{"type": "text"}},
		Reasoning: map[string]*bool{"effort": nil, "summary": nil},
	}
	if !done {
		return r
	}
	r.Status = "completed"
	if c.truncated {
		r.Status, r.IncompleteDetails = "incomplete", &incomplete{Reason: "max_output_tokens"}
	}
	r.Output = []responseItem{responseMessage(c, d, r.Status, c.text())}
	u := &responsesUsage{InputTokens: c.prompt, OutputTokens: c.output, TotalTokens: c.prompt + c.output}
	u.InputTokensDetails.CachedTokens = c.cacheRead
	u.OutputTokensDetails.ReasoningTokens = c.reasoning
	r.Usage = u
	return r
}

// responseMessage is the output message of c with the given text.
func responseMessage(c call, d decision, status, text string) responseItem {
	item := responseItem{ID: "msg_" + strings.TrimPrefix(d.id, "resp_"), Type: "message", Status: status,
		Role: "assistant", Content: []responsePart{}}
	if text != "" || status != "in_progress" {
		item.Content = append(item.Content, responsePart{Type: "output_text", Text: text, Annotations: []any{}})
	}
	return item
}

// responseEvents are the events of a streamed response, as the Responses
// API sends them, each named by its type and numbered by sequence_number:
// response.created, response.in_progress, response.output_item.added,
// response.content_part.added, one response.output_text.delta per word,
// response.output_text.done, response.content_part.done,
// response.output_item.done, and response.completed with the usage (or
// response.incomplete, when the answer was cut at max_output_tokens).
func responseEvents(c call, d decision) []event {
	type obj = map[string]any
	var out []event
	add := func(typ string, fields obj) {
		fields["type"], fields["sequence_number"] = typ, len(out)
		out = append(out, event{name: typ, data: fields})
	}
	final := newResponse(c, d, true)
	msg := final.Output[0]
	at := func(fields obj) obj {
		fields["item_id"], fields["output_index"], fields["content_index"] = msg.ID, 0, 0
		return fields
	}
	add("response.created", obj{"response": newResponse(c, d, false)})
	add("response.in_progress", obj{"response": newResponse(c, d, false)})
	add("response.output_item.added", obj{"output_index": 0, "item": responseMessage(c, d, "in_progress", "")})
	add("response.content_part.added", at(obj{"part": responsePart{Type: "output_text", Annotations: []any{}}}))
	for _, word := range c.words() {
		add("response.output_text.delta", at(obj{"delta": word, "logprobs": []any{}}))
	}
	add("response.output_text.done", at(obj{"text": msg.Content[0].Text, "logprobs": []any{}}))
	add("response.content_part.done", at(obj{"part": msg.Content[0]}))
	add("response.output_item.done", obj{"output_index": 0, "item": msg})
	end := "response.completed"
	if c.truncated {
		end = "response.incomplete"
	}
	add(end, obj{"response": final})
	return out
}
