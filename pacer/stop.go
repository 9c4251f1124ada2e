package pacer

import (
	"context"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// defaultQuotaProbe is how often a quota-stopped budget lets one call
// through to see whether the provider serves again, when
// Config.QuotaProbe is 0.
const defaultQuotaProbe = time.Minute

// stopQuota tells the budget that the provider's quota is exhausted
// (credits, billing or a daily quota: retrying cannot help; see
// Lease.Fail). Every process then fails its calls at once with a
// *RefusedError that matches ErrQuotaExhausted, sending nothing, for d
// (the provider's reset when it names one; at most 7 days) or until one
// probe succeeds: every Config.QuotaProbe, one call that fits the budget
// goes through, in whichever process asks first, and a probe that is
// settled (the call succeeded) resumes the budget for every process. A
// probe refused for the quota again stops the budget again, through its
// own Fail. No probe goes through while the budget is paused.
//
// A stop only grows: a shorter d than the stop in force keeps its end. A
// stop wins over a pause: a paused budget that is stopped refuses its
// calls with the stop, at once, never with the pause's wait.
func (p *Pacer) stopQuota(ctx context.Context, d time.Duration) error {
	return p.stop(ctx, d, p.s().quotaProbe, wireQuota)
}

// Stop refuses every call of the budget, in every process, for d (at most
// 7 days), with a *RefusedError that matches ErrStopped: an operator's
// brake, for an incident or a runaway job. Calls already admitted run on.
// Resume ends the stop sooner. A stop only grows: a shorter d than the
// stop in force keeps its end. While it lasts, a stop for an exhausted
// quota (Lease.Fail) only extends it, and no probe lifts it. A stop wins
// over a pause: a paused budget that is stopped refuses its calls with
// the stop, at once, never with the pause's wait.
func (p *Pacer) Stop(ctx context.Context, d time.Duration) error {
	return p.stop(ctx, d, 0, wireStop)
}

// Resume ends a stop (Stop, or Lease.Fail's on an exhausted quota) now,
// for every process.
func (p *Pacer) Resume(ctx context.Context) error {
	v, err := p.call(ctx, lua.Stop, []any{0, 0, wireStop}, nil)
	if err != nil {
		return err
	}
	if _, err := wire.Int64s(v, 2); err != nil {
		return fmt.Errorf("pacer: resume of %q: %w", p.s().name, err)
	}
	p.emit(Event{Kind: Resumed})
	return nil
}

// stop sets a stop of kind wireQuota or wireStop.
func (p *Pacer) stop(ctx context.Context, d, probe time.Duration, kind string) error {
	if d < time.Millisecond || d > maxDur {
		return invalidf("stopping for %v: the stop must be between 1ms and %v; use Resume to end one", d, maxDur)
	}
	v, err := p.call(ctx, lua.Stop, []any{d.Milliseconds(), probe.Milliseconds(), string(kind)}, nil)
	if err != nil {
		return err
	}
	vals, err := wire.Int64s(v, 2)
	if err != nil {
		return fmt.Errorf("pacer: stop of %q: %w", p.s().name, err)
	}
	p.stoppedAt.Store(time.Now().UnixNano())
	p.emit(Event{Kind: Paused, Wait: time.Duration(vals[0]) * time.Millisecond, Err: stopErr(kind)})
	return nil
}

// stopped returns the error for a reply refused by a stop, or nil.
func stopped(rep wire.AcquireReply) *RefusedError {
	if rep.Code != wire.Denied || (rep.Reason != wireQuota && rep.Reason != wireStop) {
		return nil
	}
	return &RefusedError{why: ErrStopped, quota: rep.Reason == wireQuota, wait: rep.Wait}
}

// stopErr is the sentinel of a stop of kind wireQuota or wireStop, as
// Event.Err and Snapshot.StoppedBy report it.
func stopErr(kind string) error {
	if kind == wireQuota {
		return ErrQuotaExhausted
	}
	return ErrStopped
}

// probeSucceeded resumes the budget after its probe was settled: the
// provider serves again. In the background, so that Settle holds its
// caller no longer than its own round trip; a resume that fails leaves
// the stop to the next probe.
func (p *Pacer) probeSucceeded() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A quota stop only: an operator's stop set since the probe was
		// admitted stays.
		v, err := p.call(ctx, lua.Stop, []any{0, 0, wireQuota}, nil)
		if vals, err2 := wire.Int64s(v, 2); err == nil && err2 == nil && vals[0] == 0 {
			p.emit(Event{Kind: Resumed})
		}
	}()
}
