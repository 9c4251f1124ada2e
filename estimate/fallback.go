package estimate

import (
	"unicode"
	"unicode/utf8"
)

// charBytesPerToken is the fallback's main rule: one token per 3 bytes of
// UTF-8, rounded up.
//
// English prose runs about 5 bytes per token with OpenAI's encodings, and
// the usual rules of thumb are 3.5 to 4, so 3 is an over-estimate on purpose: a
// reservation that is too large is refunded by settle, one that is too small
// lets callers overrun the shared budget. Counting bytes rather than runes
// keeps the rule conservative for non-Latin scripts: a CJK character is 3
// bytes, so it counts as one token.
const charBytesPerToken = 3

// charTokens estimates the tokens in s without a tokenizer: the larger of
// the byte rule and pieceFloor. On prose and code the byte rule wins; the
// floor takes over on digits, punctuation-dense data (JSON, CSV) and hex
// identifiers, which BPE splits into far more tokens than their length
// suggests and which the byte rule alone under-counts by up to half.
func charTokens(s string) int64 {
	n := int64(len(s))
	return max((n+charBytesPerToken-1)/charBytesPerToken, pieceFloor(s))
}

// pieceFloor counts the pieces a BPE pre-tokenizer would at least split s
// into, each costing at least one token:
//
//   - a word: a run of letters below U+0800 (Latin, Greek, Cyrillic,
//     Arabic, Hebrew, ...), which absorbs one leading space;
//   - a digit: cl100k and o200k group up to three, but SentencePiece
//     tokenizers (Gemini, Llama 2) split every digit;
//   - two punctuation marks or symbols, since BPE merges pairs such as `":`;
//   - a character at U+0800 or above (CJK, emoji), each its own piece;
//   - a whitespace run other than a single space (indentation, newlines).
func pieceFloor(s string) int64 {
	var n, punct int64
	prev := pieceNone
	for i, r := range s {
		kind := pieceKind(r)
		if kind != piecePunct {
			n += (punct + 1) / 2
			punct = 0
		}
		switch kind {
		case pieceWord:
			if prev != pieceWord {
				n++
			}
		case pieceSpace:
			// A single space is absorbed by the word after it; anything
			// else (a newline, a run of spaces or tabs) is a piece.
			if prev != pieceSpace && (r != ' ' || spaceAt(s, i+1)) {
				n++
			}
		case pieceDigit, pieceWide:
			n++
		case piecePunct:
			punct++
		}
		prev = kind
	}
	return n + (punct+1)/2
}

// The kinds of rune pieceFloor tells apart.
const (
	pieceNone = iota
	pieceWord
	pieceSpace
	pieceDigit
	pieceWide
	piecePunct
)

func pieceKind(r rune) int {
	switch {
	case '0' <= r && r <= '9':
		return pieceDigit
	case unicode.IsSpace(r):
		return pieceSpace
	case r >= 0x800:
		return pieceWide
	case unicode.IsLetter(r):
		return pieceWord
	}
	return piecePunct
}

// spaceAt reports whether the rune starting at byte i of s is white space.
func spaceAt(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r)
}
