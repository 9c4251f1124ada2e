package wire

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Run runs s and returns its reply, but returns ctx's error as soon as ctx
// is done even if Redis has not answered: go-redis bounds a call by its own
// read timeout, not by ctx, unless the client sets ContextTimeoutEnabled,
// and a caller must never wait on a hung Redis past its deadline.
//
// A reply that arrives after Run returned is passed to late, if not nil, so
// the caller can undo what the script did (an admission nobody will use).
func Run(ctx context.Context, s *redis.Script, c redis.Scripter, keys []string, args []any, late func(any)) (any, error) {
	if ctx.Done() == nil {
		return s.Run(ctx, c, keys, args...).Result()
	}
	type result struct {
		v   any
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := s.Run(context.WithoutCancel(ctx), c, keys, args...).Result()
		ch <- result{v, err}
	}()
	select {
	case res := <-ch:
		return res.v, res.err
	case <-ctx.Done():
		if late != nil {
			go func() {
				if res := <-ch; res.err == nil {
					late(res.v)
				}
			}()
		}
		return nil, ctx.Err()
	}
}

// Group commit (see package pacer's batcher): a Pacer keeps at most
// GroupFlight acquire script calls, and as many settle ones, in flight on
// its budget; the calls that arrive meanwhile go together in the next, at
// most GroupMax in one. One in flight makes the most of each script call
// (docs/results.md, issue 23, round 9); a batch's Redis cost a call falls
// little past 16 (issue 23, round 7), and its arguments grow with it. A
// call that has waited GroupStall opens one more lane beside those in
// flight, and a script call in flight that long counts no more against
// GroupFlight, so that one stuck on a dead connection holds the others
// back no longer. Before it takes a batch, a lane yields the processor
// while its queue grows, at most GroupYields times, so that callers just
// answered can queue their next call (issue 23, round 14). A Pacer reads
// these when made: storm/redisbench sets them to measure calls sent
// alone beside calls sent together, in one process.
var (
	GroupMax, GroupFlight = 32, 1
	GroupStall            = 50 * time.Millisecond
	GroupYields           = 4
)
