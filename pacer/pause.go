package pacer

import (
	"context"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// Pause makes every process sharing the budget wait at least d from now
// before its next admission. It extends a pause already set, never
// shortening it. Calls of this process that had already reserved a later
// turn wait the pause out too (a Group's calls are routed again instead);
// those of other processes that had reserved one go at their turn.
//
// After a provider's 429 on a leased call, call Lease.Fail instead: it
// pauses the budget too, and also brings the tripped bucket back in line
// with the provider. Pause is for a 429 without a lease.
func (p *Pacer) Pause(ctx context.Context, d time.Duration) error {
	return p.pauseFor(ctx, d, "", nil, false)
}

// throttled tells the budget that the provider refused a call that
// reserved use for its rate limit and asked to wait d (see Lease.Fail).
// It pauses every process for d, like Pause, and lowers the bucket the
// provider named (limit; classify.LimitUnknown lowers both the request and
// the token bucket) so that when the pause ends it holds no more than the
// call needs: a 429 means the budget believed in room the provider did not
// have, and a pause alone would leave it as far ahead, with the pause's
// refill banked on top.
func (p *Pacer) throttled(ctx context.Context, d time.Duration, limit classify.Limit, use wire.Use) error {
	// The provider's limits that answer 429 are per minute or shorter:
	// the buckets of the unit it named, with a window of a minute or less,
	// are lowered; day buckets never are.
	lower := map[Unit]bool{Requests: true, Tokens: true, InputTokens: true, OutputTokens: true}
	switch limit {
	case classify.LimitRequests:
		lower = map[Unit]bool{Requests: true}
	case classify.LimitTokens:
		lower = map[Unit]bool{Tokens: true, InputTokens: true, OutputTokens: true}
	case classify.LimitInputTokens:
		lower = map[Unit]bool{Tokens: true, InputTokens: true}
	case classify.LimitOutputTokens:
		lower = map[Unit]bool{Tokens: true, OutputTokens: true}
	}
	// Each bucket lowered holds, when the pause ends, just the refused
	// call's share (at most a full bucket); never less than minus one full
	// bucket (see lua/pause.lua).
	var args []any
	for _, b := range p.s().configured() {
		// A sliding window has no TAT to lower: the pause holds it back.
		if !lower[b.unit] || b.window > time.Minute || b.wb.Sub > 0 {
			continue
		}
		offset, limit := b.wb.Lowering(use.Of(b.wb.Unit))
		args = append(args, b.field, offset, limit)
	}
	return p.pauseFor(ctx, d, throttledName(limit), args, true)
}

// pauseFor pauses the budget; throttled says a provider's 429 asked for it
// (see Event.Throttled), and limit names the limit it named ("" if none).
func (p *Pacer) pauseFor(ctx context.Context, d time.Duration, limit string, lower []any, throttled bool) error {
	if d <= 0 || d > maxDur {
		return invalidf("Pause(%v): the pause must be between 1ms and %v; pass the provider's retry-after", d, maxDur)
	}
	if err := p.unreachable(); err != nil {
		return err // retry.Run sleeps out the provider's delay itself
	}
	ms := max(d.Milliseconds(), 1)
	v, err := p.call(ctx, lua.Pause, append([]any{ms}, lower...), nil)
	if err != nil {
		return err
	}
	vals, err := wire.Int64s(v, 2)
	if err != nil {
		return fmt.Errorf("pacer: pause on %q: %w", p.s().name, err)
	}
	remaining := time.Duration(vals[0]) * time.Millisecond
	now := time.Now()
	until := now.Add(remaining).UnixNano()
	for {
		old := p.pausedUntil.Load()
		if until <= old || p.pausedUntil.CompareAndSwap(old, until) {
			break
		}
	}
	p.pausedAt.Store(now.UnixNano())
	p.emit(Event{Kind: Paused, Wait: remaining, Limit: limit, Throttled: throttled})
	return nil
}

// call runs a script on the budget's keys, bounded by ctx (see wire.Run).
func (p *Pacer) call(ctx context.Context, s *redis.Script, args []any, late func(any)) (any, error) {
	return p.callKeys(ctx, p.keys, s, args, late)
}

// callKeys runs a script on keys, bounded by ctx (see wire.Run).
func (p *Pacer) callKeys(ctx context.Context, keys []string, s *redis.Script, args []any, late func(any)) (any, error) {
	v, err := wire.Run(ctx, s, p.rdb, keys, args, late)
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("pacer: redis on %q: %w", p.s().name, err)
	}
	return v, err
}
