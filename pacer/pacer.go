package pacer

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/concurrency"
	"github.com/llmpacer/llmpacer/internal/cluster"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

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
// Most callers use Acquire before a call and Lease.Settle after it, or
// package retry's Run, which does both and retries. A Pacer is safe for simultaneous use by
// multiple goroutines.
type Pacer struct {
	rdb redis.Scripter
	sub redis.UniversalClient // for the subscription to slot grants
	// cur is the budget's definition in force: the Config's, or one
	// stored in Redis (see Define). Read it with s().
	cur  atomic.Pointer[settings]
	keys []string // state hash, lease zset, slot queue, definition hash
	tag  string   // what starts every key: "{<prefix>:<name>}", or "{<HashTag>}<prefix>:<name>"
	// local is the Config New was given: a stored definition replaces its
	// budget fields, never its Name, KeyPrefix, Observe or Shadow.
	local Config
	// defining is held while the Pacer stores or loads a definition;
	// defined says its first call settled which definition it runs.
	defining sync.Mutex
	defined  atomic.Bool
	// grants hands this process's waiters for a concurrency slot their
	// admission when a freed slot admits them.
	grants *concurrency.Grants
	// pausedUntil is the end of the latest pause this process set, and
	// pausedAt when it was set (UnixNano). A call that reserved its turn
	// before that pause keeps it, but goes no earlier than the pause's end
	// (see untilTurn); calls in other processes meet the pause at their
	// next acquire.
	pausedUntil, pausedAt atomic.Int64
	// stoppedAt is when this process last stopped the budget or was
	// refused by a stop (UnixNano; 0: never): a call that reserved its
	// turn before then asks the budget at its turn whether it may still
	// go (see untilTurn).
	stoppedAt atomic.Int64
	// out is the outage circuit: nil unless Config.Outage lets a limit
	// fail open, or asks to fail fast.
	out *circuit
	// hold is the mean time this process's calls held their slot, in ms
	// (float64 bits; 0 until a lease ends): a slot waiter's wait is
	// estimated from it.
	hold atomic.Uint64
	// seen is the latest expiry (ms, Redis clock) this process saw the
	// budget's keys kept until: a state found missing before then was
	// lost, not expired (see lost.go).
	seen atomic.Int64
	// acquires and settles send the budget's first attempts at an
	// admission and its leases' ends, by group commit (see batcher), but
	// for a tenant's.
	acquires, settles *batcher
}

// New returns a Pacer for the budget cfg describes, on rdb: a
// *redis.Client, *redis.ClusterClient, *redis.Ring or any other
// redis.UniversalClient. It validates cfg and does not wait for Redis; a
// new budget starts full. With Config.Observe set, it asks the server for
// its maxmemory-policy in the background, and emits a Warning event if the
// server may evict the budget's keys (see Warning and ErrStateLost).
func New(rdb redis.UniversalClient, cfg Config) (*Pacer, error) {
	// A nil pointer in the interface passes a nil check and would panic
	// later, inside a goroutine of ours, killing the process.
	if rdb == nil || reflect.ValueOf(rdb).Kind() == reflect.Pointer && reflect.ValueOf(rdb).IsNil() {
		return nil, invalidf("New: the Redis client is nil; pass a *redis.Client, *redis.ClusterClient or other redis.UniversalClient")
	}
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	// One hash tag for every key of the budget: the scripts touch several
	// keys, and on a Redis Cluster they must live in one slot. A HashTag
	// shared by several budgets puts them all in one slot (see Group).
	tag := wire.KeyTag(s.prefix, s.name, cfg.HashTag)
	// On a Cluster, sc reloads the slot map when a node fails (a failover).
	sc := cluster.Scripter(rdb)
	p := &Pacer{rdb: sc, sub: rdb, tag: tag, local: cfg, keys: wire.Keys(tag)}
	p.adopt(&s)
	if s.outage.circuit {
		p.out = newCircuit(p)
		sc = watched{Scripter: sc, c: p.out}
		p.rdb = sc
	}
	// Group commit runs its script calls on p.rdb too: the circuit sees
	// their errors.
	fns := newFunctions(sc, rdb)
	p.acquires = newBatcher(sc, p.keys, lua.Acquire, lua.Acquires, fns, lua.AcquiresFunction, wire.AcquireReplyLen, true)
	p.settles = newBatcher(sc, p.keys, lua.Settle, lua.Settles, fns, lua.SettlesFunction, wire.SettleReplyLen, false)
	p.adopt(&s) // its leases end through p.rdb and p.settles
	// Slot grants are listened for whatever the definition: one stored
	// later may set a concurrency limit.
	p.grants = concurrency.NewGrants(p.listen, p.granted, linger)
	p.checkEviction(rdb)
	return p, nil
}

// s returns the budget's definition in force.
func (p *Pacer) s() *settings { return p.cur.Load() }

// adopt makes s the definition in force, with the lease budget its leases
// end against.
func (p *Pacer) adopt(s *settings) {
	s.budget = &leaseBudget{
		Client: p.rdb, Keys: p.keys, Buckets: s.wireBuckets, WithTenant: s.withTenant, TTL: s.leaseTTL,
		Limit: s.limits.Concurrency, BatchSlots: wire.Slots(s.limits.Concurrency, s.keep),
		NoRefund: s.noRefund, Ended: p.ended, Pacer: p, Settler: p.settles,
	}
	p.cur.Store(s)
}

// Config returns the definition in force: the Config New was given, or,
// once the Pacer follows a definition stored by Define (or by Open), that
// definition's fields in place of its own, with Version its version (0
// while it runs its own). The result is a copy: changing it changes
// nothing in the Pacer.
func (p *Pacer) Config() Config {
	s := p.s()
	c := s.cfg
	c.Version = s.version
	c.Rates = slices.Clone(c.Rates)
	c.Tenants.Rates = slices.Clone(c.Tenants.Rates)
	c.Weights = maps.Clone(c.Weights)
	c.Prices = maps.Clone(c.Prices)
	c.Outage.FailOpen = slices.Clone(c.Outage.FailOpen)
	return c
}

// ended is told of every lease's end: it keeps the mean hold time and
// emits the Ended event. (The slot goes to the budget's first waiter, in
// whichever process: settle.lua admits it.)
func (p *Pacer) ended(e ending) {
	if e.Held > 0 {
		ms := float64(e.Held) / float64(time.Millisecond)
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
	p.emit(Event{Kind: Ended, Tokens: e.Tokens, Priority: e.Priority, Used: e.Used, Held: e.Held, End: e.How, Err: e.Err, Verdict: e.Verdict, Local: e.Local})
	if e.Probe && e.How == Settled {
		p.probeSucceeded()
	}
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
