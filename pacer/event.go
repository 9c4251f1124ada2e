package pacer

import (
	"time"

	"github.com/llmpacer/llmpacer/classify"
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
	// Ended: a lease ended; End says how. Every Ended follows the
	// Admitted of its lease: a turn reserved ahead and given back before
	// it came (its caller gave up) ends unreported. A lease that
	// Lease.Fail ended (released, rejected, or expired while its end was
	// retried) carries the failure: its Verdict, and Err, the call's error
	// (nil for an HTTP answer; ErrLeaseExpired for an expired lease). So
	// does a shadow lease that Fail ended with a verdict or an error, the
	// only shadow lease whose end is reported, with Tokens and Used 0: the
	// budget counted none.
	Ended
	// Paused: the budget was paused or stopped; Wait is the pause or the
	// stop now in force. For a pause, Limit is the limit the provider's
	// 429 named ("rpm" or "tpm", see Lease.Fail), or "" for Pause and for
	// a 429 that named none. A stop is a pause that refuses calls rather
	// than hold them: its Err is ErrQuotaExhausted (Lease.Fail on an
	// exhausted quota) or ErrStopped (Stop), and its Limit "".
	Paused
	// Resumed: the budget's stop was ended, by Resume or by a probe that
	// succeeded.
	Resumed
	// Redefined: the Pacer found another definition of the budget stored
	// in Redis (see Pacer.Define) and follows it from now on; Version is
	// its version. Err is set if it could not be used.
	Redefined
	// Redis: this process lost Redis or found it again, in a budget with
	// Config.Outage. While Redis is lost, Err says how (a call found it
	// unreachable), and until it answers again calls do not ask it: this
	// process admits them from its share of the open limits, or refuses
	// them with ErrUnavailable. Once Redis answers again and the shared
	// budget admits calls, Err is nil and Wait is how long it was lost.
	Redis
	// Warning: the budget is at risk or was hurt; Err says how and what
	// to change. A setting of the Redis server puts it at risk (New checks
	// maxmemory-policy); or, with Err ErrStateLost, Redis had lost the
	// budget's state while it was in use (a restart without persistence,
	// a failover that lost the last writes, an eviction), and this
	// process's call found it: its buckets restart empty, as the provider
	// still counts what was used, and refill at their rate, which takes
	// Wait.
	Warning
)

// String names the kind: "admitted", "waiting", "denied", "ended", "paused",
// "resumed", "redefined", "redis", "warning".
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
	case Resumed:
		return "resumed"
	case Redefined:
		return "redefined"
	case Redis:
		return "redis"
	case Warning:
		return "warning"
	}
	return "unknown"
}

// Event is what Config.Observe receives: enough to count admissions, export
// wait-time histograms and log denials without wrapping every call.
//
// Every event has Kind and Name. Admitted, Waiting and Denied carry the
// request's Tokens and Priority; Ended carries the lease's.
type Event struct {
	Kind     EventKind
	Name     string // the budget
	Tokens   int64  // tokens of the request or lease
	Priority Priority
	// Wait: for Admitted, how long Acquire waited in all; for Waiting, the
	// sleep ahead; for Denied, how long until room; for Paused, the pause
	// or the stop; for Redis found again, how long it was lost; for a Warning
	// with ErrStateLost, how long the buckets take to refill.
	Wait time.Duration
	// Limit names the limit that made a call wait or be denied, as
	// RefusedError.Limit does: "" when a pause held the call (the reply
	// does not say what the 429 that set it named) or a stop refused it
	// (Err says which). For Paused, the limit the provider's 429 named.
	Limit string
	// For Ended: how the lease ended, the tokens it used (the settled usage;
	// the reservation for a released or expired lease; 0 for a canceled or
	// rejected one), and how long it was held (0 if canceled or expired).
	End  LeaseState
	Used int64
	Held time.Duration
	// Throttled is, for Paused, whether a provider's 429 set the pause
	// (Lease.Fail, also when the 429 named no limit: Limit is then ""),
	// rather than Pause.
	Throttled bool
	// Version is, for Redefined, the version now followed.
	Version int64
	// Verdict is, for the Ended of a lease that Lease.Fail ended, what the
	// failure means; the zero Verdict otherwise.
	Verdict classify.Verdict
	Err     error // for Denied, Paused by a stop (the kind of stop), Ended (the failed call's error; nil for an HTTP answer; ErrLeaseExpired when the lease expired), Redis while it is lost, Warning, and a Redefined that failed
	// Local says, for Admitted, Waiting and Ended, that this process's
	// share admitted the call while Redis was down (see Outage).
	Local bool
}

func (p *Pacer) emit(e Event) {
	if p.s().observe != nil {
		e.Name = p.s().name
		p.s().observe(e)
	}
}
