package model

import (
	"fmt"
	"math"
)

// How much a give-back may return (see prelude.lua). A charge event (an
// admission, a debt, a pause's lowering) has a headroom: how far the
// bucket's TAT lay past the charged call's turn before the charge, 0 if
// the bucket was full. A give-back from a lease charged at t moves the TAT
// back by at most the smallest headroom, now, of the events after t, and
// lowers each of their headrooms by what it moved. Each bucket keeps a
// stack of events, oldest first, in which every headroom is below those
// of all later events, so the first event after t holds the bound.

// maxStack is the most entries a bucket's stack keeps; a full stack is
// compacted (see compact) before it takes another.
const maxStack = 64

// hentry is one event in a bucket's stack: its time and its headroom now,
// in µs.
type hentry struct{ t, d int64 }

// push records a charge event at us on bucket field whose headroom is d (µs,
// >= 0). Its time is us, or 1 µs after the bucket's newest event if that
// is not before us (several events in one µs, a clock stepping back), so
// that a bucket's events are in strictly increasing time. The entries whose
// headroom is d or more go; if maxStack are left, the stack is compacted
// first.
func (b *hash) push(field string, us, d int64) {
	bk := b.bucket(field)
	bk.stack = pushed(bk.stack, us, d)
}

// pushed returns stack s with the event push records.
func pushed(s []hentry, us, d int64) []hentry {
	e := us
	if len(s) > 0 && s[len(s)-1].t >= e {
		e = s[len(s)-1].t + 1
	}
	if d == 0 {
		s = s[:0]
	}
	for len(s) > 0 && s[len(s)-1].d >= d {
		s = s[:len(s)-1]
	}
	if len(s) == maxStack {
		s = compact(s)
	}
	return append(s, hentry{e, d})
}

// Push returns the stack (times, headrooms, oldest first) after a charge
// event at us of headroom d, as a bucket's push records it: for tests
// that hold a script's stack to the rule.
func Push(times, headrooms []int64, us, d int64) ([]int64, []int64) {
	s := make([]hentry, len(times))
	for k := range times {
		s[k] = hentry{times[k], headrooms[k]}
	}
	s = pushed(s, us, d)
	times, headrooms = make([]int64, len(s)), make([]int64, len(s))
	for k, e := range s {
		times[k], headrooms[k] = e.t, e.d
	}
	return times, headrooms
}

// compact returns a full stack with each run of adjacent entries merged
// into one, the run's last time with its first headroom (the smallest), so
// that a lease charged among its events may get back less than it could,
// never more. Runs are cut from the oldest on, a headroom of 0 (a restart)
// alone: a run goes on while an entry's headroom is at most g times the
// run's first, g = (largest / smallest headroom)^(3/128), taken with
// square roots as prelude.lua takes it (correctly rounded, so the two
// agree to the bit). At most 43 runs and the 0 remain (see prelude.lua
// for the bound on what a give-back loses).
func compact(s []hentry) []hentry {
	i := 0
	if s[0].d == 0 {
		i = 1
	}
	q := math.Sqrt(math.Sqrt(math.Sqrt(math.Sqrt(math.Sqrt(float64(s[len(s)-1].d) / float64(s[i].d))))))
	g := math.Sqrt(q * math.Sqrt(q))
	out := append(make([]hentry, 0, maxStack), s[:i]...)
	b := i
	for k := i + 1; k < len(s); k++ {
		if float64(s[k].d) > float64(s[b].d)*g {
			out = append(out, hentry{s[k-1].t, s[b].d})
			b = k
		}
	}
	return append(out, hentry{s[len(s)-1].t, s[b].d})
}

// giveBack moves bucket field's TAT back by up to r µs for a lease charged at
// charged (a time after us counts as us): by no more than the headroom of
// the first event after it, and never before us; a bucket full at us takes
// nothing. The events after the lease lose what the TAT moved from their
// headroom; the events before it keep theirs, and those that no longer lie
// below the first event after the lease go.
func (b *hash) giveBack(field string, us, charged, r int64) {
	bk := b.buckets[field]
	if bk == nil || !bk.stored || bk.tat <= us {
		return
	}
	t := min(charged, us)
	s := bk.stack
	j := len(s)
	for k := range s {
		if s[k].t > t {
			j = k
			break
		}
	}
	if j < len(s) {
		r = min(r, s[j].d)
	}
	if r <= 0 {
		return
	}
	tat := max(bk.tat-r, us)
	moved := bk.tat - tat
	bk.tat = tat
	if j == len(s) {
		return
	}
	for k := j; k < len(s); k++ {
		s[k].d -= moved
	}
	p := j
	for p > 0 && s[p-1].d >= s[j].d {
		p--
	}
	bk.stack = append(s[:p], s[j:]...)
}

// Stack returns bucket field's stack, oldest first: each event's time and
// headroom now (µs).
func (b *hash) Stack(field string) (times, headrooms []int64) {
	bk := b.buckets[field]
	if bk == nil {
		return nil, nil
	}
	for _, e := range bk.stack {
		times = append(times, e.t)
		headrooms = append(headrooms, e.d)
	}
	return times, headrooms
}

// DecodeStack returns the events of a give-back stack as prelude.lua
// stores it, oldest first: each one's time and headroom now (µs). A stack
// may begin with a header (byte 255; byte 7 the frozen entries F, bytes
// 8-14 the offset A): the entries after the first F hold their headroom
// plus A. Without one, every entry holds its headroom.
func DecodeStack(s string) (times, headrooms []int64, err error) {
	b := []byte(s)
	var f, a int64
	if len(b) > 0 && b[0] == 255 {
		if len(b) < 14 {
			return nil, nil, fmt.Errorf("give-back stack header is %d bytes; want 14", len(b))
		}
		f, a = int64(b[6]), be7(b[7:14])
		b = b[14:]
	}
	if len(b)%14 != 0 {
		return nil, nil, fmt.Errorf("give-back stack is %d bytes; want 14 an entry", len(b))
	}
	for k := 0; k < len(b)/14; k++ {
		d := be7(b[14*k+7 : 14*k+14])
		if int64(k) >= f {
			d -= a
		}
		times, headrooms = append(times, be7(b[14*k:14*k+7])), append(headrooms, d)
	}
	return times, headrooms, nil
}

// be7 reads a 7-byte big-endian integer.
func be7(b []byte) int64 {
	var x int64
	for _, c := range b {
		x = x<<8 | int64(c)
	}
	return x
}
