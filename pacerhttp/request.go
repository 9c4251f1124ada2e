package pacerhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/llmpacer/llmpacer/estimate"
)

// call is what the transport needs to know about one request body to
// reserve budget for it.
type call struct {
	Model        string // body "model", else the URL's model
	Stream       bool   // body "stream": true, or apiGeminiStream
	Prompt       int64  // estimated prompt tokens (margin included) from package estimate
	MaxOutput    int64  // the output cap × n (or × candidates for Gemini); 0 if the body sets none
	HasMaxOutput bool   // the body set an output cap (or the endpoint documents a default one)
	WantsUsage   bool   // an OpenAI chat or legacy completions stream that already sets stream_options.include_usage=true
}

// errNotObject reports a body that is not a JSON object. The transport
// then reserves a default instead of an estimate.
var errNotObject = errors.New("pacerhttp: request body is not a JSON object")

// parseRequest reads a JSON request body of endpoint a. est returns the
// estimator for a model name (the transport caches them); it is never nil.
//
// It never panics. It returns an error for a body that is not a JSON
// object of the endpoint's shape, such as a field of the wrong type or a
// missing field the provider requires, because the provider will refuse
// that body and an estimate of it means nothing. The returned call then
// still holds what the URL says (the model, Gemini's stream).
func parseRequest(a api, urlModel string, body []byte, est func(model string) *estimate.Estimator) (call, error) {
	c := call{Model: urlModel, Stream: a == apiGeminiStream}
	if !isObject(body) {
		return c, errNotObject
	}
	var err error
	switch a {
	case apiOpenAIChat:
		err = parseChat(&c, body, est)
	case apiOpenAIResponses:
		err = parseResponses(&c, body, est)
	case apiOpenAICompletions:
		err = parseCompletions(&c, body, est)
	case apiOpenAIEmbeddings:
		err = parseEmbeddings(&c, body, est)
	case apiAnthropicMessages:
		err = parseAnthropic(&c, body, est)
	case apiGeminiGenerate, apiGeminiStream:
		err = parseGemini(&c, body, est)
	default:
		return c, fmt.Errorf("pacerhttp: %v is not a model call", a)
	}
	if err != nil {
		return call{Model: urlModel, Stream: a == apiGeminiStream}, fmt.Errorf("pacerhttp: %v request: %w", a, err)
	}
	return c, nil
}

// isObject reports whether body, leading space aside, starts a JSON
// object. It turns arrays, strings and empty bodies away before the
// decoder allocates anything for them.
func isObject(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// modelOr returns the body's model when it names one, else the URL's.
func modelOr(body, url string) string {
	if body != "" {
		return body
	}
	return url
}

// promptTokens estimates msgs and tools with the model's estimator, margin
// included. Estimate refuses only tool parameters that are not JSON, which
// a decoded body cannot hold, and a negative output, which is never
// passed; should it fail anyway, the messages alone are still a better
// reserve than a default.
func promptTokens(e *estimate.Estimator, msgs []estimate.Message, tools []estimate.Tool) int64 {
	n, err := e.Estimate(estimate.Request{Messages: msgs, Tools: tools})
	if err != nil {
		return e.Messages(msgs, 0)
	}
	return n
}

// setCap records an output cap times the number of outputs generated,
// saturating at math.MaxInt64. A negative cap or count is not a body the
// provider accepts.
func (c *call) setCap(maxTokens, outputs int64) error {
	if maxTokens < 0 {
		return fmt.Errorf("output cap %d is negative", maxTokens)
	}
	if outputs < 1 {
		// n and candidateCount default to 1; 0 means "unset" to the SDKs.
		outputs = 1
	}
	c.HasMaxOutput = true
	c.MaxOutput = mulSat(maxTokens, outputs)
	return nil
}

// mulSat returns a×b for non-negative a and b, or math.MaxInt64 when the
// product would overflow: a reserve must never wrap around to a small one.
func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// addSat returns a+b for non-negative a and b, saturating like mulSat.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// rawString returns a JSON string's value, and false for any other JSON
// value (null, a number, an object) or invalid JSON.
func rawString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// isNull reports whether raw is absent or JSON null, which the providers
// treat alike.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}
