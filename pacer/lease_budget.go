package pacer

import (
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// leaseBudget is what a lease needs to end itself: one per definition
// (see Pacer.adopt).
type leaseBudget struct {
	Client  redis.Scripter
	Keys    []string      // state hash, lease zset, slot queue: the KEYS of every script
	Buckets []wire.Bucket // the configured buckets
	// WithTenant is Buckets followed by every tenant's buckets (its own
	// rates and its shares of the budget's), in the order acquire charged
	// them: what a tenant's lease settles.
	WithTenant []wire.Bucket
	TTL        time.Duration
	// Limit is the concurrency limit (0: none), and BatchSlots the slots a
	// batch call may use: a lease that ends gives its slot to the next
	// waiter.
	Limit, BatchSlots int64
	// NoRefund makes Settle charge overruns only: the provider keeps what
	// it counted at admission.
	NoRefund bool
	// Ended, if set, is called once when a lease ends, however it ends.
	Ended func(ending)
	// Pacer is the budget's Pacer, which Lease.Fail tells what the
	// provider said (a pause, a stop).
	Pacer *Pacer
	// Settler sends the settles of leases without a tenant, several in one
	// script call when they arrive together (nil: each alone).
	Settler *batcher
}

// ending is what a lease reports when it ends.
type ending struct {
	How      LeaseState
	Tokens   int64 // reserved
	Priority Priority
	Used     int64 // tokens the call used, as settled; the reservation otherwise
	Held     time.Duration
	Err      error // ErrLeaseExpired for an expired lease; else a failed call's error (see Lease.Fail)
	// Verdict is the failure of a lease that Lease.Fail ended.
	Verdict classify.Verdict
	Probe   bool // the lease was a stopped budget's probe (admission.Probe)
	Local   bool // the lease was admitted locally (admission.Local)
}

// admission is what acquire.lua said about an admitted lease.
type admission struct {
	ID string
	// TenantKey is the hash of the call's tenant (see leaseBudget.WithTenant),
	// or "" for a call charged to the budget alone.
	TenantKey string
	Tokens    int64
	Priority  Priority
	// Reserve is what the buckets were charged, in their units: the
	// tokens (and their input and output, when the request split them)
	// times the model's weight. Zero: Tokens, unweighted.
	Reserve wire.Use
	// Weight is the model's weight on token rates (0 means 1): the usage
	// a settle reports is weighed with it too.
	Weight float64
	// Price is the model's price, for a budget with Spend rates (Priced
	// false: none): a settle prices the usage with it.
	Price  wire.Price
	Priced bool
	// Start is when the call's turn begins, Expiry when the lease expires,
	// both on the Redis clock.
	Start, Expiry time.Time
	// ChargedUs is the µs, on the Redis clock, at which acquire charged
	// the buckets, or a lower bound of it (see settle.lua).
	ChargedUs int64
	Waited    time.Duration
	// TurnMs is the call's turn in ms on the Redis clock as acquire.lua
	// computed it (its now in ms plus the wait), when the admission's
	// reply gave it exactly; 0 otherwise. A sliding window's give-back
	// comes off the sub-window it names.
	TurnMs int64
	// Detached says the budget does not count the lease: a shadow budget's
	// call it would have refused, which runs anyway. Ending it, or keeping
	// it alive, changes nothing in Redis.
	Detached bool
	// Quiet says the caller has not been told of the lease yet (a turn
	// reserved ahead, a late reply to a caller who gave up): its end is
	// not reported unless announce is called first, so that every Ended
	// event follows an Admitted one.
	Quiet bool
	// Probe says the lease is the one call a stopped budget let through
	// to see whether the provider serves again: its settle resumes the
	// budget.
	Probe bool
	// Local, if set, is the process's own limiter that admitted the lease
	// while Redis was down: the lease ends against it, never against
	// Redis, however long it lives.
	Local *localLimiter
}

// newID returns a random lease id: 96 bits, so ids from every process of a
// fleet never collide.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
