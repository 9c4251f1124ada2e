package estimate

// Chat formatting overhead, from OpenAI's cookbook "How to count tokens with
// tiktoken" (num_tokens_from_messages), whose figures match the API's
// reported prompt_tokens for gpt-3.5-turbo, gpt-4, gpt-4o and gpt-4o-mini.
// The same figures are used for the fallback: other vendors wrap messages in
// similar markers and publish no figures of their own.
const (
	// perMessage covers the markers around every message:
	// <|start|>{role}<|message|>{content}<|end|>.
	perMessage = 3

	// perName is the extra token a message's name field costs.
	perName = 1

	// replyPriming covers <|start|>assistant<|message|>, which the provider
	// appends once per request so that the model writes the reply.
	replyPriming = 3

	// perToolCall covers the framing around one assistant tool call. OpenAI
	// does not document it, so this is our guess: a message's worth of
	// markers, on top of the id, name and arguments text.
	perToolCall = 3
)

// toolCosts are the fixed costs of rendering function definitions, from the
// cookbook's num_tokens_for_tools, whose totals match the API for gpt-4o and
// gpt-4 (101 and 105 tokens for its weather example).
type toolCosts struct {
	preamble int64 // once per request that has tools, before any function
	funcInit int64 // per function, before "name:description"
	propInit int64 // per function that has properties
	propKey  int64 // per property, before "name:type:description"
	enumInit int64 // per property with an enum (negative: the cookbook's fit)
	enumItem int64 // per enum value, before its text
	funcEnd  int64 // once per request that has tools, after all functions
}

// toolCostsFor returns the rendering costs for an encoding.
func toolCostsFor(encoding string) toolCosts {
	c := toolCosts{funcInit: 10, propInit: 3, propKey: 3, enumInit: -3, enumItem: 3, funcEnd: 12}
	switch encoding {
	case O200kBase:
		c.funcInit = 7
	case CharBased:
		// Anthropic adds a hidden tool-use system prompt whenever tools are
		// present; the largest count it publishes is 530 tokens (Claude 3
		// Opus, tool_choice auto). Other vendors do something similar and
		// publish nothing, so the fallback charges the largest known figure.
		c.preamble = 530
	}
	return c
}
