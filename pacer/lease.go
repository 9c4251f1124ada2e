package pacer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/concurrency"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// reapAfter is how long an expired lease stays in the lease set before
// acquire.lua removes it (REAP_AFTER in prelude.lua). While it is there, a
// settle finds it and answers "expired"; so a lease that is not found, when
// less than this has passed since its expiry, was ended by an earlier
// attempt whose reply was lost.
const reapAfter = time.Minute

// LeaseState is where a lease is in its life: Active until it ends, then
// how it ended. LeaseInfo.State holds it, and an Ended event carries it.
type LeaseState int

// A lease is Active until it ends, once, in one of the other states.
const (
	Active   LeaseState = iota // not ended yet
	Settled                    // the call's usage was settled
	Released                   // the call failed (Lease.Fail); the reservation stays charged
	Canceled                   // the call never happened; everything went back
	Expired                    // the TTL ran out first; the reservation stays charged
	Rejected                   // the provider refused the call (Lease.Fail); tokens back, request counted
)

// String names the state: "active", "settled", "released", ...
func (e LeaseState) String() string {
	switch e {
	case Active:
		return "active"
	case Settled:
		return "settled"
	case Released:
		return "released"
	case Canceled:
		return "canceled"
	case Expired:
		return "expired"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("LeaseState(%d)", int(e))
}

// Lease is one admitted call's claim on the budget, from admission until
// the call's real usage is known. It is safe for simultaneous use by
// multiple goroutines.
//
// A lease is born in Acquire, holding its reserved tokens, one request
// from each request limit and, where the budget limits concurrency, one
// slot. It ends exactly once, in one of three ways:
//
//   - Settle (or SettleUsage): the call finished and used n tokens. The
//     unused part of the reservation goes back at once; an overrun is
//     charged as debt.
//   - Fail: the call failed. The lease ends as the failure says (released,
//     its whole reservation kept, since the provider may have counted the
//     call; or rejected, its tokens back, for a call the provider refused
//     before any work), and the provider's 429 or exhausted quota pauses
//     or stops the budget for every process.
//   - Cancel: the call was never made. Everything goes back.
//
// Ending a lease twice, from any goroutine, changes the budget once. An end
// that fails because Redis is unreachable returns the error and is retried
// in the background until it lands or the lease expires, so that an outage
// does not keep slots taken for a lease TTL. A lease that is not ended
// expires after the budget's lease TTL: its slot comes back, and its tokens
// stay charged, as for a failed call. KeepAlive keeps a long call's lease
// from expiring.
type Lease struct {
	b *leaseBudget
	a admission

	// call is held across each Redis call that ends or renews the lease,
	// so that they never interleave. It is a channel, not a mutex, so that
	// a caller waits for it no longer than its context: an end retried in
	// the background may hold it through a hung Redis.
	call chan struct{}

	// mu guards the fields below, and is never held across a Redis call.
	// They change only while call is held too.
	mu     sync.Mutex
	end    LeaseState
	tried  LeaseState // how the first attempt to end it whose reply was lost tried; Active if none
	expiry time.Time
	held   time.Duration
	// retrying: a failed end is being retried in the background (see
	// retry); a second failed end does not start another.
	retrying bool
	// quiet: not yet announced to its caller, so its end is not reported
	// (see admission.Quiet).
	quiet atomic.Bool
	// failed: Fail was called, and told the budget (see Lease.Fail).
	failed atomic.Bool
	// verdict and callErr are the failure Fail ended the lease for, which
	// its Ended event carries. Guarded by mu.
	verdict classify.Verdict
	callErr error
}

// openLease returns the lease of an admission, which ends against b.
func openLease(b *leaseBudget, a admission) *Lease {
	l := &Lease{b: b, a: a, expiry: a.Expiry, call: make(chan struct{}, 1)}
	l.quiet.Store(a.Quiet)
	return l
}

// announce marks a quiet lease (see admission.Quiet) as told to its
// caller: its end is reported from then on.
func (l *Lease) announce() { l.quiet.Store(false) }

// LeaseInfo describes a lease as Lease.Info reads it.
type LeaseInfo struct {
	// ID is the lease's id, the member of the budget's lease set in Redis.
	ID string
	// State is Active until the lease ends, then how it ended.
	State LeaseState
	// Tokens is the tokens reserved (a Request's Input and Output count
	// in it when its Tokens is 0).
	Tokens int64
	// Start is when the call's turn began, on the Redis clock.
	Start time.Time
	// Expiry is when the lease's slot expires unless it is kept alive or
	// ended, as of the last admission or KeepAlive, on the Redis clock.
	Expiry time.Time
	// Waited is how long Acquire waited for this lease.
	Waited time.Duration
	// Held is how long the call held its slot, from its turn to its end on
	// the Redis clock: 0 until the lease is settled or failed, and 0 for a
	// lease that was canceled or expired.
	Held time.Duration
	// Local says the lease was admitted by this process's share of the
	// budget while Redis was unreachable (Outage). Ending it, or keeping
	// it alive, changes nothing in Redis, even once Redis answers again:
	// the shared budget never counted it, and never will.
	Local bool
	// Shadow says the budget does not count this lease: in a shadow budget
	// (Config.Shadow), the lease of a call the budget would have made
	// wait or refused, which runs at once anyway. Ending it changes
	// nothing in the budget.
	Shadow bool
}

// Info returns what the lease is: its id, its state, its tokens, its
// times and how it was admitted. State, Expiry and Held change as the
// lease is kept alive and ends.
func (l *Lease) Info() LeaseInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LeaseInfo{ID: l.a.ID, State: l.end, Tokens: l.a.Tokens, Start: l.a.Start, Expiry: l.expiry,
		Waited: l.a.Waited, Held: l.held, Local: l.a.Local != nil, Shadow: l.a.Detached}
}

