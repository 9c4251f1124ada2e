package pacer

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// RateState is one rate limit of a budget as a snapshot reads it: the
// Rate as configured (for Limits' four fields, the Rate that says the
// same) and its bucket's state.
type RateState struct {
	// Rate is the limit as configured.
	Rate Rate
	// Limit is the limit per window after Headroom; 0 in the zero
	// RateState that Snapshot.Rate returns for a limit the budget lacks.
	Limit int64
	// Capacity is the most the bucket holds (the burst).
	Capacity int64
	// Level is what the bucket holds now. Negative while the budget is in
	// debt: after an overrun, or while interactive calls wait for turns they
	// have already reserved.
	Level float64
	// PerSecond is the refill rate.
	PerSecond float64
}

// Snapshot is a budget's state at one moment, as an operator needs to see
// it: each limit's level and capacity, slots held and any pause; or one
// tenant's (Pacer.TenantSnapshot): its own rates and its shares of the
// budget's.
//
// A budget's snapshot leaves Tenant and Shares zero. A tenant's sets Name,
// Tenant, Time, Rates and Shares, and leaves the budget's own fields zero
// (InFlight, Concurrency, Paused, Stopped, StoppedBy, MeanHold): read the
// budget's Snapshot for those.
type Snapshot struct {
	// Name is the budget's name.
	Name string
	// Tenant is the tenant read, for a tenant's snapshot; "" for the
	// budget's.
	Tenant string
	// Time is the moment read, on the Redis clock.
	Time time.Time

	// Rates holds every rate limit of the budget: those of Limits' four
	// fields the budget has (RPM, TPM, RPD, TPD, in that order), then
	// Config.Rates' others, in order. For a tenant, they are the tenant's
	// own rates (Config.Tenants.Rates), in order. Rate looks one up by
	// name.
	Rates []RateState
	// Shares are a tenant's shares of the budget's rates, in the order of
	// the budget's Rates: each Rate is the share's, and a Level below what
	// a call needs means the tenant's calls yield to tenants within their
	// share. Nil for the budget's snapshot, or a budget without
	// Config.Tenants.Share.
	Shares []RateState

	// InFlight counts the concurrency slots held by leases not yet ended
	// or expired, those of queued waiters a freed slot admitted included
	// (a lease waiting for its turn holds none). Concurrency is the limit
	// on them (0 = none).
	InFlight, Concurrency int64
	// Paused is how long every caller still has to wait; 0 if not paused.
	Paused time.Duration
	// Stopped is how long the budget stays stopped unless a probe
	// succeeds or Resume ends it (0 if not stopped), and StoppedBy the
	// kind of stop, as the refusals' errors.Is says it: ErrQuotaExhausted
	// (Lease.Fail) or ErrStopped (Stop); nil if not stopped.
	Stopped   time.Duration
	StoppedBy error
	// MeanHold is the recent mean time a lease of this Pacer was held (from
	// its turn to its end); 0 until one ends. A waiter for a slot
	// estimates its wait from it.
	MeanHold time.Duration
}

// Rate returns the state of the rate in Rates whose Rate.Name is name
// (such as "tpm" or "tokens/3600s"), or the zero RateState if there is no
// such rate: the budget's rate, or a tenant's own rate in a tenant's
// snapshot.
func (s Snapshot) Rate(name string) RateState {
	for _, r := range s.Rates {
		if r.Rate.Name() == name {
			return r
		}
	}
	return RateState{}
}

// Snapshot reads the budget without changing it.
func (p *Pacer) Snapshot(ctx context.Context) (Snapshot, error) {
	// The stop (see lua/stop.lua) is read as one more field after the
	// buckets'.
	v, err := p.call(ctx, lua.Snapshot, append(append([]any(nil), p.s().fields...), "qs"), nil)
	if err != nil {
		return Snapshot{}, err
	}
	s, err := p.decodeSnapshot(v)
	if err != nil {
		return Snapshot{}, fmt.Errorf("pacer: snapshot of %q: %w", p.s().name, err)
	}
	return s, nil
}

func (p *Pacer) decodeSnapshot(v any) (Snapshot, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 4+len(p.s().fields) {
		return Snapshot{}, fmt.Errorf("%w: %v", wire.ErrReply, v)
	}
	ints, err := wire.Int64s(a[:3], 3)
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{
		Name:        p.s().name,
		Time:        time.UnixMicro(ints[0]),
		Paused:      time.Duration(ints[1]) * time.Millisecond,
		InFlight:    ints[2],
		Concurrency: p.s().limits.Concurrency,
	}
	if h := p.hold.Load(); h != 0 {
		s.MeanHold = time.Duration(math.Round(math.Float64frombits(h) * float64(time.Millisecond)))
	}
	j := 3
	level := func(b bucket, r Rate) error {
		str, ok := a[j].(string)
		j++
		if !ok {
			return fmt.Errorf("%w: %v", wire.ErrReply, v)
		}
		rs, err := b.state(ints[0], str)
		rs.Rate = r
		s.Rates = append(s.Rates, rs)
		return err
	}
	for i, b := range p.s().buckets {
		if b.limit == 0 {
			continue
		}
		if err := level(b, p.s().fourRate[i]); err != nil {
			return Snapshot{}, err
		}
	}
	for k, b := range p.s().rates {
		if err := level(b, p.s().rateOf[k]); err != nil {
			return Snapshot{}, err
		}
	}
	stop, ok := a[j].(string)
	if !ok {
		return Snapshot{}, fmt.Errorf("%w: %v", wire.ErrReply, v)
	}
	if stop != "" {
		var end, next, every int64
		var kind string
		if _, err := fmt.Sscanf(stop, "%d %d %d %s", &end, &next, &every, &kind); err != nil {
			return Snapshot{}, fmt.Errorf("%w: stop %q", wire.ErrReply, stop)
		}
		if left := end - ints[0]/1000; left > 0 {
			s.Stopped, s.StoppedBy = time.Duration(left)*time.Millisecond, stopErr(kind)
		}
	}
	return s, nil
}

// state returns the bucket's state at nowUs, from its field's value as
// stored ("" when none: full).
func (b bucket) state(nowUs int64, str string) (RateState, error) {
	lv, err := b.wb.State(nowUs, str)
	if err != nil {
		return RateState{}, err
	}
	return RateState{Limit: b.limit, Capacity: int64(b.capacity), Level: lv, PerSecond: b.perMs * 1000}, nil
}
