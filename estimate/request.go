package estimate

import (
	"encoding/json"
	"fmt"
	"math"
)

// Request is everything in a chat request that costs tokens and is known
// before the call.
type Request struct {
	// Messages is the conversation sent as the prompt.
	Messages []Message

	// Tools are the function definitions sent with it, if any.
	Tools []Tool

	// MaxOutput is the max_tokens (or max_completion_tokens) sent with the
	// request: the most output the call can be billed for. Zero reserves no
	// output, which suits embeddings; it is not "unlimited".
	MaxOutput int64
}

// Estimate returns the tokens to reserve for r: the prompt estimate of its
// messages and tools, plus the safety margin on that prompt, plus
// r.MaxOutput. Set MaxOutput to 0 to get the prompt estimate alone.
//
// Unlike Messages, Estimate validates r: it fails, with an error matching
// ErrInvalidRequest, if MaxOutput is negative or a tool's Parameters is set
// but is not valid JSON. The result never overflows: it saturates at
// math.MaxInt64.
func (e *Estimator) Estimate(r Request) (int64, error) {
	if r.MaxOutput < 0 {
		return 0, fmt.Errorf("%w: max output %d is negative", ErrInvalidRequest, r.MaxOutput)
	}
	for i, t := range r.Tools {
		if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
			return 0, fmt.Errorf("%w: tool %d (%q) parameters are not valid JSON", ErrInvalidRequest, i, t.Name)
		}
	}
	return e.reserve(e.prompt(r.Messages, r.Tools), r.MaxOutput), nil
}

// prompt returns the prompt tokens without margin, counted the way OpenAI's
// cookbook does: each message's text plus perMessage (and perName when
// named), the tool definitions, and replyPriming once.
func (e *Estimator) prompt(msgs []Message, tools []Tool) int64 {
	n := int64(replyPriming)
	for i := range msgs {
		n += e.message(&msgs[i])
	}
	return n + e.tools(tools)
}

// message returns one message's tokens, overhead included.
func (e *Estimator) message(m *Message) int64 {
	n := perMessage + e.Text(m.Role) + e.Text(m.Content) + e.Text(m.ToolCallID)
	for _, p := range m.Parts {
		n += e.Text(p)
	}
	if m.Name != "" {
		n += perName + e.Text(m.Name)
	}
	for _, c := range m.ToolCalls {
		n += perToolCall + e.Text(c.ID) + e.Text(c.Name) + e.Text(c.Arguments)
	}
	return n
}

// reserve adds the margin to a prompt estimate, then the output allowance,
// saturating instead of wrapping around on overflow.
func (e *Estimator) reserve(prompt, maxOutput int64) int64 {
	return addSat(addSat(prompt, marginOf(prompt, e.marginBP)), maxOutput)
}

// marginOf returns bp basis points of n, rounded up. It splits n so that
// the product cannot overflow for any n, with bp at most marginScale.
func marginOf(n, bp int64) int64 {
	if n <= 0 || bp <= 0 {
		return 0
	}
	whole, rest := n/marginScale, n%marginScale
	return whole*bp + (rest*bp+marginScale-1)/marginScale
}

// addSat returns a+b for non-negative a and b, or math.MaxInt64 if the sum
// would overflow.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
