package pacer

import (
	"time"

	"github.com/llmpacer/llmpacer/lease"
)

// EventKind says what an Event reports.
type EventKind int

// The kinds of Event.
const (
	// Admitted: a lease was granted. Wait is the total time Acquire waited.
	Admitted EventKind = iota + 1
	// Waiting: Acquire is about to sleep for Wait because of Limit.
	Waiting
	// Denied: Acquire or TryAcquire gave up; Err says why.
	Denied
	// Ended: a lease ended; End says how.
	Ended
	// Paused: the budget was paused; Wait is the pause now in force.
	Paused
)

// String names the kind: "admitted", "waiting", "denied", "ended", "paused".
func (k EventKind) String() string {
	switch k {
	case Admitted:
		return "admitted"
	case Waiting:
		return "waiting"
	case Denied:
		return "denied"
	case Ended:
		return "ended"
	case Paused:
		return "paused"
	}
	return "unknown"
}

// Event is what Config.Observe receives: enough to count admissions, export
// wait-time histograms and log denials without wrapping every call.
type Event struct {
	Kind     EventKind
	Name     string // the budget
	Tokens   int64  // tokens of the request or lease
	Priority Priority
	Wait     time.Duration
	Limit    string    // the limit that made a call wait or be denied
	End      lease.End // for Ended
	Err      error     // for Denied, and for Ended when the lease expired
}

func (p *Pacer) emit(e Event) {
	if p.s.observe != nil {
		e.Name = p.s.name
		p.s.observe(e)
	}
}
