package pacer

import (
	"fmt"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/leasing"
	"github.com/llmpacer/llmpacer/internal/wire"
)

// Priority orders calls when the budget runs short.
type Priority int

const (
	// Interactive calls may use all of every bucket and reserve their turn
	// ahead of time. It is the zero value.
	Interactive Priority = iota
	// Batch calls may not take the last Config.BatchFloor of any bucket or
	// of the concurrency slots, so interactive calls still get through while
	// a batch job saturates the budget.
	Batch
)

// String names the priority: "interactive" or "batch".
func (p Priority) String() string {
	switch p {
	case Interactive:
		return "interactive"
	case Batch:
		return "batch"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// Request describes one call to admit.
type Request struct {
	// Tokens to reserve: the prompt's estimated tokens plus max output
	// tokens (providers count max_tokens toward the limit when the request
	// arrives). Settle corrects it once the real usage is known.
	Tokens int64
	// Input and Output optionally split the reservation: the prompt's
	// estimated tokens and the output cap. A budget with input or output
	// rates (Config.Rates) charges each its own part; without them, such a
	// rate is charged all of Tokens. With either set, Tokens may be 0 (it
	// is then their sum) or must equal their sum. Settle with
	// Lease.SettleUsage to give each part back exactly.
	Input, Output int64
	// Model names the model called, for Config.Weights: its weight
	// multiplies the call's tokens on every token rate. Empty, or a model
	// the weights do not list, weighs 1.
	Model string
	// Tenant names who the call is for (a customer, an API key, an
	// operation), in a budget with Config.Tenants: the call is charged
	// to the tenant's limits and share as well as the budget's. Take it
	// from the caller's authenticated session, never from what a client
	// may write: any string of up to 64 KiB is safe as an id, and none
	// can reach another tenant's state. Empty: the budget alone.
	Tenant string
	// Priority of the call; the zero value is Interactive.
	Priority Priority
	// MaxWait, if positive, bounds this call's wait instead of
	// Config.MaxWait. The context's deadline may bound it further.
	MaxWait time.Duration
}

// use returns what r reserves in the buckets' units (wire.Reserved): its
// tokens, split into input and output when it says them (checkRequest has
// checked they add up), times the weight of its model, rounded up; and for
// a budget with Spend rates what it may cost at most.
func (p *Pacer) use(r Request) wire.Use { return p.s().use(r) }

// price returns the price of r's model, for a budget with Spend rates.
func (p *Pacer) price(r Request) (wire.Price, bool) { return p.s().price(r) }

// priceOf returns the price of r's model, or none.
func (p *Pacer) priceOf(r Request) wire.Price {
	pr, _ := p.price(r)
	return pr
}

// weight returns the weight of r's model on token rates.
func (p *Pacer) weight(r Request) float64 { return p.s().weight(r) }

// use, price and weight are the Pacer's under definition s: a lease
// charged under one definition is opened and ended under it, whatever
// definition is in force by then (see acquisition.under).
func (s *settings) use(r Request) wire.Use {
	pr, priced := s.price(r)
	return wire.Reserved(r.Tokens, r.Input, r.Output, s.weight(r), pr, priced)
}

func (s *settings) price(r Request) (wire.Price, bool) {
	if !s.spend {
		return wire.Price{}, false
	}
	pr, ok := s.prices[r.Model]
	if !ok {
		pr, ok = s.prices[""]
	}
	if ok {
		// The margin is r's model's, also under the price of models not
		// listed.
		pr.InputMargin = inputMargin(pr.InputMargin, r.Model)
	}
	return pr, ok
}

func (s *settings) weight(r Request) float64 {
	if w, ok := s.weights[r.Model]; ok {
		return w
	}
	return 1
}

// admission returns the lease fields of r's admission charged under s:
// what it reserved, at which weight and price, and its tenant.
func (p *Pacer) admission(s *settings, r Request) leasing.Admission {
	pr, _ := s.price(r)
	return leasing.Admission{Tokens: r.Tokens, Reserve: s.use(r), Weight: s.weight(r), Price: pr, Priced: s.spend, TenantKey: p.tkey(r)}
}

// withTotal returns r with Tokens set to Input + Output when only they are
// given.
func (r Request) withTotal() Request {
	if r.Tokens == 0 {
		r.Tokens = r.Input + r.Output
	}
	return r
}

// checkTokens checks r's token counts; what names the call, for errors.
func checkTokens(what string, r Request) error {
	if r.Tokens < 0 || r.Tokens > maxTokens {
		return invalidf("%sRequest.Tokens = %d: must be between 0 and %d; pass prompt tokens + max output tokens", what, r.Tokens, int64(maxTokens))
	}
	if r.Input < 0 || r.Output < 0 || r.Input > maxTokens || r.Output > maxTokens || r.Input+r.Output > maxTokens {
		return invalidf("%sRequest.Input = %d, Output = %d: each must be between 0 and %d, and their sum too", what, r.Input, r.Output, int64(maxTokens))
	}
	if (r.Input != 0 || r.Output != 0) && r.Tokens != 0 && r.Tokens != r.Input+r.Output {
		return invalidf("%sRequest.Tokens = %d but Input + Output = %d: set Tokens to their sum, or leave it 0", what, r.Tokens, r.Input+r.Output)
	}
	return nil
}

func (p *Pacer) checkRequest(r Request) error {
	if err := checkTokens("", r); err != nil {
		return err
	}
	if r.Priority != Interactive && r.Priority != Batch {
		return invalidf("Request.Priority = %d: use pacer.Interactive or pacer.Batch", int(r.Priority))
	}
	if r.Tenant != "" && p.s().withTenant == nil {
		return invalidf("Request.Tenant is set but Config.Tenants is empty: give tenants their Rates or a Share, or leave Tenant empty")
	}
	if len(r.Tenant) > maxTenantLen {
		return invalidf("Request.Tenant is %d bytes long: use at most %d (an id, not a payload)", len(r.Tenant), maxTenantLen)
	}
	if r.MaxWait < 0 || r.MaxWait > maxDur {
		return invalidf("Request.MaxWait = %v: must be between 0 (Config.MaxWait) and %v", r.MaxWait, maxDur)
	}
	// The same comparison as acquire.lua's, on the same integers.
	if _, ok := p.price(r); p.s().spend && !ok {
		return invalidf("Request.Model = %q has no price in Config.Prices: a Spend rate needs one; add it, or a \"\" entry for models not listed", r.Model)
	}
	use := p.use(r.withTotal())
	for _, b := range p.bucketsOf(r) {
		if strings.HasPrefix(b.Field, "%") {
			continue // a share never holds a call back
		}
		need := use.Of(b.Unit)
		name := strings.ToUpper(b.Field)
		// Units first: a charge for an absurd count would not fit an int64.
		if need > b.Capacity || b.Charge(need) > b.Allowance(0) {
			return fmt.Errorf("%w: %d %s exceed the %s bucket's capacity of %d; split the call, lower max output tokens, or raise its limit or burst", ErrTooLarge, need, unitWord(b.Unit), name, b.Capacity)
		}
		if r.Priority == Batch && b.Charge(need) > b.Allowance(p.s().keep) {
			return fmt.Errorf("%w: a batch call may not take the last %.0f%% of the %s bucket (capacity %d), so %d %s can never fit; send it as Interactive, split it, or lower Config.BatchFloor", ErrTooLarge, 100*p.s().keep, name, b.Capacity, need, unitWord(b.Unit))
		}
	}
	return nil
}

// unitWord names a bucket's unit in an error.
func unitWord(u wire.Unit) string {
	switch u {
	case wire.Requests:
		return "requests"
	case wire.Input:
		return "input tokens"
	case wire.Output:
		return "output tokens"
	case wire.Spend:
		return "units of spend"
	}
	return "tokens"
}
