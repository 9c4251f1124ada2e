package estimate

import "github.com/llmpacer/llmpacer/internal/wire"

// InputMargin returns the input margin a pacer Spend rate reserves on a
// call to model when its pacer.Price leaves InputMargin 0: what this
// package's count of a prompt may miss. It is 5% for OpenAI's models
// (gpt-4o, gpt-4.1, gpt-5, o1, o3, o4, gpt-4, gpt-3.5, ...), whose
// tokenizers this package runs exactly, and 25% for the others (Claude,
// Gemini, Llama, ...), whose prompts it counts from their length (see
// docs/estimate.md). Case and provider prefixes ("openai:", "azure/") do
// not matter.
func InputMargin(model string) float64 { return wire.InputMargin(model) }
