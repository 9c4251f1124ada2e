package pacer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/concurrency"
	"github.com/llmpacer/llmpacer/internal/cluster"
	"github.com/llmpacer/llmpacer/lease"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// Lease is one admitted call's claim on the budget: see package lease.
type Lease = lease.Lease

// Pacer is one process's handle on a shared budget. Every Pacer with the
// same Config.Name on the same Redis (in this process or any other) draws
// from the same budget; the budget's state lives only in Redis.
//
// The budget is a set of token buckets, one per rate limit (requests and
// tokens per minute and per day), each refilling continuously at its limit
// per window on the Redis server's clock, plus a set of leases that counts
// calls in flight. One Lua script checks every limit and charges all of them
// or none, so any number of processes can race for it and never admit more
// than it holds.
//
// Most callers use Acquire before a call and Lease.Settle after it, or Run,
// which does both and retries. A Pacer is safe for simultaneous use by
// multiple goroutines.
type Pacer struct {
	rdb    redis.Scripter
	s      settings
	keys   []string
	budget *lease.Budget
	slots  concurrency.Queue // local waiters for a concurrency slot
	// pausedUntil is the end of the latest pause this process set, and
	// pausedAt when it was set (UnixNano). A call that reserved its turn
	// before that pause sleeps past it and queues again; calls in other
	// processes meet the pause at their next acquire.
	pausedUntil, pausedAt atomic.Int64
	// hold is the mean time this process's calls held their slot, in ms
	// (float64 bits; 0 until a lease ends): concurrency waiters are spaced
	// by it.
	hold atomic.Uint64
}

// New returns a Pacer for the budget cfg describes, on rdb: a
// *redis.Client, *redis.ClusterClient, *redis.Ring or any other
// redis.UniversalClient. It validates cfg and does not contact Redis; a new
// budget starts full.
func New(rdb redis.UniversalClient, cfg Config) (*Pacer, error) {
	if rdb == nil {
		return nil, invalidf("New: the Redis client is nil; pass a *redis.Client, *redis.ClusterClient or other redis.UniversalClient")
	}
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	// One hash tag for every key of the budget: the scripts touch several
	// keys, and on a Redis Cluster they must live in one slot.
	tag := "{" + s.prefix + ":" + s.name + "}"
	// On a Cluster, sc reloads the slot map when a node fails (a failover).
	sc := cluster.Scripter(rdb)
	p := &Pacer{rdb: sc, s: s, keys: []string{tag + ":s", tag + ":l"}}
	p.budget = &lease.Budget{
		Client: sc, Keys: p.keys, Buckets: s.leaseBuckets, TTL: s.leaseTTL,
		NoRefund: s.noRefund, Ended: p.ended,
	}
	return p, nil
}

// Name returns the budget's name.
func (p *Pacer) Name() string { return p.s.name }

// Limits returns the limits the Pacer was configured with.
func (p *Pacer) Limits() Limits { return p.s.limits }

// Keys returns the Redis keys of the budget: the state hash and the lease
// sorted set. They share one hash tag.
func (p *Pacer) Keys() []string { return append([]string(nil), p.keys...) }

func (p *Pacer) ended(l *lease.Lease, how lease.End, err error) {
	if p.s.limits.Concurrency > 0 {
		p.slots.Wake()
	}
	if d := l.Held(); d > 0 {
		ms := float64(d) / float64(time.Millisecond)
		for {
			old := p.hold.Load()
			mean := ms
			if old != 0 {
				mean = math.Float64frombits(old)*0.8 + ms*0.2
			}
			if p.hold.CompareAndSwap(old, math.Float64bits(mean)) {
				break
			}
		}
	}
	p.emit(Event{Kind: Ended, Tokens: l.Tokens(), End: how, Err: err})
}

// Acquire waits until every limit of the budget has room for r, charges
// them all, and returns the lease. End the lease with Settle (or Release if
// the call failed) as soon as the call returns.
//
// The wait is bounded by Config.MaxWait (or r.MaxWait) and by ctx. When the
// script's answer shows that the bound is too short, Acquire returns a
// *WaitError (errors.Is ErrWaitTimeout) at once instead of sleeping it out.
// A request larger than a token bucket fails at once with ErrTooLarge, and
// a cancelled ctx returns ctx's error. An interactive call that must wait
// for tokens reserves its turn with one script call and sleeps until then,
// first come, first served; a call that waits for a concurrency slot or a
// pause asks again when a slot is likely to free.
func (p *Pacer) Acquire(ctx context.Context, r Request) (*Lease, error) {
	if err := p.checkRequest(r); err != nil {
		return nil, err
	}
	began := time.Now()
	bound := p.s.maxWait
	if r.MaxWait > 0 {
		bound = r.MaxWait
	}
	deadline, ctxBound := began.Add(bound), false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxBound = d, true
	}
	id := lease.NewID()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		remain := time.Until(deadline)
		if remain < 0 {
			remain = 0
		}
		rep, err := p.acquireOnce(ctx, id, r, remain)
		if err != nil {
			return nil, err
		}
		switch rep.code {
		case codeAdmitted, codeAlready:
			l, err := p.admit(ctx, id, r, rep, began)
			if err == errRequeue {
				id = lease.NewID()
				continue
			}
			return l, err
		case codeTooLarge:
			return nil, fmt.Errorf("%w: %d tokens exceed the %s bucket's capacity (another process may run a smaller limit under the same name)", ErrTooLarge, r.Tokens, rep.reason)
		}
		if rep.wait > remain {
			err := &WaitError{Wait: rep.wait, Bound: bound, Limit: rep.reason, ctxBound: ctxBound}
			if ctxBound {
				err.Bound = time.Until(deadline)
			}
			p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.wait, Limit: rep.reason, Err: err})
			return nil, err
		}
		if err := p.sleep(ctx, rep); err != nil {
			return nil, err
		}
	}
}

