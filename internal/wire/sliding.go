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
// header (Header), SlidingRingFields more the older counts (Ring), so that
// a call in the head's sub-window writes only the header.
type SlidingState struct {
	Head       int64 // the ring's newest sub-window
	Last       int64 // the latest sub-window with a count, in the ring or folded; 0 for none
	Total      int64 // the sum of Counts, the ring's older counts
	Current    int64 // the head's count
	Folded     int64 // the units of counts folded out of the ring while still in a window
	FoldedLast int64 // the latest sub-window among them; 0 for none
	// Counts are the older counts, by slot: sub-window k, from
	// Head-SlidingParts to Head-1, in slot k % SlidingParts.
	Counts [SlidingParts]int64
}

// SlidingRingFields is how many fields hold a sliding window's ring, each
// SlidingParts / SlidingRingFields counts: a call rewrites one of them.
const SlidingRingFields = 4

// Header returns the rate's field as the scripts store it:
// "<head>:<last>:<total>:<current>", and ":<folded>:<folded last>" after
// it while Folded is not 0; "" when the state counts nothing.
func (s SlidingState) Header() string {
	switch {
	case s.Folded > 0:
		return fmt.Sprintf("%d:%d:%d:%d:%d:%d", s.Head, s.Last, s.Total, s.Current, s.Folded, s.FoldedLast)
	case s.Total > 0 || s.Current > 0:
		return fmt.Sprintf("%d:%d:%d:%d", s.Head, s.Last, s.Total, s.Current)
	}
	return ""
}

// Ring returns the ring's field i (0 .. SlidingRingFields-1), named the
// rate's field with ".r<i>" appended, as the scripts write it: the counts
// of slots 16i .. 16i+15, 9 base-64 digits each. A field missing or ""
// holds zeros.
func (s SlidingState) Ring(i int) string {
	const per = SlidingParts / SlidingRingFields
	b := make([]byte, 0, per*slidingDigits)
	for _, x := range s.Counts[i*per : (i+1)*per] {
		var d [slidingDigits]byte
		for k := slidingDigits - 1; k >= 0; k-- {
			d[k] = byte('0' + x%64)
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
	if len(f) != 4 && len(f) != 6 {
		return s, false, fmt.Errorf("sliding window header %q: want 4 or 6 numbers", v)
	}
	for i, p := range []*int64{&s.Head, &s.Last, &s.Total, &s.Current, &s.Folded, &s.FoldedLast}[:len(f)] {
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
