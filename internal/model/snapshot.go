package model

// Pause mirrors pause.lua: nobody is admitted until now+ms, unless a longer
// pause is already set. It returns the pause remaining afterwards, in ms.
func (b *Budget) Pause(now, ms int64) int64 {
	if now+ms > b.pause {
		b.pause = now + ms
	}
	return b.pause - now
}

// Snapshot is what snapshot.lua reports, as numbers.
type Snapshot struct {
	PauseRemaining int64 // ms until the pause ends; 0 if none
	InFlight       int64 // leases whose expiry is after now
	// Levels are the buckets refilled to now, as unrounded Lua doubles
	// (negative in debt or while turns are reserved); 0 for a bucket whose
	// Cap is 0, which the script does not report.
	Levels [4]float64
}

// Snapshot mirrors snapshot.lua: it reads the budget at now without
// changing it (the refill it computes is not stored).
func (b *Budget) Snapshot(now int64, bs Buckets) Snapshot {
	lv, _ := b.load(now, bs)
	s := Snapshot{InFlight: b.inFlight(now)}
	if b.pause > now {
		s.PauseRemaining = b.pause - now
	}
	for i, k := range lv {
		s.Levels[i] = k.level
	}
	return s
}

// Levels is shorthand for Snapshot(now, bs).Levels.
func (b *Budget) Levels(now int64, bs Buckets) [4]float64 {
	return b.Snapshot(now, bs).Levels
}