// errRequeue tells Acquire that admit gave its turn back after a pause.
var errRequeue = errors.New("pacer: turn given back after a pause")

// admit turns an admitted reply into a lease, sleeping first if the call's
// turn is in the future. A ctx cancelled during that sleep cancels the
// lease, so nothing stays charged for a call that is never made.
func (p *Pacer) admit(ctx context.Context, id string, r Request, rep reply, began time.Time) (*Lease, error) {
	start := rep.now.Add(rep.wait)
	l := lease.New(p.budget, id, r.Tokens, start, time.Since(began)+rep.wait)
	if rep.wait > 0 {
		p.emit(Event{Kind: Waiting, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.wait, Limit: rep.reason})
	}
	// Sleep until the turn. A pause this process set meanwhile (a 429 seen
	// by a neighbour) means the turn was reserved against a budget that was
	// ahead of the provider: wait the pause out, then give the turn back and
	// queue again behind the corrected budget (see Throttled).
	reserved := time.Now()
	turn := reserved.Add(rep.wait)
	requeue := false
	for {
		until := turn
		if rep.wait > 0 && p.pausedAt.Load() > reserved.UnixNano() {
			requeue = true
			if paused := time.Unix(0, p.pausedUntil.Load()); paused.After(until) {
				until = paused
			}
		}
		d := time.Until(until)
		if d <= 0 {
			break
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = l.Cancel(cctx) // if this fails too, the lease expires by itself
			cancel()
			return nil, ctx.Err()
		}
	}
	if requeue {
		if err := l.Cancel(ctx); err == nil {
			return nil, errRequeue
		}
		// Redis could not take the turn back: use it rather than lose it.
	}
	p.emit(Event{Kind: Admitted, Tokens: r.Tokens, Priority: r.Priority, Wait: time.Since(began), Limit: rep.reason})
	return l, nil
}

