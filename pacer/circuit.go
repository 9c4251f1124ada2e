package pacer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/internal/cluster"
	"github.com/redis/go-redis/v9"
)

// How the outage circuit asks a Redis it lost whether it answers again: a
// probe every probeEvery, each given probeTimeout. A Redis that refuses
// connections fails a probe at once, so admission is shared again within
// about probeEvery of Redis answering, well within a second.
const (
	probeEvery   = 200 * time.Millisecond
	probeTimeout = 500 * time.Millisecond
)

// circuit tells whether this process has lost Redis. It trips on the first
// connection-class error a script call meets (see cluster.Unreachable),
// never on a script's own error or a caller's canceled context, and a
// probe in the background closes it when Redis answers again. While it is
// tripped, calls do not ask Redis: they fail open or closed at once,
// instead of each waiting out a dial. A Pacer has one only with
// Config.Outage.FailOpen or FailFast set.
type circuit struct {
	p *Pacer

	mu    sync.Mutex
	down  bool
	since time.Time
	cause error         // the error that tripped it
	up    chan struct{} // closed when Redis answers again
	local *localLimiter // this process's share of the open limits
}

func newCircuit(p *Pacer) *circuit {
	return &circuit{p: p, local: newLocalLimiter(p.s().outage, p.s().keep)}
}

// state reports whether Redis is down, and if so the error that showed it
// and a channel closed when it answers again. A nil circuit is never down.
func (c *circuit) state() (down bool, cause error, up <-chan struct{}) {
	if c == nil {
		return false, nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down, c.cause, c.up
}

// saw is told of every script call's error (nil included): a
// connection-class one trips the circuit.
func (c *circuit) saw(err error) {
	if err == nil || !cluster.Unreachable(err) {
		return
	}
	c.mu.Lock()
	if c.down {
		c.mu.Unlock()
		return
	}
	c.down, c.since, c.cause, c.up = true, time.Now(), err, make(chan struct{})
	c.local.drain()
	c.mu.Unlock()
	c.p.emit(Event{Kind: Redis, Err: err})
	go c.probe()
}

// probe asks Redis, every probeEvery, whether it answers (see answers),
// then closes the circuit. A closed client will never answer: the circuit
// closes too, and calls meet its error.
func (c *circuit) probe() {
	for {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		err := c.answers(ctx)
		cancel()
		if err == nil || errors.Is(err, redis.ErrClosed) {
			break
		}
		time.Sleep(time.Until(start.Add(probeEvery)))
	}
	c.mu.Lock()
	down := time.Since(c.since)
	c.down, c.cause = false, nil
	close(c.up)
	c.mu.Unlock()
	c.p.emit(Event{Kind: Redis, Wait: down})
}

// answers reports whether Redis serves the budget again: it reads the
// budget's own keys, so that on a Cluster it asks the node that serves
// them. A *redis.Client is first dialled outside its pool, with its own
// dialer: go-redis's pool, once PoolSize dials have failed, stops dialling
// and redials only once a second, and probes through the pool every
// 200 ms would soon put it there, adding up to a second to the outage.
func (c *circuit) answers(ctx context.Context) error {
	if cl, ok := c.p.sub.(*redis.Client); ok {
		o := cl.Options()
		if o.Dialer != nil {
			conn, err := o.Dialer(ctx, o.Network, o.Addr)
			if err != nil {
				// A closed client says so before any dial, and a
				// canceled context ends any other command before its
				// dial: this PING never leaves the process.
				done, cancel := context.WithCancel(ctx)
				cancel()
				if errors.Is(cl.Ping(done).Err(), redis.ErrClosed) {
					return redis.ErrClosed
				}
				return err
			}
			_ = conn.Close()
		}
	}
	_, err := c.p.Snapshot(ctx)
	return err
}

// watched is the Scripter every script of a Pacer with a circuit runs on:
// it tells the circuit of each call's error. The scripts run with a
// context that is never canceled (see wire.Run), so an error here comes
// from Redis or the network, never from a caller giving up.
type watched struct {
	redis.Scripter
	c *circuit
}

func (w watched) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	cmd := w.Scripter.Eval(ctx, script, keys, args...)
	w.c.saw(cmd.Err())
	return cmd
}

func (w watched) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := w.Scripter.EvalSha(ctx, sha1, keys, args...)
	w.c.saw(cmd.Err())
	return cmd
}

func (w watched) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	cmd := w.Scripter.EvalRO(ctx, script, keys, args...)
	w.c.saw(cmd.Err())
	return cmd
}

func (w watched) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := w.Scripter.EvalShaRO(ctx, sha1, keys, args...)
	w.c.saw(cmd.Err())
	return cmd
}

// FCall calls a Redis function (see functions) on the Scripter beneath,
// which every client llmpacer wraps has.
func (w watched) FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd {
	f, ok := w.Scripter.(fcaller)
	if !ok {
		return errCmd(ctx, errNoFCall)
	}
	cmd := f.FCall(ctx, function, keys, args...)
	w.c.saw(cmd.Err())
	return cmd
}

// unavailable wraps err, a script call's error, in an ErrUnavailable *RefusedError
// when it shows Redis unreachable: the budget fails closed.
func unavailable(err error) error {
	if cluster.Unreachable(err) {
		return unreachableErr("", err, false)
	}
	return err
}

// unreachable returns an ErrUnavailable refusal while the circuit is tripped,
// for a call that would only write to Redis (Pause, a pause or stop of Lease.Fail, Sync): it
// fails at once instead of dialling. Each failed dial also counts toward
// go-redis's pool giving up dialling for a second (see answers).
func (p *Pacer) unreachable() error {
	if down, cause, _ := p.out.state(); down {
		return unreachableErr("", cause, false)
	}
	return nil
}
