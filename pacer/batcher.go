package pacer

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/internal/cluster"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// batcher sends one script's calls on one budget by group commit. While
// wire.GroupFlight of its script calls are in flight, the calls that
// arrive wait, and the next script call to go carries up to
// wire.GroupMax of them, in the order they came (many: acquires.lua or
// settles.lua, which run each exactly as the single script would, in
// order); a lone call goes by one (acquire.lua or settle.lua). A batch
// shares what a call costs Redis before and after its own arithmetic (the
// script call, the clock, the state's read and write), so the more calls
// arrive at once, the less each costs. A call waits only while others are
// in flight (and while a lane yields for the calls about to arrive: see
// gather); at a light load every call goes at once, alone. One that has
// waited wire.GroupStall opens a lane of its own beside those in flight,
// and a script call in flight that long counts no more against
// GroupFlight: a call stuck on a dead connection (go-redis may wait for it
// up to its read timeout, or forever without one) holds the budget's
// other calls back once, for no longer than that.
type batcher struct {
	client    redis.Scripter
	keys      []string // the budget's KEYS: state hash, lease set, slot queue, definition
	one, many *redis.Script
	fns       *functions // sends many as its function, fn, where it can
	fn        string
	width     int           // the values of a call's reply in many's (see wire.SplitReplies)
	max       int           // the most calls a script call carries
	flight    int           // the most script calls in flight at once, but for stalls
	stall     time.Duration // how long a call waits before it opens a lane of its own
	yields    int           // the most times a lane yields before it takes a batch (see gather)
	// resend: a batch Redis answered with an error (not a failure to
	// reach it) is sent again, one call at a time, so that one call's
	// error is its own (acquires: a call admitted before the error is
	// then answered 2, admitted before). Settles do not: each caller
	// retries alone, and reads the later 0 as a reply lost (see
	// Lease.finishLocked), which a resend here would hide from it.
	resend bool

	mu    sync.Mutex
	lanes map[*lane]struct{} // the drains running
	queue []*batchCall

	// calls and sent count the calls sent and the script calls that sent
	// them (for tests and measurements).
	calls, sent atomic.Int64
}

// newBatcher returns the batcher of one and many on keys, many's reply
// giving width values a call.
func newBatcher(client redis.Scripter, keys []string, one, many *redis.Script, fns *functions, fn string, width int, resend bool) *batcher {
	return &batcher{client: client, keys: keys, one: one, many: many, fns: fns, fn: fn, width: width, max: max(1, wire.GroupMax), flight: max(1, wire.GroupFlight),
		stall: wire.GroupStall, yields: wire.GroupYields, resend: resend, lanes: map[*lane]struct{}{}}
}

// lane is one drain: a goroutine that sends the queue, one script call at
// a time, until it is empty. since is when its script call in flight was
// sent (zero between two), under the batcher's mu: a lane in flight for
// longer than the stall counts no more against flight.
type lane struct{ since time.Time }

// active returns the lanes not stalled. The caller holds mu.
func (b *batcher) active(now time.Time) int {
	n := 0
	for l := range b.lanes {
		if l.since.IsZero() || now.Sub(l.since) < b.stall || b.stall <= 0 {
			n++
		}
	}
	return n
}

// open starts a lane. The caller holds mu.
func (b *batcher) open() {
	l := &lane{}
	b.lanes[l] = struct{}{}
	go b.drain(l)
}

// batchCall is one call waiting for its script call.
type batchCall struct {
	// tenant is the key of its tenant's hash, or "": a batch sends each
	// tenant's key once, after the budget's, and each call names its own.
	tenant string
	// ctx is the caller's, without its deadline or cancellation: its
	// values (a trace, a hook's) go with the script call that carries it
	// first.
	ctx  context.Context
	args []any
	done chan batchReply // buffered: send never waits for the caller
	// state is 0 while queued, 1 once taken to be sent, 2 once its caller
	// left (its ctx ended) before: it is then not sent.
	state atomic.Int32
}

type batchReply struct {
	v   any
	err error
}

