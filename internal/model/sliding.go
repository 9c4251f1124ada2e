package model

import (
	"slices"
	"strconv"
	"strings"
)

// Strict sliding windows (see docs/lua-contract.md, "Sliding windows"). A
// sliding rate's field is "~<g>:<name>", g the width of its sub-windows in
// µs; sub-window j spans [j·g, (j+1)·g). The window ending in sub-window j
// is counted as the parts+1 sub-windows j-parts … j, the oldest whole. The
// model keeps the counts as a map and writes them out as the contract
// states, so the comparison with the scripts' bytes is exact.

// parts is how many sub-windows make a window: the contract's constant
// (wire.SlidingParts, prelude.lua's SK), spelt out here so that a change
// to either side shows as a disagreement.
const parts = 64

// sub returns the sub-window width in µs of a sliding rate's field
// ("~<g>:<name>", or a tenant's "@~<g>:<name>"), 0 for a bucket's.
func sub(field string) int64 {
	field = strings.TrimPrefix(field, "@")
	if !strings.HasPrefix(field, "~") {
		return 0
	}
	i := strings.IndexByte(field, ':')
	if i < 0 {
		return 0
	}
	g, err := strconv.ParseInt(field[1:i], 10, 64)
	if err != nil || g <= 0 {
		panic("model: bad sliding field " + field)
	}
	return g
}

// window is a sliding rate's counts: units by sub-window, only those above
// zero.
type window struct {
	counts map[int64]int64
}

// slide returns the sliding window of field, made if missing.
func (b *hash) slide(field string) *window {
	if b.windows == nil {
		b.windows = map[string]*window{}
	}
	w := b.windows[field]
	if w == nil {
		w = &window{counts: map[int64]int64{}}
		b.windows[field] = w
	}
	return w
}

// sum returns the units counted in the window ending in sub-window j.
func (w *window) sum(j int64) int64 {
	var s int64
	if w == nil {
		return 0
	}
	for k := j - parts; k <= j; k++ {
		s += w.counts[k]
	}
	return s
}

// fit returns the sub-window a call of charge units takes, found at
// sub-window cur: the first at or after cur and after every sub-window
// already counted (a later call never takes an earlier turn) whose window
// with the charge holds at most allow. Counts that rolled out of every
// window ending at cur or later are not counted. A nil window is empty.
func (w *window) fit(cur, charge, allow int64) int64 {
	j := cur
	if w == nil {
		return j
	}
	for k, c := range w.counts {
		if c > 0 && k >= cur-parts && k > j {
			j = k
		}
	}
	for w.sum(j)+charge > allow {
		j++
	}
	return j
}

// add counts u units (negative: given back) in sub-window j, never below
// zero, as a script writing at sub-window cur does: the counts that rolled
// out of every window ending at cur or later go first, and a sub-window
// among them takes nothing.
func (w *window) add(cur, j, u int64) {
	for k := range w.counts {
		if k < cur-parts {
			delete(w.counts, k)
		}
	}
	if j < cur-parts {
		return
	}
	if c := w.counts[j] + u; c > 0 {
		w.counts[j] = c
	} else {
		delete(w.counts, j)
	}
}

// String returns the counts as the state hash holds them: "<j> <count> …"
// from the first sub-window j with a count to the last, "-<n>" for n
// sub-windows between without one; "" when none is left.
func (w *window) String() string {
	if w == nil || len(w.counts) == 0 {
		return ""
	}
	ks := make([]int64, 0, len(w.counts))
	for k := range w.counts {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var s strings.Builder
	s.WriteString(strconv.FormatInt(ks[0], 10))
	prev := ks[0] - 1
	for _, k := range ks {
		if gap := k - prev - 1; gap > 0 {
			s.WriteString(" -" + strconv.FormatInt(gap, 10))
		}
		s.WriteString(" " + strconv.FormatInt(w.counts[k], 10))
		prev = k
	}
	return s.String()
}

// SlidingWait returns how long (µs) a call of ch, a sliding rate's charge,
// would wait at us for that rate alone: 0 if it fits now, else until the
// start of the first sub-window it fits in; -1 if it never fits. It
// changes nothing.
func (b *Budget) SlidingWait(us int64, ch Charge) int64 {
	if ch.Charge > ch.Allow {
		return -1
	}
	g := sub(ch.Field)
	now := us / 1000
	cur := now * 1000 / g
	if j := b.windows[ch.Field].fit(cur, ch.Charge, ch.Allow); j > cur {
		return j*g - now*1000
	}
	return 0
}
