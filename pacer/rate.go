package pacer

import (
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Unit says what a Rate counts.
type Unit int

// The units a Rate may count.
const (
	// Requests: one per call.
	Requests Unit = iota + 1
	// Tokens: input and output together, as Request.Tokens reserves and
	// Settle settles them.
	Tokens
	// InputTokens: the prompt's tokens (Request.Input), as Anthropic's
	// input-token limits count them.
	InputTokens
	// OutputTokens: the output cap reserved (Request.Output), then the
	// output used, as Anthropic's output-token limits count them.
	OutputTokens
	// Spend: money, in the unit of Config.Prices (micro-dollars, say). A
	// call reserves its worst case (the prompt's estimate plus the
	// price's InputMargin, and the output cap, at their prices) and
	// settles what its usage cost. While each call's usage stays within
	// its reservation, what is in flight never pushes the spend past the
	// limit. A call that uses more is charged the excess as debt, and
	// no call is admitted until the window has room again; the spend
	// can then pass the limit by what the calls in flight together
	// exceed their reservations, at most Limits.Concurrency times the
	// largest excess. Make a spend cap Sliding, so that no window of its
	// length ever holds more.
	Spend
)

// String names the unit: "requests", "tokens", "input_tokens",
// "output_tokens" or "spend".
func (u Unit) String() string {
	switch u {
	case Requests:
		return "requests"
	case Tokens:
		return "tokens"
	case InputTokens:
		return "input_tokens"
	case OutputTokens:
		return "output_tokens"
	case Spend:
		return "spend"
	}
	return fmt.Sprintf("Unit(%d)", int(u))
}

// wire returns the unit as the caller's arithmetic knows it.
func (u Unit) wire() wire.Unit {
	return [...]wire.Unit{Requests: wire.Requests, Tokens: wire.Tokens, InputTokens: wire.Input, OutputTokens: wire.Output, Spend: wire.Spend}[u]
}

// Rate is one limit over any window: Limit units of Unit per Window. Use
// Config.Rates for what Limits' four fields cannot say: 200,000 tokens an
// hour beside 10,000 a minute, requests per second, input and output
// tokens apart. Each rate is a bucket like the four, checked and charged
// with them in the same script.
type Rate struct {
	Unit  Unit
	Limit int64
	// Window is the period Limit refers to: a whole number of
	// milliseconds, from one second to 366 days.
	Window time.Duration
	// Burst optionally lowers the bucket's capacity below Limit (0: the
	// limit). To give one of Limits' four a burst, state that rate here
	// instead. Not for a sliding rate.
	Burst int64
	// Sliding makes the rate a strict sliding window instead of a
	// refilling bucket: what is admitted in any window of length Window
	// never exceeds Limit, whatever the pattern, phase or number of
	// processes, as providers and gateways that count the last Window
	// exactly (Azure OpenAI's sub-minute checks, spend caps) require. It
	// is counted per sub-window of Window/64, the oldest counted whole, so
	// steady throughput is at most 64/65 of Limit (1.5% short); a waiting
	// call still learns the exact time room appears and keeps its place.
	Sliding bool
}

// Name returns the limit's name, as Event.Limit, RefusedError.Limit,
// Snapshot.Rate and Outage.FailOpen spell it: "rpm", "tpm", "rpd" or "tpd" for the rates
// Limits can state, and otherwise the unit's name and the window, such as
// "tokens/3600s" or "input_tokens/60s".
func (r Rate) Name() string {
	switch {
	case r.Sliding: // always named by unit and window, below
	case r.Unit == Requests && r.Window == time.Minute:
		return nameRPM
	case r.Unit == Tokens && r.Window == time.Minute:
		return nameTPM
	case r.Unit == Requests && r.Window == 24*time.Hour:
		return nameRPD
	case r.Unit == Tokens && r.Window == 24*time.Hour:
		return nameTPD
	}
	if r.Window%time.Second == 0 {
		return fmt.Sprintf("%s/%ds", r.Unit, r.Window/time.Second)
	}
	return fmt.Sprintf("%s/%dms", r.Unit, r.Window/time.Millisecond)
}

// Price is what a model's tokens cost per million, in the unit of the
// budget's Spend rates: {Input: 150_000, CachedInput: 75_000, Output:
// 600_000} is $0.15, $0.075 and $0.60 a million in micro-dollars.
type Price struct {
	Input, CachedInput, Output float64
	// InputMargin is the share of the prompt's estimate (Request.Input,
	// or every token of Request.Tokens) that a Spend rate reserves
	// beyond it, for the estimator's error: 0.25 reserves the prompt at
	// 125% of its estimate. With usage within it, what is in flight
	// never pushes the spend past the cap (see Spend). It only enlarges
	// the reservation: the call settles at what its usage cost, and no
	// token rate is charged more. 0 (the default) takes the model's
	// family's, estimate.InputMargin: 5% for OpenAI's models, 25% for the
	// others (Claude, Gemini, ...). A negative value reserves the estimate
	// as it is: for counts that are exact, such as Anthropic's
	// count_tokens. At most 10 (1,000%).
	InputMargin float64
}

// maxWindow bounds a Rate's window.
const maxWindow = 366 * 24 * time.Hour

// check validates the rate on its own.
func (r Rate) check(i int) error { return r.checkAt(fmt.Sprintf("Config.Rates[%d]", i)) }

// checkAt checks a rate, named at in errors.
func (r Rate) checkAt(at string) error {
	switch {
	case r.Unit < Requests || r.Unit > Spend:
		return invalidf("%s.Unit = %d: use pacer.Requests, Tokens, InputTokens, OutputTokens or Spend", at, int(r.Unit))
	case r.Limit < 1 || r.Limit > maxLimit:
		return invalidf("%s.Limit = %d: must be between 1 and %d", at, r.Limit, int64(maxLimit))
	case r.Window < time.Second || r.Window > maxWindow || r.Window%time.Millisecond != 0:
		return invalidf("%s.Window = %v: must be a whole number of milliseconds from 1s to %v", at, r.Window, maxWindow)
	case r.Burst < 0 || r.Burst > r.Limit:
		return invalidf("%s.Burst = %d: must be between 0 (the limit) and the limit %d", at, r.Burst, r.Limit)
	case r.Sliding && r.Burst != 0:
		return invalidf("%s.Burst = %d on a sliding rate: a sliding window has no burst; leave it 0", at, r.Burst)
	}
	return nil
}