// run sends the script's args (one call's, charged to the tenant whose
// hash is the key tenant, or to the budget alone if "") and returns its
// reply, or ctx's error as soon as ctx is done. A reply that arrives after
// that, of a call sent before, is passed to late, if not nil (see
// wire.Run).
func (b *batcher) run(ctx context.Context, tenant string, args []any, late func(any)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &batchCall{tenant: tenant, ctx: context.WithoutCancel(ctx), args: args, done: make(chan batchReply, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	start := b.active(time.Now()) < b.flight
	if start {
		b.open()
	}
	b.mu.Unlock()
	var stalled <-chan time.Time
	if !start && b.stall > 0 {
		t := time.NewTimer(b.stall)
		defer t.Stop()
		stalled = t.C
	}
	for {
		select {
		case r := <-c.done:
			return r.v, r.err
		case <-stalled:
			// Still queued: the calls in flight may be stuck. One lane
			// more takes this call, and those behind it.
			stalled = nil
			if c.state.Load() == 0 {
				b.mu.Lock()
				b.open()
				b.mu.Unlock()
			}
		case <-ctx.Done():
			if !c.state.CompareAndSwap(0, 2) && late != nil {
				go func() {
					if r := <-c.done; r.err == nil {
						late(r.v)
					}
				}()
			}
			return nil, ctx.Err()
		}
	}
}

// drain sends the queue as lane l, up to max calls a script call, until
// it is empty.
func (b *batcher) drain(l *lane) {
	for {
		b.gather()
		b.mu.Lock()
		var batch []*batchCall
		n := 0
		for _, c := range b.queue {
			n++
			if c.state.CompareAndSwap(0, 1) {
				batch = append(batch, c)
				if len(batch) == b.max {
					break
				}
			}
		}
		b.queue = b.queue[n:]
		if len(batch) == 0 {
			if len(b.queue) == 0 {
				b.queue = nil
			}
			delete(b.lanes, l)
			b.mu.Unlock()
			return
		}
		l.since = time.Now()
		b.mu.Unlock()
		b.send(batch)
		b.mu.Lock()
		l.since = time.Time{}
		b.mu.Unlock()
	}
}

// gather lets the calls about to arrive join the next batch: it yields
// the processor while the queue grows, up to b.yields (wire.GroupYields)
// times, or until it holds a full batch. The callers a script call has
// just answered are runnable, and most come straight back with their
// next call (a lease's settle, the next acquire): a yield lets them
// queue before the batch is taken, not after it has gone. Under load in
// four processes this makes batches half as large again and a pair
// about a sixth cheaper for Redis, at no cost in throughput
// (docs/results.md, issue 23, round 14); at a light load the queue does
// not grow, and a call waits for one yield, under a microsecond.
func (b *batcher) gather() {
	b.mu.Lock()
	n := len(b.queue)
	b.mu.Unlock()
	for range b.yields {
		if n >= b.max {
			return
		}
		runtime.Gosched()
		b.mu.Lock()
		m := len(b.queue)
		b.mu.Unlock()
		if m == n {
			return
		}
		n = m
	}
}

// send sends batch by one script call and hands each call its reply.
func (b *batcher) send(batch []*batchCall) {
	// The script call carries no caller's deadline: each caller waits on
	// its own ctx, and go-redis bounds the call by its read timeout. It
	// carries the first caller's values.
	ctx := batch[0].ctx
	b.sent.Add(1)
	b.calls.Add(int64(len(batch)))
	if len(batch) == 1 {
		v, err := b.one.Run(ctx, b.client, b.keysOf(batch[0]), batch[0].args...).Result()
		batch[0].done <- batchReply{v, err}
		return
	}
	// Each call's group: the index in KEYS of its tenant's hash (0:
	// none; 1-based, as Lua's), its count of arguments, its arguments.
	keys := b.keys[:len(b.keys):len(b.keys)]
	at := map[string]int{}
	var args []any
	for _, c := range batch {
		t := 0
		if c.tenant != "" {
			if t = at[c.tenant]; t == 0 {
				keys = append(keys, c.tenant)
				t = len(keys)
				at[c.tenant] = t
			}
		}
		args = append(args, t, len(c.args))
		args = append(args, c.args...)
	}
	v, err := b.fns.run(ctx, b.fn, b.many, keys, args)
	// (Not one that says the server cannot serve: the circuit has
	// tripped on it, and k calls more would only wait on it.)
	var reply redis.Error
	if b.resend && errors.As(err, &reply) && !cluster.Unreachable(err) {
		for _, c := range batch {
			v, err := b.one.Run(c.ctx, b.client, b.keysOf(c), c.args...).Result()
			c.done <- batchReply{v, err}
		}
		return
	}
	var vs []any
	if err == nil {
		vs, err = wire.SplitReplies(v, len(batch), b.width)
	}
	for i, c := range batch {
		if err != nil {
			c.done <- batchReply{nil, err}
		} else {
			c.done <- batchReply{vs[i], nil}
		}
	}
}

// keysOf returns the KEYS of the single script for c.
func (b *batcher) keysOf(c *batchCall) []string {
	if c.tenant == "" {
		return b.keys
	}
	return append(b.keys[:len(b.keys):len(b.keys)], c.tenant)
}
