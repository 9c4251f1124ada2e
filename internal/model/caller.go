package model

import "github.com/llmpacer/llmpacer/internal/wire"

// What a caller sends. The model computes it with package wire, the
// functions packages pacer and lease call: a request's and a usage's
// units, weighed and priced (wire.Reserved, UsedTotal, UsedSplit); each
// rate's charge, allowance, refund and correction (wire.Charges,
// Corrections, Bucket.Lowering). The model checks the scripts, which only
// add and compare what they are sent; it does not check that arithmetic,
// which the budget's promises (lua/promise_test.go) check instead from
// what each call really took, and package wire's and pacer's tests check
// on its own.

// Request is a call's reservation as a caller states it (pacer.Request):
// Tokens, or Input and Output apart (Tokens is then their sum), of Model.
type Request struct {
	Tokens, Input, Output int64
	Model                 string
}

// spend reports whether c has a Spend rate.
func (c Config) spend() bool {
	for _, r := range c.Rates {
		if r.Unit == wire.Spend {
			return true
		}
	}
	return false
}

// weight returns the weight of model on token rates.
func (c Config) weight(model string) float64 {
	if w, ok := c.Weights[model]; ok {
		return w
	}
	return 1
}

// price returns the price of model, for a budget with Spend rates.
func (c Config) price(model string) (wire.Price, bool) {
	if !c.spend() {
		return wire.Price{}, false
	}
	if p, ok := c.Prices[model]; ok {
		return p, true
	}
	p, ok := c.Prices[""]
	return p, ok
}

// Use returns what r reserves in the rates' units, as package pacer
// computes it: its tokens weighed, split when it gives input and output,
// and what it may cost at most.
func (c Config) Use(r Request) wire.Use {
	p, priced := c.price(r.Model)
	return wire.Reserved(r.Tokens, r.Input, r.Output, c.weight(r.Model), p, priced)
}

// Charges returns what a caller sends acquire for r against c: package
// wire's Charges, the function package pacer calls, with the batch floor
// in thousandths for a batch call.
func (c Config) Charges(r Request, batch bool, floorMilli int64) []Charge {
	return wire.Charges(c.Wire(), c.Use(r), keep(batch, floorMilli))
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

// Usage is what a settled call used, as its caller reports it: Tokens
// alone (Lease.Settle), or with Split, Input, Output and the CachedInput
// part of Input (Lease.SettleUsage).
type Usage struct {
	Tokens                     int64
	Input, Output, CachedInput int64
	Split                      bool
}

// Deltas returns the corrections a caller sends settle when a lease that
// reserved r, its turn at turnMs (0: not known), ends as how says (used:
// what a settled call used): package wire's Corrections, with the usage
// weighed and priced as package pacer does.
func (c Config) Deltas(how int, r Request, turnMs int64, used Usage) []Delta {
	reserved := c.Use(r)
	var u wire.Use
	switch how {
	case Released:
		u = reserved
	case Settled:
		p, priced := c.price(r.Model)
		if used.Split {
			u = wire.UsedSplit(used.Input, used.CachedInput, used.Output, c.weight(r.Model), p, priced)
		} else {
			u = wire.UsedTotal(used.Tokens, c.weight(r.Model), p, priced)
		}
	}
	return wire.Corrections(c.Wire(), reserved, u, how == Canceled, turnMs)
}

// Lowers returns what a caller sends pause.lua to lower the buckets of c
// that lower says (by index in c.Rates) after a refusal of r: package
// wire's Lowering, as package pacer's Throttled calls it. A sliding window
// has no TAT to lower: it is left out.
func (c Config) Lowers(r Request, lower func(i int, r Rate) bool) []Lower {
	var ls []Lower
	use := c.Use(r)
	for i, rt := range c.Rates {
		if rt.Sliding || !lower(i, rt) {
			continue
		}
		wb := rt.Wire()
		off, lim := wb.Lowering(use.Of(wb.Unit))
		ls = append(ls, Lower{wb.Field, off, lim})
	}
	return ls
}
