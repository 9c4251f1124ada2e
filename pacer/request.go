package pacer

import (
	"fmt"
	"time"

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

// price returns the price of r's model under definition s, for a budget
// with Spend rates.
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