// Settle ends the lease with the tokens the call really used (for OpenAI,
// usage.total_tokens; for Anthropic, input_tokens + output_tokens). The
// unused part of the reservation goes back to the budget at once, as far
// as the calls admitted since leave room for: never past a full bucket,
// nor into a turn already given to a later call (and not at all if the
// budget is NoRefund). Usage above it is charged as debt that later callers
// wait out, at most one full bucket per call.
//
// Settle is idempotent: once a lease has ended, by Settle, Fail or Cancel,
// further calls return nil and change nothing. A lease that
// expired returns ErrLeaseExpired and refunds nothing.
//
// If Redis fails (or ctx ends first), Settle returns the error at once and
// keeps trying in the background, backing off to twice a second, until
// the settle lands, the lease expires, or the client is closed: a lease
// whose settle met an outage frees its slot within about a second of Redis
// answering again, not at its expiry. Retried, it still changes the budget
// once. Calling Settle again meanwhile is safe, and not needed.
func (l *Lease) Settle(ctx context.Context, usedTokens int64) error {
	if usedTokens < 0 || usedTokens > maxTokens {
		return fmt.Errorf("%w: Settle(%d): used tokens must be between 0 and %d; pass the provider's reported usage, or call Fail if the call failed", ErrInvalid, usedTokens, int64(maxTokens))
	}
	u := wire.UsedTotal(usedTokens, l.a.Weight, l.a.Price, l.a.Priced) // spend: at most this
	if r := l.reserved(); l.b.NoRefund {
		u = wire.Use{Tokens: max(u.Tokens, r.Tokens), Input: r.Input, Output: r.Output, Split: r.Split, Spend: max(u.Spend, r.Spend)}
	}
	return l.finish(ctx, Settled, u, usedTokens)
}

// Usage is a call's tokens as the provider reports them, input and output
// apart, for a budget with input and output rates.
type Usage struct {
	// Input is the prompt's tokens, as the provider counts them toward its
	// limits (OpenAI: prompt_tokens; Anthropic: input_tokens plus the cache
	// reads and writes a limit counts). Package pacerhttp counts all of
	// Anthropic's cache reads in it, which Anthropic's input limits leave
	// out for most models: with heavy caching, an input rate then runs
	// below the provider's limit.
	Input int64
	// Output is the tokens generated (reasoning included).
	Output int64
	// CachedInput is the part of Input read from the provider's prompt
	// cache, priced at Price.CachedInput by Spend rates (OpenAI's
	// cached_tokens, Anthropic's cache_read_input_tokens).
	CachedInput int64
}

