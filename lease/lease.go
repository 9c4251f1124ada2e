package lease

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/concurrency"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// ErrExpired is returned when a lease is ended or kept alive after its TTL
// ran out and the budget took its slot back. Its reserved tokens stay
// charged: a late Settle refunds nothing, so it can never refund twice.
var ErrExpired = errors.New("lease: expired before it ended; its reserved tokens stay charged")

// ErrInvalid is returned for a negative or absurd token count.
var ErrInvalid = errors.New("lease: invalid argument")

// maxTokens matches the bound package pacer puts on reservations.
const maxTokens = 1 << 50

// Budget is what a lease needs to end itself. Package pacer fills it in
// once per Pacer; users never build one.
type Budget struct {
	Client  redis.Scripter
	Keys    []string // state hash, lease zset: the KEYS of every script
	Buckets []Bucket // the configured buckets
	TTL     time.Duration
	// NoRefund makes Settle charge overruns only: the provider keeps what
	// it counted at admission.
	NoRefund bool
	// Ended, if set, is called once when a lease ends, however it ends.
	Ended func(l *Lease, how End, err error)
}

// Bucket describes one configured bucket of a Budget: what a lease gives
// back or owes it when it ends.
type Bucket struct {
	lua.Bucket
	Tokens bool // charged in tokens (tpm, tpd), not in requests
}

// End says how a lease ended.
type End int

// How a lease ends.
const (
	Held      End = iota // not ended yet
	Settled              // the call's usage was settled
	Released             // the call failed; the reservation stays charged
	Cancelled            // the call never happened; everything went back
	Expired              // the TTL ran out first; the reservation stays charged
	Rejected             // the provider refused the call; tokens back, request counted
)

