package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// slidingDigits is the characters of one number in a sliding window's
// value: base-64 digits ('0' + d), enough for 2^54.
const slidingDigits = 9

// slidingLen is a sliding window's value's length: five numbers, then the
// ring's SlidingParts + 1 counts.
const slidingLen = (5 + SlidingParts + 1) * slidingDigits

// SlidingState is a strict sliding window's value as the scripts store it
// (docs/lua-contract.md, "Sliding windows"): fixed places, so that a
// script reads and rewrites the one count it needs.
type SlidingState struct {
	Head       int64 // the ring's newest sub-window
	Last       int64 // the latest sub-window with a count, in the ring or folded; 0 for none
	Total      int64 // the ring's counts' sum
	Folded     int64 // the units of counts folded out of the ring while still in a window
	FoldedLast int64 // the latest sub-window among them; 0 for none
	// Counts are the ring: sub-windows Head-SlidingParts .. Head.
	Counts [SlidingParts + 1]int64
}

// ParseSliding decodes a sliding window's value; ok is false for "" (no
// count). A value of the format before (decimal counts) is an error here:
// the scripts read it whole into Folded (see legacySum).
func ParseSliding(v string) (s SlidingState, ok bool, err error) {
	if v == "" {
		return s, false, nil
	}
	if len(v) != slidingLen {
		return s, false, fmt.Errorf("sliding window value of %d bytes; want %d", len(v), slidingLen)
	}
	num := func(i int) (int64, error) {
		var x int64
		for _, c := range []byte(v[i*slidingDigits : (i+1)*slidingDigits]) {
			if c < '0' || c >= '0'+64 {
				return 0, fmt.Errorf("sliding window value: byte %q at %d", c, i*slidingDigits)
			}
			x = x*64 + int64(c-'0')
		}
		return x, nil
	}
	hs := []*int64{&s.Head, &s.Last, &s.Total, &s.Folded, &s.FoldedLast}
	for i := range 5 + SlidingParts + 1 {
		x, err := num(i)
		if err != nil {
			return SlidingState{}, false, err
		}
		if i < 5 {
			*hs[i] = x
		} else {
			s.Counts[i-5] = x
		}
	}
	return s, true, nil
}

// String encodes the state as the scripts store it.
func (s SlidingState) String() string {
	b := make([]byte, 0, slidingLen)
	put := func(x int64) {
		var d [slidingDigits]byte
		for i := slidingDigits - 1; i >= 0; i-- {
			d[i] = byte('0' + x%64)
			x /= 64
		}
		b = append(b, d[:]...)
	}
	for _, x := range []int64{s.Head, s.Last, s.Total, s.Folded, s.FoldedLast} {
		put(x)
	}
	for _, x := range s.Counts {
		put(x)
	}
	return string(b)
}

// Used returns the units the window ending in sub-window cur counts, as
// the scripts count it: the ring's counts from cur - SlidingParts to cur,
// and the folded ones whole while the latest of them is in the window.
func (s SlidingState) Used(cur int64) int64 {
	var sum int64
	for i, c := range s.Counts {
		if j := s.Head - SlidingParts + int64(i); j >= cur-SlidingParts && j <= cur {
			sum += c
		}
	}
	if s.Folded > 0 && s.FoldedLast >= cur-SlidingParts {
		sum += s.Folded
	}
	return sum
}

// SlidingLevel returns what a sliding window has room for at nowUs, from
// its value as stored (see SlidingState): its capacity less the window
// ending now, counted as the scripts count it. Turns reserved ahead are
// not in it. A value of the format before is read as the scripts read it.
func (b Bucket) SlidingLevel(nowUs int64, v string) (float64, error) {
	cur := nowUs / 1000 * 1000 / b.Sub
	if v == "" {
		return float64(b.Capacity), nil
	}
	if len(v) == slidingLen {
		s, _, err := ParseSliding(v)
		if err != nil {
			return 0, err
		}
		return float64(b.Capacity - s.Used(cur)), nil
	}
	sum, err := legacySum(v, cur)
	if err != nil {
		return 0, fmt.Errorf("sliding window value %q: %w", v, err)
	}
	return float64(b.Capacity - sum), nil
}

// legacySum returns the units a value of the format before 2026-12
// ('<base> <count> ... -<gap> ...', decimal) counts from sub-window
// cur - SlidingParts on: what the scripts fold into one count on reading
// it, the safe side of an upgrade.
func legacySum(v string, cur int64) (int64, error) {
	f := strings.Fields(v)
	j, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, x := range f[1:] {
		c, err := strconv.ParseInt(x, 10, 64)
		switch {
		case err != nil:
			return 0, fmt.Errorf("count %q", x)
		case c < 0:
			j -= c
			continue
		case j >= cur-SlidingParts:
			sum += c
		}
		j++
	}
	return sum, nil
}