// SettleUsage ends the lease like Settle, with the input and output used
// apart: each input and output rate gets back (or is charged) its own
// difference, and token rates their sum's. Settle with the total alone
// can only give back to an input or output rate what its reservation
// exceeds the total by.
func (l *Lease) SettleUsage(ctx context.Context, used Usage) error {
	if used.Input < 0 || used.Output < 0 || used.Input > maxTokens || used.Output > maxTokens || used.CachedInput < 0 || used.CachedInput > used.Input {
		return fmt.Errorf("%w: SettleUsage(%+v): input and output must be between 0 and %d; pass the provider's reported usage, or call Fail if the call failed", ErrInvalid, used, int64(maxTokens))
	}
	u := wire.UsedSplit(used.Input, used.CachedInput, used.Output, l.a.Weight, l.a.Price, l.a.Priced)
	if r := l.reserved(); l.b.NoRefund {
		u.Tokens = max(u.Tokens, r.Tokens)
		u.Input = max(u.Input, r.Of(wire.Input))
		u.Output = max(u.Output, r.Of(wire.Output))
		u.Spend = max(u.Spend, r.Spend)
	}
	return l.finish(ctx, Settled, u, used.Input+used.Output)
}

// reserved returns what the lease's buckets were charged, in their units.
func (l *Lease) reserved() wire.Use {
	if l.a.Reserve != (wire.Use{}) {
		return l.a.Reserve
	}
	return wire.Use{Tokens: l.a.Tokens}
}

// release ends the lease of a call that failed, keeping the whole
// reservation charged: the provider may have counted the call (a timeout on
// our side is often a success on theirs). See Lease.Fail.
func (l *Lease) release(ctx context.Context) error {
	return l.finish(ctx, Released, l.reserved(), l.a.Tokens)
}

// reject ends the lease of a call the provider refused before doing any
// work: out of quota, or a 4xx other than a 429. Its tokens go back,
// whatever NoRefund says, since nothing was generated; its request stays
// counted, as providers count refused requests toward their request limits.
// See Lease.Fail.
func (l *Lease) reject(ctx context.Context) error {
	return l.finish(ctx, Rejected, wire.Use{}, 0)
}

// Cancel ends the lease of a call that was never sent, giving back its tokens
// and its request. Idempotent, and retried in the background when Redis
// fails, like Settle.
func (l *Lease) Cancel(ctx context.Context) error {
	return l.finish(ctx, Canceled, wire.Use{}, 0)
}

// finish ends the lease as how says, correcting the buckets by used (in
// their units); reported is the call's own usage, for the Ended event. An
// attempt that fails for want of Redis (or of time: ctx done first) is
// retried in the background (see retry), and its error returned at once.
func (l *Lease) finish(ctx context.Context, how LeaseState, used wire.Use, reported int64) error {
	err := l.attempt(ctx, how, used, reported)
	if retryable(err) {
		l.retry(ctx, how, used, reported)
	}
	return err
}

// attempt tries once to end the lease, waiting for the lease's call turn
// no longer than ctx, and reports the end if it lands.
func (l *Lease) attempt(ctx context.Context, how LeaseState, used wire.Use, reported int64) error {
	if err := l.lock(ctx); err != nil {
		return fmt.Errorf("lease: %s %s: %w", verb(how), l.a.ID, err)
	}
	end, err := l.finishLocked(ctx, how, used)
	l.mu.Lock()
	held := l.held
	l.mu.Unlock()
	l.unlock()
	if end == Active {
		return err
	}
	l.report(end, reported, held, err)
	return err
}

// report tells the budget how the lease ended, outside the call turn: an
// observer may look at the lease. A detached lease was never admitted, so
// its end is not one either, unless Fail ended it for a failure it knew
// something of: the failure is reported, with no tokens, since the budget
// counted none.
func (l *Lease) report(end LeaseState, reported int64, held time.Duration, err error) {
	failed := l.failed.Load() && end != Settled && end != Canceled
	var v classify.Verdict
	var callErr error
	if failed {
		l.mu.Lock()
		v, callErr = l.verdict, l.callErr
		l.mu.Unlock()
	}
	known := v != (classify.Verdict{}) || callErr != nil
	if l.b.Ended == nil || l.a.Detached && !known || l.quiet.Load() {
		return
	}
	e := ending{How: end, Tokens: l.a.Tokens, Priority: l.a.Priority, Used: l.a.Tokens, Held: held, Err: err, Probe: l.a.Probe, Local: l.a.Local != nil}
	switch end {
	case Settled:
		e.Used = reported
	case Canceled, Rejected:
		e.Used = 0
	}
	if e.Verdict = v; end != Expired && failed {
		e.Err = callErr
	}
	if l.a.Detached {
		e.Tokens, e.Used = 0, 0
	}
	l.b.Ended(e)
}

