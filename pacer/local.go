package pacer

import (
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// localLimiter is this process's share of a budget's open limits, which
// admits calls while Redis is down (see Outage). Its buckets are GCRA
// buckets like the shared ones, on this process's clock, and it charges
// and corrects them with the same arithmetic the scripts are sent
// (wire.Charges, wire.Corrections). It is safe for simultaneous use.
type localLimiter struct {
	buckets []wire.Bucket
	slots   int64   // 0: no concurrency limit fails open
	keep    float64 // the batch floor

	mu   sync.Mutex
	tat  []int64              // each bucket's TAT, µs (Unix)
	held map[string]time.Time // leases holding a slot, to their expiry
}

func newLocalLimiter(o outageSettings, keep float64) *localLimiter {
	return &localLimiter{buckets: o.local, slots: o.slots, keep: keep, tat: make([]int64, len(o.local)), held: map[string]time.Time{}}
}

// localWait is how long a call that finds no local slot sleeps before it
// asks again: a slot frees when a local lease ends, unannounced.
const localWait = 20 * time.Millisecond

// admit takes use from every bucket, and a slot, for lease id if all have
// room now, holding the slot until expiry. Otherwise it takes nothing and
// returns how long until they might, and the limit that lacks room; never
// is set when a bucket could never hold use.
func (l *localLimiter) admit(id string, use wire.Use, batch bool, expiry time.Time) (wait time.Duration, short string, never bool) {
	keep := 0.0
	if batch {
		keep = l.keep
	}
	cs := wire.Charges(l.buckets, use, keep)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().UnixMicro()
	// Slots first: with every slot taken, no refill helps.
	if l.slots > 0 {
		l.expire(now)
		if int64(len(l.held)) >= wire.Slots(l.slots, keep) {
			return localWait, nameConcurrency, false
		}
	}
	var over int64
	for i, c := range cs {
		if c.Charge > c.Allow {
			return 0, c.Field, true
		}
		if d := max(l.tat[i], now) + c.Charge - now - c.Allow; d > over {
			over, short = d, c.Field
		}
	}
	if over > 0 {
		return time.Duration(over) * time.Microsecond, short, false
	}
	if l.slots > 0 {
		l.held[id] = expiry
	}
	for i, c := range cs {
		l.tat[i] = max(l.tat[i], now) + c.Charge
	}
	return 0, "", false
}

// drain empties every bucket, as Redis is lost: the shared budget may have
// been spent to the last token, so this process's share admits only what
// refills from now on. The fleet then sends the provider no more than the
// limit's refill while Redis is down, never a burst on top of one.
func (l *localLimiter) drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().UnixMicro()
	for i, b := range l.buckets {
		l.tat[i] = max(l.tat[i], now+b.Span)
	}
}

// expire frees the slots of leases past their expiry.
func (l *localLimiter) expire(nowUs int64) {
	for id, exp := range l.held {
		if exp.UnixMicro() <= nowUs {
			delete(l.held, id)
		}
	}
}

// End gives back what ending a local lease returns, as settle.lua would:
// the unused reservation (or the request too, if canceled), or charges a
// debt of at most a full bucket; a give-back never fills a bucket past
// full. It frees the lease's slot.
func (l *localLimiter) End(id string, canceled bool, reserved, used wire.Use) {
	cs := wire.Corrections(l.buckets, reserved, used, canceled, 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().UnixMicro()
	for _, c := range cs {
		for i, b := range l.buckets {
			if b.Field != c.Field {
				continue
			}
			if c.Us < 0 {
				l.tat[i] = max(l.tat[i]+c.Us, now)
			} else {
				l.tat[i] = max(l.tat[i], now) + c.Us
			}
		}
	}
	delete(l.held, id)
}

// Keep pushes a local lease's slot expiry to until (KeepAlive).
func (l *localLimiter) Keep(id string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.held[id]; ok {
		l.held[id] = until
	}
}
