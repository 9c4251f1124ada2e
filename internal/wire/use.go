package wire

import "math"

// Weigh returns tokens times a model's weight w, rounded up (against the
// caller, as charges are).
func Weigh(tokens int64, w float64) int64 {
	if w == 1 || w == 0 {
		return tokens
	}
	return int64(math.Ceil(float64(tokens) * w))
}

// Reserved returns what a call reserves in the buckets' units: its tokens,
// or its input and output apart when either is set (Tokens is then their
// sum), each weighed by w; and with a price (priced), what it may cost at
// most, from its unweighed tokens.
func Reserved(tokens, input, output int64, w float64, p Price, priced bool) Use {
	use := func(w float64) Use {
		if input == 0 && output == 0 {
			return Use{Tokens: Weigh(tokens, w)}
		}
		in, out := Weigh(input, w), Weigh(output, w)
		return Use{Tokens: in + out, Input: in, Output: out, Split: true}
	}
	u := use(w)
	if priced {
		u.Spend = p.Reserve(use(1))
	}
	return u
}

// UsedTotal returns what a call used when only its total is known, weighed
// by w; with a price, what it cost at most (every token at the dearest
// price).
func UsedTotal(tokens int64, w float64, p Price, priced bool) Use {
	u := Use{Tokens: Weigh(tokens, w)}
	if priced {
		u.Spend = p.Bound(tokens)
	}
	return u
}

// UsedSplit returns what a call used, input (of which cached was read from
// the provider's cache) and output apart, weighed by w; with a price, what
// it cost.
func UsedSplit(input, cached, output int64, w float64, p Price, priced bool) Use {
	in, out := Weigh(input, w), Weigh(output, w)
	u := Use{Tokens: in + out, Input: in, Output: out, Split: true}
	if priced {
		u.Spend = p.Spent(input, cached, output)
	}
	return u
}
