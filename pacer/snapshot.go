package pacer

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// Bucket is the state of one rate limit.
type Bucket struct {
	// Limit is the configured limit per window after Headroom; 0 means
	// the budget has no such limit and the other fields are zero.
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

// RateState is one of Config.Rates as a snapshot reads it.
type RateState struct {
	Rate Rate
	Bucket
}

// Snapshot is a budget's state at one moment, as an operator needs to see
// it: each limit's level and capacity, slots held and any pause.
type Snapshot struct {
	Name string
	// Time is the moment read, on the Redis clock.
	Time time.Time

	RPM, TPM, RPD, TPD Bucket
	// Rates holds Config.Rates other than the four above, in order.
	Rates []RateState

	// InFlight counts the concurrency slots held by leases not yet ended
	// or expired, those of queued waiters a freed slot admitted included
	// (a lease waiting for its turn holds none). Concurrency is the limit
	// on them (0 = none).
	InFlight, Concurrency int64
	// Paused is how long every caller still has to wait; 0 if not paused.
	Paused time.Duration
	// Stopped is how long the budget stays stopped unless a probe
	// succeeds or Resume ends it (0 if not stopped), and StoppedBy the
	// kind of stop: LimitQuota (StopQuota) or LimitStop (Stop).
	Stopped   time.Duration
	StoppedBy Limit
	// MeanHold is the recent mean time a lease of this Pacer was held (from
	// its turn to its end); 0 until one ends. A waiter for a slot
	// estimates its wait from it.
	MeanHold time.Duration
}

// Snapshot reads the budget without changing it.
func (p *Pacer) Snapshot(ctx context.Context) (Snapshot, error) {
	// The stop (see lua/stop.lua) is read as one more field after the
	// buckets'.
	v, err := p.call(ctx, lua.Snapshot, append(append([]any(nil), p.s.fields...), "qs"), nil)
	if err != nil {
		return Snapshot{}, err
	}
	s, err := p.decodeSnapshot(v)
	if err != nil {
		return Snapshot{}, fmt.Errorf("pacer: snapshot of %q: %w", p.s.name, err)
	}
	return s, nil
}

func (p *Pacer) decodeSnapshot(v any) (Snapshot, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 4+len(p.s.fields) {
		return Snapshot{}, fmt.Errorf("%w: %v", wire.ErrReply, v)
	}
	ints, err := wire.Int64s(a[:3], 3)
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{
		Name:        p.s.name,
		Time:        time.UnixMicro(ints[0]),
		Paused:      time.Duration(ints[1]) * time.Millisecond,
		InFlight:    ints[2],
		Concurrency: p.s.limits.Concurrency,
	}
	if h := p.hold.Load(); h != 0 {
		s.MeanHold = time.Duration(math.Round(math.Float64frombits(h) * float64(time.Millisecond)))
	}
	out := [4]*Bucket{&s.RPM, &s.TPM, &s.RPD, &s.TPD}
	j := 3
	level := func(b bucket) (Bucket, error) {
		str, ok := a[j].(string)
		j++
		if !ok {
			return Bucket{}, fmt.Errorf("%w: %v", wire.ErrReply, v)
		}
		if b.wb.Sub > 0 {
			lv, err := b.wb.SlidingLevel(ints[0], str)
			if err != nil {
				return Bucket{}, fmt.Errorf("%w: %s counts %q", wire.ErrReply, b.field, str)
			}
			return Bucket{Limit: b.limit, Capacity: int64(b.capacity), Level: lv, PerSecond: b.perMs * 1000}, nil
		}
		var tat int64
		if str != "" {
			var err error
			if tat, err = strconv.ParseInt(str, 10, 64); err != nil {
				return Bucket{}, fmt.Errorf("%w: %s TAT %q", wire.ErrReply, b.field, str)
			}
		}
		return Bucket{Limit: b.limit, Capacity: int64(b.capacity), Level: b.wb.Level(ints[0], tat, str != ""), PerSecond: b.perMs * 1000}, nil
	}
	for i, b := range p.s.buckets {
		if b.limit == 0 {
			continue
		}
		if *out[i], err = level(b); err != nil {
			return Snapshot{}, err
		}
	}
	for k, b := range p.s.rates {
		bk, err := level(b)
		if err != nil {
			return Snapshot{}, err
		}
		s.Rates = append(s.Rates, RateState{Rate: p.s.rateOf[k], Bucket: bk})
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
			s.Stopped, s.StoppedBy = time.Duration(left)*time.Millisecond, Limit(kind)
		}
	}
	return s, nil
}
