package wire

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Headroom returns n less the fraction headroom, rounded down: how every
// limit and burst is lowered (pacer's Config.Headroom).
func Headroom(n int64, headroom float64) int64 {
	return int64(math.Floor(float64(n) * (1 - headroom)))
}

// RateBucket returns the bucket of a rate of limit units of unit per
// window, holding burst (0: the limit), after headroom; a strict sliding
// window when sliding. name is the rate's name (pacer's Rate.Name). The
// caller has checked that the limit after headroom is at least 1 and the
// burst not above it.
func RateBucket(name string, limit, burst int64, window time.Duration, unit Unit, sliding bool, headroom float64) Bucket {
	limit = Headroom(limit, headroom)
	if sliding {
		return NewSliding(name, limit, window, unit)
	}
	if burst = Headroom(burst, headroom); burst == 0 {
		burst = limit
	}
	return NewBucket(name, burst, limit, window, unit)
}

// ShareBucket returns a tenant's share of a budget's bucket named name,
// which holds capacity and refills limit per window (a sliding window's
// capacity is its limit): field "%<name>", refilling share of the limit
// and holding share of the capacity, with room for ShareCalls calls up to
// share of the limit (see pacer's Tenants.Share); never less than one
// unit of each.
func ShareBucket(name string, capacity, limit int64, window time.Duration, unit Unit, share float64) Bucket {
	room := max(1, int64(float64(limit)*share))
	b := NewBucket("%"+name, max(1, int64(float64(capacity)*share)), room, window, unit)
	b.Room = room
	return b
}

// State returns the units b holds at nowUs, from its field's value in a
// state or tenant hash as snapshot.lua returns it: a TAT, a sliding
// window's counts, or "" for a bucket never used (full).
func (b Bucket) State(nowUs int64, v string) (float64, error) {
	if b.Sub > 0 {
		lv, err := b.SlidingLevel(nowUs, v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s counts %q", ErrReply, b.Field, v)
		}
		return lv, nil
	}
	var tat int64
	if v != "" {
		var err error
		if tat, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, fmt.Errorf("%w: %s TAT %q", ErrReply, b.Field, v)
		}
	}
	return b.Level(nowUs, tat, v != ""), nil
}
