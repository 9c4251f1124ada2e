package wire

import "strings"

// The input margins a Spend rate reserves by default, by model family:
// what the prompt's estimate may miss, measured in docs/estimate.md
// against the real tokenizers that run offline.
const (
	// marginExact is for OpenAI's models, whose tokenizers package
	// estimate runs exactly (its count matches the API's prompt_tokens):
	// the drift between model snapshots, for callers who count without
	// estimate's own margin.
	marginExact = 0.05
	// marginFallback is for every other model (Claude, Gemini, Llama,
	// Mistral, unknown names), whose prompt package estimate counts from
	// its length. That count falls short of Claude 2's tokenizer by up
	// to 19%, of Gemma 3's (Gemini's vocabulary) by up to 14% and of
	// Llama 3's by up to 25% (code, numbers, emoji); base64 is beyond it.
	// Claude's later tokenizers are not published.
	marginFallback = 0.25
)

// exactFamilies are the model-name prefixes of the families package
// estimate counts with their own tokenizer (o200k_base, cl100k_base): its
// table, which a test of package estimate keeps this one equal to. The
// Python client holds the same table.
var exactFamilies = []string{
	"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "o1", "o3", "o4",
	"gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada-002",
}

// InputMargin returns the input margin a Spend rate reserves on a
// call to model when its Price leaves InputMargin 0: 5% for OpenAI's
// models (gpt-4o, gpt-4.1, gpt-5, o1, o3, o4, gpt-4, gpt-3.5, ...), whose
// tokenizers run offline, and 25% for the others (Claude, Gemini, Llama,
// ...), whose prompts are estimated from their length. Case and provider
// prefixes ("openai:", "azure/") do not matter.
func InputMargin(model string) float64 {
	m := strings.ToLower(strings.TrimSpace(model))
	for _, seg := range strings.FieldsFunc(m, func(r rune) bool { return r == '/' || r == ':' }) {
		for _, f := range exactFamilies {
			if strings.HasPrefix(seg, f) && (len(seg) == len(f) || !isAlnum(seg[len(f)])) {
				return marginExact
			}
		}
	}
	return marginFallback
}

// isAlnum reports whether c is an ASCII letter or digit: "o1" names a
// family in "o1-mini" but not in "o10", nor "gpt-4" in "gpt-4o".
func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
