package pacerhttp

import (
	"bytes"
	"encoding/json"

	"github.com/llmpacer/llmpacer/classify"
)

// usageAcc keeps the usage a stream has reported so far.
type usageAcc struct {
	u  usage
	ok bool
	// final says the usage is the call's whole usage, not a figure the
	// stream reports on the way (Anthropic's message_start, a Gemini
	// chunk before the last): a stream cut after a partial figure must
	// keep its reservation, not settle the tokens counted so far.
	final bool
}

// set replaces the usage: OpenAI's and Gemini's usage chunks each carry
// the whole figure so far, so the last one is the answer. final says the
// stream will report no more.
func (a *usageAcc) set(u usage, final bool) {
	a.u, a.ok, a.final = u, true, final
}

// merge folds in an Anthropic usage object. message_start carries the
// input and cache figures and a first output count; message_delta carries
// the cumulative output and may repeat the others, as null or 0 when it
// has nothing new. So each field keeps its latest non-zero value.
func (a *usageAcc) merge(u usage, final bool) {
	if u.Input != 0 {
		a.u.Input = u.Input
	}
	if u.CacheRead != 0 {
		a.u.CacheRead = u.CacheRead
	}
	if u.CacheWrite != 0 {
		a.u.CacheWrite = u.CacheWrite
	}
	if u.Output != 0 {
		a.u.Output = u.Output
	}
	a.u.Total = a.u.anthropicTotal()
	a.ok = true
	a.final = a.final || final
}

// Keys whose presence makes an event worth decoding. Most events of a
// stream are content deltas that have none of them, and a substring test
// is far cheaper than decoding each one.
var (
	keyUsage         = []byte(`"usage"`)
	keyUsageMetadata = []byte(`"usageMetadata"`)
	keyError         = []byte(`"error"`)
)

// interesting reports whether an event may carry usage or an error.
// OpenAI chunks carry "usage":null until the last one, and Responses'
// early events carry "error":null, so a key counts only when its value is
// not null; "error" also counts as a value (Responses' and Anthropic's
// "type":"error").
func interesting(name, data []byte) bool {
	return string(name) == "error" ||
		hasValue(data, keyUsage) || hasValue(data, keyUsageMetadata) ||
		hasValue(data, keyError) || bytes.Contains(data, []byte(`:"error"`))
}

// hasValue reports whether key (with its quotes) appears in data as an
// object key whose value is not null. Inside a JSON string a quote is
// escaped, so a bare "key" is a real key or a whole string value; a
// false positive costs one decode, a false negative cannot happen for
// valid JSON.
func hasValue(data, key []byte) bool {
	for {
		i := bytes.Index(data, key)
		if i < 0 {
			return false
		}
		data = data[i+len(key):]
		j := 0
		for j < len(data) && isSpace(data[j]) {
			j++
		}
		if j < len(data) && data[j] == ':' {
			j++
			for j < len(data) && isSpace(data[j]) {
				j++
			}
			if j < len(data) && data[j] != 'n' {
				return true
			}
		}
	}
}

