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
