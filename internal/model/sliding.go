package model

import (
	"strconv"
	"strings"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Strict sliding windows (see docs/lua-contract.md, "Sliding windows"). A
// sliding rate's field is "~<g>:<name>", g the width of its sub-windows in
// µs; sub-window j spans [j·g, (j+1)·g). The window ending in sub-window j
// is counted as the parts+1 sub-windows j-parts … j, the oldest whole. The
// model keeps the counts of the ring (the parts+1 sub-windows up to its
// head) as a map, with the folded counts beside it, and writes them out as
// wire.SlidingState (the field's header and its ring's field), so the
// comparison with the scripts' bytes is exact.

// parts is how many sub-windows make a window: the contract's constant
// (wire.SlidingParts, prelude.lua's SK), spelt out here so that a change
// to either side shows as a disagreement.
const parts = 64

// maxTotal is the most units a ring's total or the folded total holds:
// 2^53, so that every count is an exact float64 in the scripts.
const maxTotal = 1 << 53

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

// window is a sliding rate's state. The ring holds the counts (above zero)
// of sub-windows head-parts … head; total is their sum. A count that leaves
// the ring while still in a window (a turn reserved more than a window
// ahead moved the head) is folded: added to folded, its sub-window
// recording foldedLast, and counted whole in every window ending at or
// before foldedLast+parts. last is the latest sub-window with a count,
// in the ring or folded (0: none), before which no later call takes its
// turn. A window with no count (total and folded 0) stores nothing.
type window struct {
	head, last, total, folded, foldedLast int64
	counts                                map[int64]int64
}

// slide returns the sliding window of field, made if missing.
func (b *hash) slide(field string) *window {
	if b.windows == nil {
		b.windows = map[string]*window{}
	}
	w := b.windows[field]
	if w == nil {
		w = &window{}
		b.windows[field] = w
	}
	return w
}

// empty says the window counts nothing.
func (w *window) empty() bool { return w == nil || w.total == 0 && w.folded == 0 }

// at returns the window as a script reads it at sub-window cur: a copy
// whose head is at least cur, the counts before cur-parts rolled out, the
// folded ones dropped once the latest of them has.
func (w *window) at(cur int64) *window {
	if w.empty() {
		return &window{head: cur, counts: map[int64]int64{}}
	}
	v := &window{head: max(w.head, cur), last: w.last, total: w.total, folded: w.folded, foldedLast: w.foldedLast, counts: map[int64]int64{}}
	for k, c := range w.counts {
		if k >= cur-parts {
			v.counts[k] = c
		} else {
			v.total -= c
		}
	}
	if v.foldedLast < cur-parts {
		v.folded, v.foldedLast = 0, 0
	}
	if v.total == 0 {
		v.last = v.foldedLast
	}
	return v
}

// fit returns the sub-window a call of charge units takes, found at
// sub-window cur: the first at or after cur and after every count (a
// later call never takes an earlier turn) whose window with the charge
// holds at most allow. A nil window is empty.
func (w *window) fit(cur, charge, allow int64) int64 {
	v := w.at(cur)
	j := max(cur, v.last)
	for v.used(j)+charge > allow && v.used(j) > 0 {
		j++
	}
	return j
}

// used returns the units the window ending in sub-window j counts, for j
// at or after the latest count: the ring's counts from j-parts on, and
// the folded ones whole while j is at most foldedLast+parts.
func (w *window) used(j int64) int64 {
	var s int64
	for k, c := range w.counts {
		if k >= j-parts {
			s += c
		}
	}
	if w.folded > 0 && j <= w.foldedLast+parts {
		s += w.folded
	}
	return s
}

// add counts u units (negative: given back) in sub-window j, as a script
// writing at sub-window cur does. A charge (j at or after cur) first moves
// the head on to j, folding the counts that leave the ring while still in
// a window ending at cur or later; one before the ring is folded. A
// give-back comes off j's count, or off the folded total if j was folded,
// never below zero; nothing once j rolled out. No total passes maxTotal.
func (w *window) add(cur, j, u int64) {
	*w = *w.at(cur)
	if u > 0 && j > w.head {
		for k, c := range w.counts {
			if k < j-parts {
				delete(w.counts, k)
				w.total -= c
				if k >= cur-parts {
					w.folded = min(w.folded+c, maxTotal)
					w.foldedLast = max(w.foldedLast, k)
				}
			}
		}
		w.head = j
	}
	switch {
	case j >= w.head-parts && j <= w.head:
		c := w.counts[j]
		if u > 0 {
			u = min(u, maxTotal-w.total)
			if u > 0 && j > w.last {
				w.last = j
			}
		} else {
			u = -min(-u, c)
		}
		if u == 0 {
			break
		}
		c += u
		w.total += u
		if c > 0 {
			w.counts[j] = c
			break
		}
		delete(w.counts, j)
		if j == w.last {
			// The latest count is gone: the latest before it, or the
			// folded ones'.
			w.last = 0
			for k := range w.counts {
				w.last = max(w.last, k)
			}
			if w.last == 0 && w.folded > 0 {
				w.last = w.foldedLast
			}
		}
	case u > 0 && w.folded < maxTotal:
		w.folded += min(u, maxTotal-w.folded)
		w.foldedLast = max(w.foldedLast, j)
		w.last = max(w.last, j)
	case u < 0 && w.folded > 0 && j >= cur-parts && j <= w.foldedLast:
		w.folded -= min(-u, w.folded)
		if w.folded == 0 {
			w.foldedLast = 0
			if w.total == 0 {
				w.last = 0
			}
		}
	}
	if w.empty() {
		*w = window{}
	}
}

// state returns the window as wire.SlidingState.
func (w *window) state() wire.SlidingState {
	if w.empty() {
		return wire.SlidingState{}
	}
	s := wire.SlidingState{Head: w.head, Last: w.last, Current: w.counts[w.head], Folded: w.folded, FoldedLast: w.foldedLast}
	s.Total = w.total - s.Current
	for k, c := range w.counts {
		if k < w.head {
			s.Counts[k%parts] = c
		}
	}
	return s
}

// String returns the window's field as the state hash holds it (see
// wire.SlidingState.Header); "" when it counts nothing.
func (w *window) String() string { return w.state().Header() }

// ring returns the window's ring fields ("<field>.r0" ..), as a script
// writes them (see wire.SlidingState.Ring).
func (w *window) ring() [wire.SlidingRingFields]string {
	var r [wire.SlidingRingFields]string
	s := w.state()
	for i := range r {
		r[i] = s.Ring(i)
	}
	return r
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
