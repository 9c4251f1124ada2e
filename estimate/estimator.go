package estimate

// Estimator counts the tokens an LLM request will consume, for reserving
// budget before the call. It picks a BPE encoding from the model name and
// falls back to a deliberate over-estimate from the text length when the
// model's tokenizer is not available offline.
//
// Most callers want Messages, or Estimate when they also send tool
// definitions; Text counts a bare string.
//
// An Estimator is immutable once built and safe for simultaneous use by
// multiple goroutines. Building one is cheap: the BPE table is loaded on
// the first count and shared by every Estimator with the same encoding, so
// an Estimator per request is fine, and one per model is better.
//
// The zero value counts with the CharBased fallback and adds no margin;
// use New for the model's encoding and the default margin.
type Estimator struct {
	encoding string     // O200kBase, Cl100kBase or CharBased; "" means CharBased
	codec    *lazyCodec // nil for CharBased
	marginBP int64      // safety margin, in basis points of the prompt
}

// New returns an Estimator for the named model. The encoding is picked from
// the model name, case-insensitively and ignoring provider prefixes such as
// "openai:" or "azure/" (see the package doc for the table). A model it does
// not recognise is not an error: the Estimator uses the CharBased fallback,
// and Fallback reports it.
//
// New fails only when an option is invalid, with an error matching
// ErrInvalidOption.
func New(model string, opts ...Option) (*Estimator, error) {
	c := defaultConfig()
	for _, opt := range opts {
		if err := opt(&c); err != nil {
			return nil, err
		}
	}
	return newEstimator(model, c), nil
}

// newEstimator builds an Estimator from a config that is known to be valid.
func newEstimator(model string, c config) *Estimator {
	enc := c.encoding
	if enc == "" {
		enc = encodingFor(model)
	}
	return &Estimator{encoding: enc, codec: codecFor(enc), marginBP: c.marginBP}
}

// Encoding returns the name of the encoding the Estimator counts with:
// O200kBase, Cl100kBase or CharBased.
func (e *Estimator) Encoding() string {
	if e.encoding == "" {
		return CharBased
	}
	return e.encoding
}

// Fallback reports whether the Estimator uses the CharBased over-estimate
// rather than the model's own tokenizer.
func (e *Estimator) Fallback() bool {
	return e.codec == nil
}

// Text returns the number of tokens in s, with no message overhead and no
// margin. With a BPE encoding the count is exact, the same as tiktoken's
// len(encoding.encode(s)), with two exceptions: special tokens such as
// <|endoftext|> count as ordinary text, and whitespace runs longer than 64
// bytes are cut before counting, which bounds the tokenizer's worst case
// and moves the count by about a token per cut. With the fallback it is
// the CharBased estimate described in the package doc.
func (e *Estimator) Text(s string) int64 {
	if s == "" {
		return 0
	}
	if e.codec != nil {
		if n, err := e.codec.count(s); err == nil {
			return int64(n)
		}
	}
	return charTokens(s)
}

// Messages returns the tokens to reserve for a chat request: the prompt
// estimate of msgs, including per-message overhead and the safety margin,
// plus maxOutput, the max_tokens (or max_completion_tokens) the caller
// sends. For reasoning models, maxOutput must include the reasoning budget,
// since reasoning tokens are billed as output.
//
// Messages never fails: a negative maxOutput counts as 0. Use Estimate to
// reject it instead, or to count tool definitions as well.
func (e *Estimator) Messages(msgs []Message, maxOutput int64) int64 {
	return e.reserve(e.prompt(msgs, nil), max(maxOutput, 0))
}

// Reserve returns the tokens to reserve for a chat request to model, with
// the default margin. It is shorthand for New(model) followed by
// Messages(msgs, maxOutput), so it shares the loaded BPE tables with every
// other Estimator and costs no more than that pair.
func Reserve(model string, msgs []Message, maxOutput int64) int64 {
	return newEstimator(model, defaultConfig()).Messages(msgs, maxOutput)
}