// String names how a lease ended: "held", "settled", "released", ...
func (e End) String() string {
	switch e {
	case Held:
		return "held"
	case Settled:
		return "settled"
	case Released:
		return "released"
	case Cancelled:
		return "cancelled"
	case Expired:
		return "expired"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("End(%d)", int(e))
}

// Lease is one admitted call's claim on the budget. It is safe for
// simultaneous use by multiple goroutines.
type Lease struct {
	b      *Budget
	id     string
	tokens int64
	start  time.Time // on the Redis clock: when the call's turn began
	waited time.Duration

	mu     sync.Mutex
	end    End
	tried  bool // an earlier attempt to end failed: its effect is unknown
	expiry time.Time
	held   time.Duration
}

// New returns the lease the acquire script admitted. Package pacer calls it;
// most users get leases from Pacer.Acquire.
func New(b *Budget, id string, tokens int64, start time.Time, waited time.Duration) *Lease {
	return &Lease{b: b, id: id, tokens: tokens, start: start, waited: waited, expiry: start.Add(b.TTL)}
}

// NewID returns a random lease id: 96 bits, so ids from every process of a
// fleet never collide.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ID returns the lease's id, the member of the budget's lease set in Redis.
func (l *Lease) ID() string { return l.id }

// Tokens returns the tokens reserved.
func (l *Lease) Tokens() int64 { return l.tokens }

// Start returns when the call's turn began, on the Redis clock.
func (l *Lease) Start() time.Time { return l.start }

// Waited returns how long Acquire waited for this lease.
func (l *Lease) Waited() time.Duration { return l.waited }

// Held returns how long the call held its slot, from its turn to its end on
// the Redis clock: 0 until the lease is settled, released or rejected, and 0
// for a lease that was cancelled or expired.
func (l *Lease) Held() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// State returns Held until the lease ends, then how it ended.
func (l *Lease) State() End {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// Settle ends the lease with the tokens the call really used (for OpenAI,
// usage.total_tokens; for Anthropic, input_tokens + output_tokens). The
// unused part of the reservation goes back to the budget at once (unless
// the budget is NoRefund); usage above it is charged as debt that later
// callers wait out, at most one full bucket per call.
//
// Settle is idempotent: once a lease has ended, by Settle, Release or Cancel,
// further calls return nil and change nothing. A lease that expired returns
// ErrExpired and refunds nothing. If Redis fails, Settle returns the error
// and the lease stays held, so it may be retried; unsettled, it expires.
func (l *Lease) Settle(ctx context.Context, usedTokens int64) error {
	if usedTokens < 0 || usedTokens > maxTokens {
		return fmt.Errorf("%w: Settle(%d): used tokens must be between 0 and %d; pass the provider's reported usage, or call Release if the call failed", ErrInvalid, usedTokens, int64(maxTokens))
	}
	if l.b.NoRefund && usedTokens < l.tokens {
		usedTokens = l.tokens
	}
	return l.finish(ctx, Settled, usedTokens)
}

// Release ends the lease of a call that failed, keeping the whole
// reservation charged: the provider may have counted the call (a timeout on
// our side is often a success on theirs). Idempotent like Settle.
func (l *Lease) Release(ctx context.Context) error {
	return l.finish(ctx, Released, l.tokens)
}

// Reject ends the lease of a call the provider refused before doing any
// work: overloaded (529), out of quota, another 4xx. Its tokens go back,
// whatever NoRefund says, since nothing was generated; its request stays
// counted, as providers count refused requests toward their request limits.
// (pacer.Run releases a rate-limited call instead: a 429 shows the budget
// ran ahead of the provider, and the kept charge corrects it.) Idempotent
// like Settle.
func (l *Lease) Reject(ctx context.Context) error {
	return l.finish(ctx, Rejected, 0)
}

// Cancel ends the lease of a call that was never sent, giving back its tokens
// and its request. Idempotent like Settle.
func (l *Lease) Cancel(ctx context.Context) error {
	return l.finish(ctx, Cancelled, 0)
}

func (l *Lease) finish(ctx context.Context, how End, used int64) error {
	l.mu.Lock()
	end, err := l.finishLocked(ctx, how, used)
	l.mu.Unlock()
	if err != nil || end == Held {
		return err
	}
	// Tell the budget outside the lock: an observer may look at the lease.
	if l.b.Ended != nil {
		var endErr error
		if end == Expired {
			endErr = ErrExpired
		}
		l.b.Ended(l, end, endErr)
	}
	if end == Expired {
		return ErrExpired
	}
	return nil
}

// finishLocked runs the settle script unless the lease has already ended. It
// returns how the lease ended by this call, or Held if it had ended before.
func (l *Lease) finishLocked(ctx context.Context, how End, used int64) (End, error) {
	switch l.end {
	case Held:
	case Expired:
		return Held, ErrExpired
	default:
		return Held, nil
	}
	args := l.endArgs(how, used)
	v, err := lua.Run(ctx, lua.Settle, l.b.Client, l.b.Keys, args, nil)
	var res []int64
	if err == nil {
		res, err = lua.Int64s(v, 2)
	}
	if err != nil {
		l.tried = true
		return Held, fmt.Errorf("lease: %s %s: %w", how, l.id, err)
	}
	switch {
	case res[0] == 1:
		l.end = how
		if now := time.UnixMicro(res[1]); how != Cancelled && now.After(l.start) {
			l.held = now.Sub(l.start)
		}
	case res[0] == 0 && l.tried:
		// An earlier attempt whose reply was lost did end it.
		l.end = how
	case res[0] == 0:
		l.end = Expired
	default:
		l.tried = true
		return Held, fmt.Errorf("lease: %s %s: unexpected reply %v", how, l.id, res)
	}
	return l.end, nil
}

// endArgs returns the settle script's ARGV for ending the lease as how says
// (see lua/settle.lua): a correction in µs for each bucket it changes,
// negative to give back, positive for a debt.
func (l *Lease) endArgs(how End, used int64) []any {
	args := make([]any, 2, 2+2*len(l.b.Buckets))
	args[0], args[1] = l.id, l.expiry.UnixMilli()
	for _, b := range l.b.Buckets {
		var back int64 // units given back; negative: owed
		switch how {
		case Settled:
			if b.Tokens {
				back = l.tokens - used
			}
		case Rejected:
			if b.Tokens {
				back = l.tokens
			}
		case Cancelled:
			back = 1
			if b.Tokens {
				back = l.tokens
			}
		}
		var d int64
		switch {
		case back > 0:
			d = -b.Refund(back)
		case back < 0:
			// One overrun is charged at most one full bucket, so a wildly
			// wrong estimate holds the budget back for at most a window more.
			d = b.Charge(min(-back, b.Capacity))
		}
		if d != 0 {
			args = append(args, b.Field, d)
		}
	}
	return args
}

// KeepAlive pushes the lease's expiry to one lease TTL from now, so a long
// call keeps its concurrency slot. It returns ErrExpired if the lease already
// expired, and nil without a Redis call if it has ended.
func (l *Lease) KeepAlive(ctx context.Context) error {
	// The lock is held across the call: the settle script trusts the expiry
	// this lease knows, so a renewal and an end must not interleave.
	l.mu.Lock()
	switch l.end {
	case Held:
	case Expired:
		l.mu.Unlock()
		return ErrExpired
	default:
		l.mu.Unlock()
		return nil
	}
	v, err := lua.Run(ctx, lua.KeepAlive, l.b.Client, l.b.Keys, []any{l.id, l.b.TTL.Milliseconds()}, nil)
	var res []int64
	if err == nil {
		res, err = lua.Int64s(v, 3)
	}
	if err != nil {
		l.mu.Unlock()
		return fmt.Errorf("lease: keep alive %s: %w", l.id, err)
	}
	if res[0] != 0 {
		l.expiry = time.UnixMilli(res[2])
		l.mu.Unlock()
		return nil
	}
	l.end = Expired
	l.mu.Unlock()
	if l.b.Ended != nil {
		l.b.Ended(l, Expired, ErrExpired)
	}
	return ErrExpired
}

// Expiry returns when the lease's slot expires unless it is kept alive or
// ended, as of the last admission or KeepAlive, on the Redis clock.
func (l *Lease) Expiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiry
}

// AutoKeepAlive keeps the lease alive in the background, renewing it every
// third of the lease TTL, until stop is called, ctx is done, or the lease
// ends or expires. A renewal that fails because Redis is briefly unreachable
// is retried at the next tick. Call stop when the call returns:
//
//	stop := l.AutoKeepAlive(ctx)
//	reply, err := callModel(ctx)
//	stop()
func (l *Lease) AutoKeepAlive(ctx context.Context) (stop func()) {
	return concurrency.KeepAlive(ctx, l.b.TTL/3, func(ctx context.Context) bool {
		err := l.KeepAlive(ctx)
		return !errors.Is(err, ErrExpired) && l.State() == Held
	})
}
