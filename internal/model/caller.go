package model

import "math"

// Charges returns what a caller sends acquire for a call of cost tokens
// against bs, as package pacer computes it: each configured bucket's charge
// (1 request, or the tokens) and allowance (for batch, less the floor, in
// thousandths).
func Charges(bs Buckets, cost int64, batch bool, floorMilli int64) []Charge {
	var cs []Charge
	for i, bk := range bs {
		if bk.Cap == 0 {
			continue
		}
		lb := bk.Lua(i)
		units := int64(1)
		if IsToken(i) {
			units = cost
		}
		keep := 0.0
		if batch {
			keep = float64(floorMilli) / 1000
		}
		allow := lb.Allowance(keep)
		cs = append(cs, Charge{Bucket: i, Charge: lb.Charge(units), Allow: allow})
	}
	return cs
}

// Slots returns the slots a call may use under a concurrency limit conc:
// batch calls leave the floor's share. 0: no limit.
func Slots(conc int64, batch bool, floorMilli int64) int64 {
	if batch {
		return conc - int64(math.Floor(float64(conc)*float64(floorMilli)/1000))
	}
	return conc
}

// How a lease ends, for Deltas.
const (
	Settled = iota
	Released
	Cancelled
	Rejected
)

// Deltas returns the corrections a caller sends settle when a lease of
// reserved tokens ends as how says (used: the tokens a settled call used),
// as package lease computes them.
func Deltas(bs Buckets, how int, reserved, used int64) []Delta {
	var ds []Delta
	for i, bk := range bs {
		if bk.Cap == 0 {
			continue
		}
		lb := bk.Lua(i)
		var back int64
		switch {
		case how == Settled && IsToken(i):
			back = reserved - used
		case (how == Rejected || how == Cancelled) && IsToken(i):
			back = reserved
		case how == Cancelled:
			back = 1
		}
		var d int64
		switch {
		case back > 0:
			d = -lb.Refund(back)
		case back < 0:
			d = lb.Charge(min(-back, bk.Cap))
		}
		if d != 0 {
			ds = append(ds, Delta{Bucket: i, Us: d})
		}
	}
	return ds
}
