package pacer

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
	// marginClaude is for Claude, whose tokenizer is not published. The
	// length-based fallback counts code 10% under the last Claude
	// tokenizer that was (Claude 2), and later ones count more tokens
	// for the same text; 25% leaves room for that.
	marginClaude = 0.25
	// marginOther is for every other model (Gemini, Llama, Mistral,
	// unknown names), estimated by the fallback: it counts code, diffs
	// and numbers up to 12% under Gemma 3's tokenizer (Gemini's
	// vocabulary), and an emoji-heavy line 20% under Llama 3's.
	marginOther = 0.15
)

// exactFamilies are the model-name prefixes of the families package
// estimate counts with their own tokenizer (o200k_base, cl100k_base).
var exactFamilies = []string{"gpt-", "chatgpt-", "o1", "o3", "o4", "text-embedding-"}

// DefaultInputMargin returns the input margin a Spend rate reserves on a
// call to model when its Price leaves InputMargin 0: 5% for OpenAI's
// models (gpt-*, o1, o3, o4), 25% for Claude and 15% for any other. Case,
// provider prefixes ("anthropic/", "openai:", Bedrock's
// "us.anthropic.") and dates do not matter.
func DefaultInputMargin(model string) float64 {
	m := strings.ToLower(model)
	if strings.Contains(m, "claude") {
		return marginClaude
	}
	for _, seg := range strings.FieldsFunc(m, func(r rune) bool { return r == '/' || r == ':' || r == '.' }) {
		for _, f := range exactFamilies {
			if seg == f || strings.HasPrefix(seg, f) && (strings.HasSuffix(f, "-") || !isAlnum(seg[len(f)])) {
				return marginExact
			}
		}
	}
	return marginOther
}

// isAlnum reports whether c is an ASCII letter or digit: "o1" names a
// family in "o1-mini" but not in "o10".
func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// inputMargin returns the margin a Spend rate reserves on model's prompt
// under a Price whose InputMargin is set: set if positive, none if
// negative, the family's if 0.
func inputMargin(set float64, model string) float64 {
	switch {
	case set > 0:
		return set
	case set < 0:
		return 0
	}
	return DefaultInputMargin(model)
}