// sleep waits out a denial: the script's hint, with up to 10% jitter so
// that callers told the same time do not return in one burst. A caller
// waiting for a concurrency slot also wakes when a lease of this process
// ends.
func (p *Pacer) sleep(ctx context.Context, rep reply) error {
	p.emit(Event{Kind: Waiting, Wait: rep.wait, Limit: rep.reason})
	d := rep.wait + time.Duration(rand.Int64N(int64(rep.wait/10)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	var wake <-chan struct{}
	if rep.reason == "concurrency" {
		var leave func()
		wake, leave = p.slots.Wait()
		defer leave()
	}
	select {
	case <-t.C:
	case <-wake:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// TryAcquire admits r only if every limit has room now. It never waits: it
// returns a lease, or nil and how long until r could be admitted (assuming
// no other caller takes the room first). It returns ErrTooLarge for a
// request that can never fit.
func (p *Pacer) TryAcquire(ctx context.Context, r Request) (*Lease, time.Duration, error) {
	if err := p.checkRequest(r); err != nil {
		return nil, 0, err
	}
	id := lease.NewID()
	rep, err := p.acquireOnce(ctx, id, r, 0)
	if err != nil {
		return nil, 0, err
	}
	switch rep.code {
	case codeAdmitted, codeAlready:
		l := lease.New(p.budget, id, r.Tokens, rep.now, 0)
		p.emit(Event{Kind: Admitted, Tokens: r.Tokens, Priority: r.Priority})
		return l, 0, nil
	case codeTooLarge:
		return nil, 0, fmt.Errorf("%w: %d tokens exceed the %s bucket's capacity", ErrTooLarge, r.Tokens, rep.reason)
	}
	p.emit(Event{Kind: Denied, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.wait, Limit: rep.reason})
	return nil, rep.wait, nil
}

func (p *Pacer) acquireOnce(ctx context.Context, id string, r Request, maxWait time.Duration) (reply, error) {
	args := p.acquireArgs(id, r, maxWait)
	v, err := p.call(ctx, lua.Acquire, args, func(v any) {
		// The reply came after the caller gave up: give the lease back.
		if rep, err := decodeAcquire(v); err == nil && (rep.code == codeAdmitted || rep.code == codeAlready) {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = lease.New(p.budget, id, r.Tokens, rep.now.Add(rep.wait), 0).Cancel(cctx)
		}
	})
	if err != nil {
		return reply{}, err
	}
	rep, err := decodeAcquire(v)
	if err != nil {
		return reply{}, fmt.Errorf("pacer: acquire on %q: %w", p.s.name, err)
	}
	return rep, nil
}

// acquireArgs returns acquire.lua's ARGV for r: everything the script
// would otherwise parse and divide is computed here, once per call.
func (p *Pacer) acquireArgs(id string, r Request, maxWait time.Duration) []any {
	s := &p.s
	batch, slots, spacing := 0, int64(0), int64(1)
	if r.Priority == Batch {
		batch = 1
	}
	if c := s.limits.Concurrency; c > 0 {
		slots = c
		if batch == 1 {
			slots = c - int64(math.Floor(float64(c)*s.keep))
		}
		// Slots free up one every mean hold time / limit: the spacing
		// between two waiters (100 ms held until a lease of this Pacer ends).
		hold := 100.0
		if h := p.hold.Load(); h != 0 {
			hold = math.Float64frombits(h)
		}
		spacing = max(1, int64(math.Ceil(hold/float64(c))))
	}
	args := make([]any, 0, 6+3*len(s.fields))
	args = append(args, id, batch, maxWait.Milliseconds(), s.leaseTTL.Milliseconds(), slots, spacing)
	args = append(args, s.fields...)
	for _, b := range s.leaseBuckets {
		units := int64(1)
		if b.Tokens {
			units = r.Tokens
		}
		keep := 0.0
		if batch == 1 {
			keep = s.keep
		}
		allow := b.Allowance(keep)
		args = append(args, b.Charge(units), allow)
	}
	return args
}

// call runs a script bounded by ctx (see lua.Run).
func (p *Pacer) call(ctx context.Context, s *redis.Script, args []any, late func(any)) (any, error) {
	v, err := lua.Run(ctx, s, p.rdb, p.keys, args, late)
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("pacer: redis on %q: %w", p.s.name, err)
	}
	return v, err
}

// Pause makes every process sharing the budget wait at least d from now
// before its next admission. It extends a pause already set, never
// shortening it. Calls of this process that had already reserved a later
// turn wait the pause out too; those of other processes that had reserved
// one go at their turn.
//
// After a provider's 429, prefer Throttled, which also brings the tripped
// bucket back in line with the provider.
func (p *Pacer) Pause(ctx context.Context, d time.Duration) error {
	return p.pause(ctx, d, nil)
}

// Throttled tells the budget that the provider refused a call of r for its
// rate limit and asked to wait d. It pauses every process for d, like
// Pause, and lowers the bucket the provider named (limit; LimitUnknown
// lowers both the request and the token bucket) so that when the pause ends
// it holds no more than r needs: a 429 means the budget believed in room the
// provider did not have, and a pause alone would leave it as far ahead, with
// the pause's refill banked on top. Run calls it on every rate-limit answer.
func (p *Pacer) Throttled(ctx context.Context, d time.Duration, limit classify.Limit, r Request) error {
	if r.Tokens < 0 || r.Tokens > maxTokens {
		return invalidf("Throttled: Request.Tokens = %d: must be between 0 and %d", r.Tokens, int64(maxTokens))
	}
	lower := map[string]bool{"rpm": true, "tpm": true}
	switch limit {
	case classify.LimitRequests:
		lower = map[string]bool{"rpm": true}
	case classify.LimitTokens, classify.LimitInputTokens, classify.LimitOutputTokens:
		lower = map[string]bool{"tpm": true}
	}
	// Each bucket lowered holds, when the pause ends, just the refused
	// call's share (at most a full bucket); never less than minus one full
	// bucket (see lua/pause.lua).
	var args []any
	for _, b := range p.s.leaseBuckets {
		if !lower[b.Field] {
			continue
		}
		units := int64(1)
		if b.Tokens {
			units = min(r.Tokens, b.Capacity)
		}
		args = append(args, b.Field, b.Span-b.Charge(units), 2*b.Span)
	}
	return p.pause(ctx, d, args)
}

func (p *Pacer) pause(ctx context.Context, d time.Duration, lower []any) error {
	if d <= 0 || d > maxDur {
		return invalidf("Pause(%v): the pause must be between 1ms and %v; pass the provider's retry-after", d, maxDur)
	}
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	v, err := p.call(ctx, lua.Pause, append([]any{ms}, lower...), nil)
	if err != nil {
		return err
	}
	vals, err := lua.Int64s(v, 2)
	if err != nil {
		return fmt.Errorf("pacer: pause on %q: %w", p.s.name, err)
	}
	now := time.Now()
	until := now.Add(time.Duration(vals[0]) * time.Millisecond).UnixNano()
	for {
		old := p.pausedUntil.Load()
		if until <= old || p.pausedUntil.CompareAndSwap(old, until) {
			break
		}
	}
	p.pausedAt.Store(now.UnixNano())
	p.emit(Event{Kind: Paused, Wait: time.Duration(vals[0]) * time.Millisecond})
	return nil
}
