package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// slidingDigits is the characters of one count in a sliding window's
// ring: base-64 digits ('0' + d), enough for 2^54.
const slidingDigits = 9

// SlidingState is a strict sliding window's state as the scripts store it
// (docs/lua-contract.md, "Sliding windows"): a ring of the counts of the
// SlidingParts + 1 sub-windows up to its head. The rate's field holds the
// header (Header), the field with ".r" appended the older counts (Ring),
// so that a call in the head's sub-window writes only the header.
type SlidingState struct {
	Head       int64 // the ring's newest sub-window
	Last       int64 // the latest sub-window with a count, in the ring or folded; 0 for none
	Total      int64 // the sum of Counts, the ring's older counts
	Current    int64 // the head's count
	Folded     int64 // the units of counts folded out of the ring while still in a window
	FoldedLast int64 // the latest sub-window among them; 0 for none
	// Counts are the older counts: sub-windows Head-SlidingParts ..
	// Head-1.
	Counts [SlidingParts]int64
}

// Header returns the rate's field as the scripts store it:
// "<head>:<last>:<total>:<current>:<folded>:<folded last>"; "" when the
// state counts nothing.
func (s SlidingState) Header() string {
	if s.Total == 0 && s.Current == 0 && s.Folded == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d:%d:%d", s.Head, s.Last, s.Total, s.Current, s.Folded, s.FoldedLast)
}

// Ring returns the ring's field as the scripts store it: the SlidingParts
// older counts, oldest first, 9 base-64 digits each; "" while Total is 0.
func (s SlidingState) Ring() string {
	if s.Total == 0 {
		return ""
	}
	b := make([]byte, 0, SlidingParts*slidingDigits)
	for _, x := range s.Counts {
		var d [slidingDigits]byte
		for i := slidingDigits - 1; i >= 0; i-- {
			d[i] = byte('0' + x%64)
			x /= 64
		}
		b = append(b, d[:]...)
	}
	return string(b)
}

// ParseSlidingHeader decodes a sliding rate's field (see Header), all but
// the ring's counts; ok is false for "" (no count). A value of the format
// before (decimal counts, "<base> <count> ...") is an error here: the
// scripts read it whole into Folded (see legacySum).
func ParseSlidingHeader(v string) (s SlidingState, ok bool, err error) {
	if v == "" {
		return s, false, nil
	}
	f := strings.Split(v, ":")
	if len(f) != 6 {
		return s, false, fmt.Errorf("sliding window header %q: want 6 numbers", v)
	}
	for i, p := range []*int64{&s.Head, &s.Last, &s.Total, &s.Current, &s.Folded, &s.FoldedLast} {
		x, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || x < 0 {
			return SlidingState{}, false, fmt.Errorf("sliding window header %q: number %d", v, i+1)
		}
		*p = x
	}
	return s, true, nil
}

// Used returns at most the units the window ending in sub-window cur
// counts, from the header alone: the head's count while the head is in
// the window (turns reserved ahead included), the older counts whole
// while any of them may be, the folded ones whole while the latest of
// them is.
func (s SlidingState) Used(cur int64) int64 {
	var sum int64
	if s.Head >= cur-SlidingParts {
		sum += s.Current
	}
	if s.Head-1 >= cur-SlidingParts {
		sum += s.Total
	}
	if s.Folded > 0 && s.FoldedLast >= cur-SlidingParts {
		sum += s.Folded
	}
	return sum
}

// SlidingLevel returns what a sliding window has room for at nowUs, from
// its field as stored (see SlidingState.Header): its capacity less at most
// what the window ending now counts (Used), turns reserved ahead included.
// A value of the format before is read as the scripts read it.
func (b Bucket) SlidingLevel(nowUs int64, v string) (float64, error) {
	cur := nowUs / 1000 * 1000 / b.Sub
	if v == "" {
		return float64(b.Capacity), nil
	}
	if strings.Contains(v, ":") {
		s, _, err := ParseSlidingHeader(v)
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