// openAIChunk is a chat or legacy completions chunk (openai-go
// ChatCompletionChunk, Completion), or an error in its place. usage is
// null in every chunk but the last when include_usage is set.
type openAIChunk struct {
	Usage *wireUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// responsesEvent is a Responses stream event. The terminal events
// (response.completed, .incomplete, .failed) carry the whole response with
// its usage; an "error" event carries code and message at its root.
type responsesEvent struct {
	Type     string `json:"type"`
	Response *struct {
		Usage *wireUsage      `json:"usage"`
		Error json.RawMessage `json:"error"`
	} `json:"response"`
}

// anthropicEvent is a Messages stream event: message_start holds the
// message with its usage, message_delta a usage of its own, error an
// error object.
type anthropicEvent struct {
	Type    string          `json:"type"`
	Message json.RawMessage `json:"message"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// geminiChunk is one GenerateContentResponse of a Gemini stream, or an
// error in its place. Every chunk may carry usageMetadata; only the last,
// whose candidates have a finishReason, carries the whole output.
type geminiChunk struct {
	UsageMetadata *geminiUsage    `json:"usageMetadata"`
	Error         json.RawMessage `json:"error"`
	Candidates    []struct {
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
}

// finished reports whether a candidate of the chunk has finished.
func (c *geminiChunk) finished() bool {
	for _, cand := range c.Candidates {
		if cand.FinishReason != "" {
			return true
		}
	}
	return false
}

// handleEvent reads one SSE event's data.
func (s *streamScanner) handleEvent(name, data []byte) {
	if string(data) == "[DONE]" || string(name) == "message_stop" {
		s.ended = true // OpenAI's and Anthropic's end of a whole stream
		return
	}
	if !interesting(name, data) {
		return
	}
	switch s.api {
	case apiAnthropicMessages:
		s.anthropicEvent(name, data)
	case apiOpenAIResponses:
		s.responsesEvent(name, data)
	case apiGeminiGenerate, apiGeminiStream:
		var c geminiChunk
		if json.Unmarshal(data, &c) != nil {
			return
		}
		if !isNull(c.Error) {
			s.failure(data)
		}
		if c.UsageMetadata != nil {
			s.acc.set(c.UsageMetadata.usage(), c.finished())
		}
	default:
		var c openAIChunk
		if json.Unmarshal(data, &c) != nil {
			return
		}
		if !isNull(c.Error) {
			s.failure(data)
		}
		if c.Usage != nil {
			// include_usage's chunk comes last, after every choice's.
			s.acc.set(c.Usage.usage(s.api), true)
		}
	}
}

// anthropicEvent reads a Messages stream event. An error event's data is
// an Anthropic error body, which classify reads as it is.
func (s *streamScanner) anthropicEvent(name, data []byte) {
	var ev anthropicEvent
	if json.Unmarshal(data, &ev) != nil {
		if string(name) == "error" {
			s.failure(data)
		}
		return
	}
	if string(name) == "error" || ev.Type == "error" || !isNull(ev.Error) {
		s.failure(data)
		return
	}
	switch ev.Type {
	case "message_start":
		var m struct {
			Usage *wireUsage `json:"usage"`
		}
		if json.Unmarshal(ev.Message, &m) == nil && m.Usage != nil {
			s.acc.merge(m.Usage.usage(apiAnthropicMessages), false)
		}
	case "message_delta":
		if ev.Usage != nil {
			// The cumulative usage, sent once the output is done.
			s.acc.merge(ev.Usage.usage(apiAnthropicMessages), true)
		}
	}
}

// responsesEvent reads a Responses stream event. Its errors are not in
// the {"error": {...}} envelope classify knows: an error event has code
// and message at its root, and response.failed has them in
// response.error. Both are wrapped into that envelope first.
func (s *streamScanner) responsesEvent(name, data []byte) {
	var ev responsesEvent
	if json.Unmarshal(data, &ev) != nil {
		if string(name) == "error" {
			s.failure(data)
		}
		return
	}
	if string(name) == "error" || ev.Type == "error" {
		s.failure(wrapError(data))
		return
	}
	if ev.Response == nil {
		return
	}
	if ev.Response.Usage != nil {
		// Only the terminal events carry it.
		s.acc.set(ev.Response.Usage.usage(apiOpenAIResponses), true)
	}
	if !isNull(ev.Response.Error) {
		s.failure(wrapError(ev.Response.Error))
	}
}

// handleChunk reads one complete JSON object of a JSON-mode stream: a
// chunk of Gemini's JSON array, or a whole JSON answer sent where a stream
// was asked for.
func (s *streamScanner) handleChunk(obj []byte) {
	switch s.api {
	case apiGeminiGenerate, apiGeminiStream:
		s.handleEvent(nil, obj)
		return
	}
	if u, ok := usageFromJSON(s.api, obj); ok {
		s.acc.set(u, true) // a whole answer
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(obj, &e) == nil && !isNull(e.Error) {
		s.failure(obj)
	}
}

// failure classifies an error body, keeping the first: a stream ends at
// its first error, and anything after it is noise.
func (s *streamScanner) failure(body []byte) {
	if s.failed {
		return
	}
	v := classify.FromHTTP(0, nil, body)
	if v.Kind == classify.OK {
		// The provider said error but nothing says which: it is still a
		// failed call, and not one known to be worth retrying.
		v.Kind = classify.Permanent
	}
	s.fail, s.failed = v, true
}

// wrapError puts an error object into the {"error": ...} envelope that
// classify reads codes and messages from.
func wrapError(obj []byte) []byte {
	out := make([]byte, 0, len(obj)+10)
	out = append(out, `{"error":`...)
	out = append(out, obj...)
	return append(out, '}')
}
