package pacer

import (
	"fmt"
	"strings"
	"time"
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
	// Priority of the call; the zero value is Interactive.
	Priority Priority
	// MaxWait, if positive, bounds this call's wait instead of
	// Config.MaxWait. The context's deadline may bound it further.
	MaxWait time.Duration
}

func (p *Pacer) checkRequest(r Request) error {
	if r.Tokens < 0 || r.Tokens > maxTokens {
		return invalidf("Request.Tokens = %d: must be between 0 and %d; pass prompt tokens + max output tokens", r.Tokens, int64(maxTokens))
	}
	if r.Priority != Interactive && r.Priority != Batch {
		return invalidf("Request.Priority = %d: use pacer.Interactive or pacer.Batch", int(r.Priority))
	}
	if r.MaxWait < 0 || r.MaxWait > maxDur {
		return invalidf("Request.MaxWait = %v: must be between 0 (Config.MaxWait) and %v", r.MaxWait, maxDur)
	}
	// The same comparison as acquire.lua's, on the same integers.
	for _, b := range p.s.wireBuckets {
		need := b.Units(r.Tokens)
		name := strings.ToUpper(b.Field)
		// Units first: a charge for an absurd count would not fit an int64.
		if need > b.Capacity || b.Charge(need) > b.Allowance(0) {
			return fmt.Errorf("%w: %d tokens exceed the %s bucket's capacity of %d; split the call, lower max output tokens, or raise Limits.%s/Burst.%s", ErrTooLarge, r.Tokens, name, b.Capacity, name, name)
		}
		if r.Priority == Batch && b.Charge(need) > b.Allowance(p.s.keep) {
			return fmt.Errorf("%w: a batch call may not take the last %.0f%% of the %s bucket (capacity %d), so %d tokens can never fit; send it as Interactive, split it, or lower Config.BatchFloor", ErrTooLarge, 100*p.s.keep, name, b.Capacity, r.Tokens)
		}
	}
	return nil
}
