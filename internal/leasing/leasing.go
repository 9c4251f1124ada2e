// Package leasing is what package pacer and package lease share about a
// lease without showing it to users: the budget a lease ends itself
// against, how pacer opens a lease, and what a lease tells pacer when it
// ends.
package leasing

import (
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// Budget is what a lease needs to end itself. Package pacer fills it in
// once per Pacer.
type Budget struct {
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
	Ended func(Ending)
}

// Ending is what a lease reports when it ends.
type Ending struct {
	How    int   // the lease.End value
	Tokens int64 // reserved
	Used   int64 // tokens the call used, as settled; the reservation otherwise
	Held   time.Duration
	Err    error // lease.ErrExpired for an expired lease
	Probe  bool  // the lease was a stopped budget's probe (Admission.Probe)
	Local  bool  // the lease was admitted locally (Admission.Local)
}

// Admission is what acquire.lua said about an admitted lease.
type Admission struct {
	ID string
	// TenantKey is the hash of the call's tenant (see Budget.WithTenant),
	// or "" for a call charged to the budget alone.
	TenantKey string
	Tokens    int64
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
	// not reported unless Announce is called first, so that every Ended
	// event follows an Admitted one.
	Quiet bool
	// Probe says the lease is the one call a stopped budget let through
	// to see whether the provider serves again: its settle resumes the
	// budget.
	Probe bool
	// Local, if set, is the process's own limiter that admitted the lease
	// while Redis was down: the lease ends against it, never against
	// Redis, however long it lives.
	Local Local
}

// Local is a process's own limiter, which admits calls while Redis is
// down (pacer.Outage).
type Local interface {
	// End gives back what ending lease id returns, as settle.lua would
	// (see wire.Corrections), and frees its slot.
	End(id string, canceled bool, reserved, used wire.Use)
	// Keep pushes the expiry of lease id's slot to until.
	Keep(id string, until time.Time)
}

// Open returns a new *lease.Lease (as any) for an admission. Package lease
// sets it when it is initialised: lease.Lease's fields are its own, and
// this hook lets pacer create leases without lease exporting a
// constructor users would never call. Package pacer imports lease, so Open
// is set before pacer can run.
var Open func(b *Budget, a Admission) any

// Announce marks a quiet lease (see Admission.Quiet) as told to its
// caller: its end is reported from then on. Package lease sets it.
var Announce func(lease any)

// NewID returns a random lease id: 96 bits, so ids from every process of a
// fleet never collide.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
