package retry

import (
	"context"

	"github.com/llmpacer/llmpacer/pacer"
)

// RunGroup is Run on a Group: each attempt is admitted on one deployment
// (see pacer.Group.Acquire), and call is given that deployment's Pacer, to
// send the call there (pick the client or the base URL that goes with it).
//
// Failures are answered as Run answers them, on the deployment that
// failed: a 429 pauses its budget (pacer.Lease.Fail), so the retry
// goes to another deployment with room, if one has; an overload or a
// transient failure (a 5xx, a broken connection) takes the deployment out
// of the group for pacer.GroupConfig.Cooldown, for every process, and the
// next attempt is routed at once, without backing off (with a negative
// Cooldown it backs off as Run does).
func RunGroup[T any](ctx context.Context, g *pacer.Group, r pacer.Request, call func(ctx context.Context, p *pacer.Pacer) (T, error), usage func(T) int64, opts ...Option) (T, error) {
	var zero T
	if call == nil {
		return zero, invalidf("RunGroup: call is nil")
	}
	if g == nil {
		return zero, invalidf("RunGroup: the Group is nil")
	}
	if newConfig(opts).noWait {
		return tryRun(ctx, g.TryAcquire, g, r, call, usage, opts)
	}
	return run(ctx, g.Acquire, g, r, call, usage, opts)
}