// lock takes the lease's call turn (see Lease.call), or returns ctx's
// error once ctx is done.
func (l *Lease) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case l.call <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Lease) unlock() { <-l.call }

// set changes the lease's state under mu (see Lease.mu).
func (l *Lease) set(f func()) {
	l.mu.Lock()
	f()
	l.mu.Unlock()
}

// finishLocked runs the settle script unless the lease has already ended. It
// returns how the lease ended by this call, or Active if it had ended before
// or this attempt failed; and ErrLeaseExpired for a lease found expired. The
// caller holds the call turn.
func (l *Lease) finishLocked(ctx context.Context, how LeaseState, used wire.Use) (LeaseState, error) {
	switch l.end {
	case Active:
	case Expired:
		return Active, ErrLeaseExpired
	default:
		return Active, nil
	}
	if l.a.Detached {
		l.set(func() { l.end = how })
		return how, nil
	}
	if l.a.Local != nil {
		return l.finishLocal(how, used)
	}
	buckets, keys := l.b.Buckets, l.b.Keys
	if l.a.TenantKey != "" {
		buckets, keys = l.b.WithTenant, append(keys[:len(keys):len(keys)], l.a.TenantKey)
	}
	cs := wire.Corrections(buckets, l.reserved(), used, how == Canceled, l.a.TurnMs)
	args := wire.SettleArgs(l.a.ID, l.a.ChargedUs, l.b.Limit, l.b.BatchSlots, cs)
	var v any
	var err error
	l.mu.Lock()
	alone := l.retrying || l.b.Settler == nil
	l.mu.Unlock()
	if alone {
		// A retry goes alone, so that a settle that fails again fails no
		// other.
		v, err = wire.Run(ctx, lua.Settle, l.b.Client, keys, args, nil)
	} else {
		v, err = l.b.Settler.run(ctx, l.a.TenantKey, args, nil)
	}
	var res []int64
	if err == nil {
		res, err = wire.Int64s(v, 2)
	}
	// An attempt whose reply is lost may have ended the lease: the first
	// such attempt's end is the one a later "not found" stands for.
	tried := l.tried
	if tried == Active {
		tried = how
	}
	if err != nil {
		l.set(func() { l.tried = tried })
		return Active, fmt.Errorf("lease: %s %s: %w", verb(how), l.a.ID, err)
	}
	now := time.UnixMicro(res[1])
	end, err := Active, error(nil)
	switch {
	case res[0] == 1:
		end = how
	case res[0] == 2:
		end, err = Expired, ErrLeaseExpired
	case res[0] == 0 && now.Before(l.expiry.Add(reapAfter)) && (l.tried != Active || now.Before(l.expiry)):
		// Not found, yet an expired lease would still be in the set: an
		// earlier attempt whose reply was lost did end it. That may be
		// this very call: a Redis client resends a script whose reply
		// timed out (go-redis does, MaxRetries times), and only the last
		// reply reaches us; its first run came before the expiry, or it
		// would have found the lease expired. Past the expiry with no
		// failed attempt, the budget's keys may have expired with the
		// lease (a short LeaseTTL on an idle budget): that is an expiry.
		end = tried
	case res[0] == 0:
		// Never ended by us, and gone: it expired and was removed.
		end, err = Expired, ErrLeaseExpired
	default:
		l.set(func() { l.tried = tried })
		return Active, fmt.Errorf("lease: %s %s: %w: %v", verb(how), l.a.ID, wire.ErrReply, res)
	}
	l.set(func() {
		l.end, l.tried = end, tried
		if res[0] == 1 && how != Canceled && now.After(l.a.Start) {
			l.held = now.Sub(l.a.Start)
		}
	})
	return end, err
}

// finishLocal ends a lease admitted locally while Redis was down, against
// the limiter that admitted it: never against Redis, whether or not Redis
// answers by now, so the lease is neither lost nor counted twice. Past its
// expiry it has expired, like a lease in Redis: its slot was freed and its
// reservation stays charged.
func (l *Lease) finishLocal(how LeaseState, used wire.Use) (LeaseState, error) {
	now := time.Now()
	if !now.Before(l.expiry) {
		l.set(func() { l.end = Expired })
		return Expired, ErrLeaseExpired
	}
	l.a.Local.End(l.a.ID, how == Canceled, l.reserved(), used)
	l.set(func() {
		l.end = how
		if how != Canceled {
			l.held = now.Sub(l.a.Start)
		}
	})
	return how, nil
}

