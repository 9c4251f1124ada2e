package wire

import (
	"context"

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
