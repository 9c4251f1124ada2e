package model

import (
	"strconv"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Pause mirrors pause.lua without buckets to lower: nobody is admitted
// until now+ms, unless a longer pause is already set. It returns the pause
// remaining afterwards, in ms.
func (b *Budget) Pause(now, ms int64) int64 {
	if now+ms > b.pause {
		b.pause = now + ms
	}
	if ms > 0 {
		b.written = true
	}
	return b.pause - now
}

// Lower is one bucket a pause lowers, as its caller sends it: an offset
// and a limit, in µs (see pause.lua).
type Lower struct {
	Field         string
	Offset, Limit int64
}

// Throttle mirrors pause.lua with buckets to lower, at us: for ms > 0,
// nobody is admitted until now+ms (unless a longer pause is set), and each
// bucket of lowers moves to at least the pause's end plus its offset,
// never past us plus its limit; each is a charge event in its give-back
// stack, whose turn is that target. For ms = 0 (a provider's headers, no
// pause), each moves to at least now plus its offset, and one already as
// low is left alone, its stack too. It returns the pause remaining
// afterwards, in ms.
func (b *Budget) Throttle(us, ms int64, lowers []Lower) int64 {
	now := us / 1000
	pause := max(b.pause, now+ms)
	from := pause
	if ms == 0 {
		from = now
	}
	for _, l := range lowers {
		target := min(us+(from-now)*1000+l.Offset, us+l.Limit)
		tat := b.from(l.Field, us)
		if ms > 0 || tat < target {
			b.push(l.Field, us, max(tat-target, 0))
		}
		bk := b.bucket(l.Field)
		if tat < target || ms > 0 && !bk.stored {
			bk.tat, bk.stored = target, true
		}
		if ms > 0 || tat < target {
			b.written = true
		}
	}
	if ms > 0 {
		b.pause = pause
		b.written = true
	}
	return max(b.pause-now, 0)
}

// Snapshot is what snapshot.lua reports, as numbers.
type Snapshot struct {
	PauseRemaining int64 // ms until the pause ends; 0 if none
	InFlight       int64 // slots held: leases whose expiry is after now
	// Values are the fields asked for as the state hash holds them (see
	// Value): a bucket's TAT (µs), a sliding window's counts; "" for none.
	Values []string
}

// Snapshot mirrors snapshot.lua: it reads the budget at us without
// changing it, and the given fields.
func (b *Budget) Snapshot(us int64, fields ...string) Snapshot {
	now := us / 1000
	s := Snapshot{InFlight: b.inFlight(now)}
	if b.pause > now {
		s.PauseRemaining = b.pause - now
	}
	for _, f := range fields {
		s.Values = append(s.Values, b.Value(f))
	}
	return s
}

// Level returns a bucket's level at us, in units, as the Go package reads
// it from a snapshot.
func (b *Budget) Level(us int64, wb wire.Bucket) float64 {
	bk := b.buckets[wb.Field]
	if bk == nil {
		return float64(wb.Capacity)
	}
	return wb.Level(us, bk.tat, bk.stored)
}

// Hash returns the state hash's pause, qb and qs as stored ("" for none).
func (b *Budget) Hash() (pause, qb, qs string) {
	if b.pause != 0 {
		pause = strconv.FormatInt(b.pause, 10)
	}
	if b.qb != 0 {
		qb = strconv.FormatInt(b.qb, 10)
	}
	return pause, qb, b.StopValue()
}
