package estimate

import (
	"unicode"
	"unicode/utf8"
)

// maxSpaceRun is the longest whitespace run, in bytes, handed to a codec in
// one piece.
//
// The tokenizer's split pattern (\s*[\r\n]+|\s+(?!\S)|... in regexp2, a
// backtracking engine) takes time quadratic in the length of a whitespace
// run that contains line breaks: 10 KB of " \n" costs about 0.1 s, 40 KB
// over 1 s, 100 KB about 10 s. Prompts come from users and documents, so a
// long run is an easy way to stall every estimate. Cutting runs at 64
// bytes makes the cost linear. Ordinary prompts never have runs that long,
// so their counts stay exact; a cut inside a longer run changes the count by
// about a token per cut, within the margin.
const maxSpaceRun = 64

// chunks calls count on consecutive pieces of s that together make up s and
// have no whitespace run longer than maxSpaceRun, and returns the sum. For
// the common case of no long run it calls count once, on s itself.
func chunks(s string, count func(string) (int, error)) (int, error) {
	total, start, run := 0, 0, 0
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if !unicode.IsSpace(r) {
			run = 0
		} else if run += size; run > maxSpaceRun {
			n, err := count(s[start:i])
			if err != nil {
				return 0, err
			}
			total, start, run = total+n, i, size
		}
		i += size
	}
	n, err := count(s[start:])
	return total + n, err
}
