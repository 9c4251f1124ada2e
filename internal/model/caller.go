package model

import "github.com/llmpacer/llmpacer/internal/wire"

// Wire returns the configured buckets of bs (those with a capacity) as the
// scripts' caller sees them, in the scripts' order.
func (bs Buckets) Wire() []wire.Bucket {
	var out []wire.Bucket
	for i, bk := range bs {
		if bk.Cap > 0 {
			out = append(out, bk.Wire(i))
		}
	}
	return out
}

// index returns the bucket index of a field.
func index(field string) int {
	for i := range 4 {
		if Name(i) == field {
			return i
		}
	}
	panic("model: unknown bucket field " + field)
}

// Charges returns what a caller sends acquire for a call of cost tokens
// against bs: package wire's Charges, the function package pacer calls, with
// the floor in thousandths for a batch call.
func Charges(bs Buckets, cost int64, batch bool, floorMilli int64) []Charge {
	var cs []Charge
	for _, c := range wire.Charges(bs.Wire(), wire.Use{Tokens: cost}, keep(batch, floorMilli)) {
		cs = append(cs, Charge{Bucket: index(c.Field), Charge: c.Charge, Allow: c.Allow})
	}
	return cs
}

func keep(batch bool, floorMilli int64) float64 {
	if batch {
		return float64(floorMilli) / 1000
	}
	return 0
}

// Slots returns the slots a call may use under a concurrency limit conc:
// package wire's Slots, as package pacer calls it. 0: no limit.
func Slots(conc int64, batch bool, floorMilli int64) int64 {
	return wire.Slots(conc, keep(batch, floorMilli))
}

// How a lease ends, for Deltas.
const (
	Settled = iota
	Released
	Canceled
	Rejected
)

// Deltas returns the corrections a caller sends settle when a lease of
// reserved tokens ends as how says (used: the tokens a settled call used):
// package wire's Corrections, as package lease calls them.
func Deltas(bs Buckets, how int, reserved, used int64) []Delta {
	switch how {
	case Released:
		used = reserved
	case Canceled, Rejected:
		used = 0
	}
	var ds []Delta
	for _, c := range wire.Corrections(bs.Wire(), wire.Use{Tokens: reserved}, wire.Use{Tokens: used}, how == Canceled, 0) {
		ds = append(ds, Delta{Bucket: index(c.Field), Us: c.Us})
	}
	return ds
}
