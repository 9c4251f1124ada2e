package model

import (
	"math/rand/v2"
	"testing"
)

// compact keeps a full stack's promise: at most 44 entries are left, in
// increasing time and headroom; each entry's time is that of an event it
// stands for, and its headroom at most every such event's (a lease
// charged among them gets back less, never more) and at least 1/2.5 of
// them. Headrooms from adjacent integers to 2^55 apart, with and without
// a restart's 0 first.
func TestCompactBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 2))
	for n := range 2000 {
		s := make([]hentry, maxStack)
		d, tm := int64(0), int64(1_700_000_000_000_000)
		if n%2 == 1 {
			d = 1 + rng.Int64N(1000)
		}
		for k := range s {
			s[k] = hentry{tm, d}
			tm += 1 + rng.Int64N(1000)
			switch n % 4 {
			case 0, 1:
				d += 1 + rng.Int64N(1000) // one call's charge each: a day's stack
			case 2:
				d += 1 // adjacent
			default:
				d += 1 + d*rng.Int64N(3) // up to tripling: 2^55 by the end
				d = min(d, 1<<55+int64(k))
			}
		}
		orig := append([]hentry(nil), s...)
		got := compact(s)
		if len(got) > 44 || len(got) < 1 {
			t.Fatalf("stack %d: compacted to %d entries; want 1 to 44", n, len(got))
		}
		// Walk the original events: each belongs to the first entry at or
		// after its time.
		j := 0
		for k, e := range orig {
			for got[j].t < e.t {
				j++
				if got[j-1].d >= got[j].d {
					t.Fatalf("stack %d: headrooms %d then %d; want increasing", n, got[j-1].d, got[j].d)
				}
			}
			if k == len(orig)-1 && got[j].t != e.t || got[j].d > e.d || float64(got[j].d)*2.5 < float64(e.d) {
				t.Fatalf("stack %d: event (%d, %d) stands in entry (%d, %d); want its headroom at most the event's, and above 1/2.5 of it",
					n, e.t, e.d, got[j].t, got[j].d)
			}
		}
		if j != len(got)-1 {
			t.Fatalf("stack %d: entries past the newest event", n)
		}
		times := map[int64]bool{}
		for _, e := range orig {
			times[e.t] = true
		}
		for _, e := range got {
			if !times[e.t] {
				t.Fatalf("stack %d: entry at %d, the time of no event", n, e.t)
			}
		}
	}
}
