package classify

import "strconv"

// Limit names which provider limit tripped, where the provider says so in a
// body field, a rate-limit header or (last resort) its message.
type Limit int

const (
	// LimitUnknown means the provider did not say which limit tripped.
	LimitUnknown Limit = iota
	// LimitRequests is a requests-per-interval limit (RPM, RPD).
	LimitRequests
	// LimitTokens is a combined tokens-per-interval limit (TPM, TPD).
	LimitTokens
	// LimitInputTokens is an input (prompt) tokens limit, as Anthropic and
	// Gemini report separately.
	LimitInputTokens
	// LimitOutputTokens is an output (completion) tokens limit.
	LimitOutputTokens
)

var limitNames = [...]string{
	LimitUnknown:      "unknown",
	LimitRequests:     "requests",
	LimitTokens:       "tokens",
	LimitInputTokens:  "input_tokens",
	LimitOutputTokens: "output_tokens",
}

// String returns the limit's name, e.g. "tokens", or "Limit(n)" for a value
// outside the defined set.
func (l Limit) String() string {
	if l >= 0 && int(l) < len(limitNames) {
		return limitNames[l]
	}
	return "Limit(" + strconv.Itoa(int(l)) + ")"
}
