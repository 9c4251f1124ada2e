package model

import "fmt"

// stop is the state hash's qs (see stop.lua): the stop's end and next
// probe (ms), the probe interval (ms) and its kind, quota or stop.
type stop struct {
	set              bool
	end, next, every int64
	kind             string
}

// active reports whether the stop is in force at now.
func (s stop) active(now int64) bool { return s.set && s.end > now }

// String returns qs as stored.
func (s stop) String() string {
	return fmt.Sprintf("%d %d %d %s", s.end, s.next, s.every, s.kind)
}

// Stop mirrors stop.lua at now (ms): for ms > 0, every call is refused
// until now+ms (or the later end of a stop in force), but one call per
// probe interval every that fits now (0: none), and refusals name kind
// ("quota" or "stop"). An operator's stop in force stays one: a quota
// stop meanwhile only extends it, with no probe. ms = 0 resumes, but a
// quota resume leaves an operator's stop in force. It returns the stop
// remaining afterwards, in ms.
func (b *Budget) Stop(now, ms, every int64, kind string) int64 {
	old := b.stop
	operator := old.set && old.end > now && old.kind == "stop"
	if ms == 0 {
		if operator && kind == "quota" {
			return old.end - now
		}
		b.stop = stop{}
		return 0
	}
	end := now + ms
	if old.set && old.end > end {
		end = old.end
	}
	if operator {
		every, kind = 0, "stop"
	}
	b.stop = stop{set: true, end: end, next: now + every, every: every, kind: kind}
	b.written = true
	return end - now
}

// StopValue returns qs as the state hash holds it, "" if none.
func (b *Budget) StopValue() string {
	if !b.stop.set {
		return ""
	}
	return b.stop.String()
}
