package pacer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// maxSettles caps the settles one script call ends. A batch's cost falls
// little past 16 (docs/results.md, issue 23, round 7), and its arguments
// grow with it.
const maxSettles = 32

// settler sends a Pacer's settles by group commit: one script call in
// flight at a time, the settles that arrive meanwhile sent together by the
// next (settles.lua, which ends each lease exactly as settle.lua would,
// in order), a lone one by settle.lua. The batch shares what a settle
// costs Redis before and after its own arithmetic (the script call, the
// clock, the state's read and write), so the more settles arrive at once,
// the less each costs; at a light load every settle goes alone, no later
// than it would have.
type settler struct {
	client redis.Scripter
	keys   []string // the budget's KEYS: state hash, lease set, slot queue, definition

	mu    sync.Mutex
	busy  bool // a script call is in flight, and drain sends the queue after it
	queue []*settleCall

	// calls and batches count the settles sent and the script calls that
	// sent them (for tests and measurements).
	calls, batches atomic.Int64
}

// settleCall is one settle waiting for its script call.
type settleCall struct {
	args []any
	done chan settleReply // buffered: drain never waits for the caller
	// left says the caller stopped waiting (its ctx ended) before the
	// settle was sent: drain drops it. One sent already ends the lease
	// anyway, and the caller treats it as a reply lost.
	left atomic.Bool
}

type settleReply struct {
	v   any
	err error
}

// run sends settle.lua's args (one lease's) and returns its reply, or
// ctx's error as soon as ctx is done.
func (s *settler) run(ctx context.Context, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &settleCall{args: args, done: make(chan settleReply, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, c)
	lead := !s.busy
	s.busy = true
	s.mu.Unlock()
	if lead {
		go s.drain()
	}
	select {
	case r := <-c.done:
		return r.v, r.err
	case <-ctx.Done():
		c.left.Store(true)
		return nil, ctx.Err()
	}
}

// drain sends the queue, up to maxSettles a call, until it is empty.
func (s *settler) drain() {
	for {
		s.mu.Lock()
		var batch []*settleCall
		n := 0
		for _, c := range s.queue {
			n++
			if !c.left.Load() {
				batch = append(batch, c)
				if len(batch) == maxSettles {
					break
				}
			}
		}
		s.queue = s.queue[n:]
		if len(batch) == 0 {
			s.queue, s.busy = nil, false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.send(batch)
	}
}

// send sends batch by one script call and hands each its reply. A batch
// that Redis answers with an error (not a failure to reach it) is sent
// again one settle at a time, so that one settle's error is its own: the
// settles before it in the batch have ended their leases, and say so as
// a settle whose reply was lost does.
func (s *settler) send(batch []*settleCall) {
	// The calls carry no caller's deadline: each caller waits on its own
	// ctx, and go-redis bounds the call by its read timeout.
	ctx := context.Background()
	s.batches.Add(1)
	s.calls.Add(int64(len(batch)))
	if len(batch) == 1 {
		v, err := lua.Settle.Run(ctx, s.client, s.keys, batch[0].args...).Result()
		batch[0].done <- settleReply{v, err}
		return
	}
	var args []any
	for _, c := range batch {
		args = append(args, len(c.args))
		args = append(args, c.args...)
	}
	v, err := lua.Settles.Run(ctx, s.client, s.keys, args...).Result()
	var reply redis.Error
	if errors.As(err, &reply) {
		for _, c := range batch {
			v, err := lua.Settle.Run(ctx, s.client, s.keys, c.args...).Result()
			c.done <- settleReply{v, err}
		}
		return
	}
	vs, _ := v.([]any)
	if err == nil && len(vs) != len(batch) {
		err = fmt.Errorf("%w: settles.lua: %d replies for %d settles", wire.ErrReply, len(vs), len(batch))
	}
	for i, c := range batch {
		if err != nil {
			c.done <- settleReply{nil, err}
		} else {
			c.done <- settleReply{vs[i], nil}
		}
	}
}
