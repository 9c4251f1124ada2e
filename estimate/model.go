package estimate

import "strings"

// Encoding names, as Estimator.Encoding reports them and WithEncoding accepts
// them.
const (
	// O200kBase is the BPE encoding of gpt-4o, gpt-4.1, gpt-4.5, gpt-5, the
	// o1/o3/o4 reasoning models, chatgpt-4o and gpt-oss.
	O200kBase = "o200k_base"

	// Cl100kBase is the BPE encoding of gpt-4, gpt-4-turbo, gpt-3.5-turbo
	// and the text-embedding-3 and ada-002 embedding models.
	Cl100kBase = "cl100k_base"

	// CharBased is the fallback for models whose tokenizer is not available
	// offline (Claude, Gemini, Llama, Mistral, ...): a deliberate
	// over-estimate from the text's length and shape. See the package doc.
	CharBased = "chars"
)

// family maps a model-name prefix to its encoding.
type family struct {
	prefix   string
	encoding string
}

// families is checked in order, and the first match wins. The o200k
// families come first because hasFamily lets "gpt-4" match "gpt-4.1" and
// "gpt-4.5": '.' must be a boundary so that "gpt-5" matches "gpt-5.1".
//
// When a new OpenAI model is ambiguous, mapping it to cl100k is the safer
// error: the larger o200k vocabulary rarely needs more tokens than cl100k
// (about the same for English and code, far fewer for other scripts), so
// cl100k over-estimates an o200k model slightly.
var families = []family{
	{"gpt-4o", O200kBase},
	{"chatgpt-4o", O200kBase},
	{"gpt-4.1", O200kBase},
	{"gpt-4.5", O200kBase},
	{"gpt-5", O200kBase},
	{"gpt-oss", O200kBase}, // o200k_harmony: o200k ranks plus chat special tokens
	{"o1", O200kBase},
	{"o3", O200kBase},
	{"o4", O200kBase},
	{"gpt-4", Cl100kBase},
	{"gpt-3.5", Cl100kBase},
	{"gpt-35", Cl100kBase}, // Azure spells gpt-3.5-turbo as gpt-35-turbo
	{"text-embedding-3", Cl100kBase},
	{"text-embedding-ada-002", Cl100kBase},
}

// encodingFor picks the encoding for a model name. Matching ignores case and
// surrounding space, and looks at every segment between '/' and ':' so that
// provider prefixes ("openai:gpt-4o", "azure/gpt-4o",
// "openrouter/openai/gpt-4o") and fine-tune names
// ("ft:gpt-4o-mini-2024-07-18:org::id") resolve to the base model. A name
// with no known segment gets CharBased.
func encodingFor(model string) string {
	model = strings.ToLower(strings.TrimSpace(model))
	segments := strings.FieldsFunc(model, func(r rune) bool { return r == '/' || r == ':' })
	for _, s := range segments {
		for _, f := range families {
			if hasFamily(s, f.prefix) {
				return f.encoding
			}
		}
	}
	return CharBased
}

// hasFamily reports whether segment s names a model of the family prefix:
// s is the prefix, or continues it after a non-alphanumeric byte. The
// boundary keeps "o1" from matching "o10" and "gpt-4" from matching
// "gpt-4o", while "gpt-5.1-codex" and "gpt-4-turbo" still match.
func hasFamily(s, prefix string) bool {
	if !strings.HasPrefix(s, prefix) {
		return false
	}
	if len(s) == len(prefix) {
		return true
	}
	c := s[len(prefix)]
	return !('a' <= c && c <= 'z' || '0' <= c && c <= '9')
}
