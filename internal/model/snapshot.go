package model

// Pause mirrors pause.lua without buckets to lower: nobody is admitted
// until now+ms, unless a longer pause is already set. It returns the pause
// remaining afterwards, in ms.
func (b *Budget) Pause(now, ms int64) int64 {
	if now+ms > b.pause {
		b.pause = now + ms
	}
	return b.pause - now
}

// Lower is one bucket a pause lowers, as its caller sends it: an offset
// and a limit, in µs (see pause.lua).
type Lower struct {
	Bucket        int
	Offset, Limit int64
}

// Lowers returns what a caller sends pause.lua to lower buckets (rpm and
// tpm, those configured in bs, as which names them) after a refusal of a
// call of tokens: package wire's Lowering, as package pacer calls it.
func Lowers(bs Buckets, tokens int64, which ...int) []Lower {
	var ls []Lower
	for _, i := range which {
		if bs[i].Cap > 0 {
			wb := bs[i].Wire(i)
			off, lim := wb.Lowering(wb.Units(tokens))
			ls = append(ls, Lower{i, off, lim})
		}
	}
	return ls
}

// Throttle mirrors pause.lua with buckets to lower, at us: nobody is
// admitted until now+ms (unless a longer pause is set), and each bucket of
// lowers moves to at least the pause's end plus its offset, never past us
// plus its limit. Each is a charge event in its give-back stack, whose turn
// is that target. It returns the pause remaining afterwards, in ms.
func (b *Budget) Throttle(us, ms int64, lowers []Lower) int64 {
	now := us / 1000
	pause := max(b.pause, now+ms)
	for _, l := range lowers {
		target := min(us+(pause-now)*1000+l.Offset, us+l.Limit)
		tat := b.from(l.Bucket, us)
		b.push(l.Bucket, us, max(tat-target, 0))
		if !b.stored[l.Bucket] || tat < target {
			b.tat[l.Bucket], b.stored[l.Bucket] = target, true
		}
	}
	b.pause = pause
	return pause - now
}

// Snapshot is what snapshot.lua reports, as numbers.
type Snapshot struct {
	PauseRemaining int64 // ms until the pause ends; 0 if none
	InFlight       int64 // slots held: leases and grants whose expiry is after now
	// TATs are the stored TATs (µs); Stored says which exist (the script
	// answers "" for the others: full).
	TATs   [4]int64
	Stored [4]bool
}

// Snapshot mirrors snapshot.lua: it reads the budget at us without
// changing it.
func (b *Budget) Snapshot(us int64) Snapshot {
	now := us / 1000
	s := Snapshot{InFlight: b.inFlight(now), TATs: b.tat, Stored: b.stored}
	if b.pause > now {
		s.PauseRemaining = b.pause - now
	}
	return s
}

// Level returns bucket i's level at us, in units, as the Go package reads
// it from a snapshot.
func (b *Budget) Level(i int, us int64, bk Bucket) float64 {
	return bk.Wire(i).Level(us, b.tat[i], b.stored[i])
}