// verb names an end as an action, for errors.
func verb(how LeaseState) string {
	return map[LeaseState]string{Settled: "settle", Released: "release", Canceled: "cancel", Rejected: "reject", Expired: "expire"}[how]
}

// renew pushes the lease's expiry to one lease TTL from now, once (see
// KeepAlive). It returns ErrLeaseExpired if the lease already expired, and
// nil without a Redis call if it has ended.
func (l *Lease) renew(ctx context.Context) error {
	// The call turn is held across the call, so that a renewal and an end
	// do not interleave: the expiry a failed end is judged by must be
	// current.
	if err := l.lock(ctx); err != nil {
		return fmt.Errorf("lease: keep alive %s: %w", l.a.ID, err)
	}
	expired, err := l.keepAliveLocked(ctx)
	l.unlock()
	// Told outside the turn: an observer may end the lease.
	if expired {
		l.report(Expired, 0, 0, ErrLeaseExpired)
	}
	return err
}

// keepAliveLocked is renew with the call turn held. expired says the
// renewal found the lease expired, and marked it so.
func (l *Lease) keepAliveLocked(ctx context.Context) (expired bool, err error) {
	switch l.end {
	case Active:
	case Expired:
		return false, ErrLeaseExpired
	default:
		return false, nil
	}
	if l.a.Detached || l.a.Local != nil {
		if l.a.Local != nil && !time.Now().Before(l.expiry) {
			return false, ErrLeaseExpired
		}
		expiry := time.Now().Add(l.b.TTL)
		l.set(func() { l.expiry = expiry })
		if l.a.Local != nil {
			l.a.Local.Keep(l.a.ID, expiry)
		}
		return false, nil
	}
	v, err := wire.Run(ctx, lua.KeepAlive, l.b.Client, l.b.Keys, wire.KeepAliveArgs(l.a.ID, l.b.TTL, l.b.Limit, l.b.BatchSlots), nil)
	var res []int64
	if err == nil {
		res, err = wire.Int64s(v, 3)
	}
	if err != nil {
		return false, fmt.Errorf("lease: keep alive %s: %w", l.a.ID, err)
	}
	if res[0] != 0 {
		l.set(func() { l.expiry = time.UnixMilli(res[2]) })
		return false, nil
	}
	if l.tried != Active {
		// An end whose reply was lost may have removed it: the next end
		// attempt finds out which.
		return false, ErrLeaseExpired
	}
	l.set(func() { l.end = Expired })
	return true, ErrLeaseExpired
}

// KeepAlive keeps a long call's lease, and its concurrency slot, from
// expiring: in the background, it pushes the lease's expiry to one lease
// TTL from now every third of the TTL, until stop is called, ctx is done,
// or the lease ends or expires. A renewal that fails because Redis is
// slow or briefly unreachable is tried again a twelfth of the TTL later,
// so that a blip of up to half the TTL costs the lease nothing. Call stop
// when the call returns; stop waits for the loop, so no renewal runs
// after it returns:
//
//	stop := l.KeepAlive(ctx)
//	reply, err := callModel(ctx)
//	stop()
//
// To stop keeping it alive on a rule of your own (a stream whose reader
// went idle), cancel ctx.
func (l *Lease) KeepAlive(ctx context.Context) (stop func()) {
	// Each renewal is bounded by a sixth of the TTL: a Redis that hangs
	// does not pile renewals up, and one that lands late still extends the
	// lease (see wire.Run). The first comes a third of the TTL into the
	// lease's life, or at once if KeepAlive was called later than that.
	ttl := max(l.b.TTL, 3*time.Millisecond)
	first := min(max(time.Until(l.Info().Expiry)-ttl*2/3, 0), ttl/3)
	return concurrency.Renew(ctx, first, func(ctx context.Context) time.Duration {
		rctx, cancel := context.WithTimeout(ctx, ttl/6)
		err := l.renew(rctx)
		cancel()
		switch {
		case errors.Is(err, ErrLeaseExpired) || l.Info().State != Active:
			return -1
		case err != nil:
			return ttl / 12
		}
		return ttl / 3
	})
}
