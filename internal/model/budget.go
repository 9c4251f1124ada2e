package model

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The bucket indexes, in the order of the scripts' bucket arguments.
const (
	RPM = iota // requests per minute
	TPM        // tokens per minute
	RPD        // requests per day
	TPD        // tokens per day
)

// Name returns the name the scripts use for bucket i ("rpm", "tpm", "rpd"
// or "tpd"): the reason an acquire reports.
func Name(i int) string {
	return [...]string{"rpm", "tpm", "rpd", "tpd"}[i]
}

// isToken reports whether bucket i counts tokens (charged the call's cost)
// rather than requests (charged 1 per call).
func isToken(i int) bool { return i == TPM || i == TPD }

// Bucket is one limit's three bucket arguments, as sent to the scripts.
type Bucket struct {
	// Cap is the capacity in requests or tokens; 0 means the limit is not
	// configured (the scripts then ignore Refill and Window).
	Cap int64
	// Refill is how much the bucket regains per Window, continuously.
	Refill int64
	// Window is the refill window in ms; it must be > 0.
	Window int64
}

// Buckets are the four limits in the scripts' order: rpm, tpm, rpd, tpd.
type Buckets [4]Bucket

// Budget is the state of one budget, as the state hash and the lease set
// hold it. Its methods are the scripts; each takes now, the millisecond the
// script reads from TIME.
//
// The zero value is a budget nobody has touched yet (every key missing):
// every bucket reads full, no lease, no pause. A Budget is not safe for
// simultaneous use; it models one Redis, which runs one script at a time.
type Budget struct {
	level  [4]int64         // stored levels in thousandths, rounded down
	stored [4]bool          // whether level[i] is in the hash; a missing level reads full
	ts     int64            // ms of the last refill
	hasTS  bool             // a missing ts reads as now: nothing to refill
	pause  int64            // ms until which nobody is admitted (0 = never set)
	qc, qb int64            // the concurrency and batch virtual queues, ms (0 = unset)
	leases map[string]int64 // id -> expiry ms; 0 once ended, until reaped
}

// bucket is one configured bucket as prelude.lua's load returns it:
// capacity, refill rate per ms and level, all Lua doubles.
type bucket struct {
	on               bool
	cap, rate, level float64
}

// load mirrors prelude.lua's load: the level of every configured bucket
// refilled up to now, and x.ts (the stored ts, or now if none).
func (b *Budget) load(now int64, bs Buckets) (lv [4]bucket, ts float64) {
	n := float64(now)
	ts = n
	if b.hasTS {
		ts = float64(b.ts)
	}
	// A clock that stepped back refills nothing until it has caught up.
	elapsed := n - ts
	if elapsed < 0 {
		elapsed = 0
	}
	for i, arg := range bs {
		if arg.Cap <= 0 {
			continue
		}
		k := bucket{on: true, cap: float64(arg.Cap), rate: float64(arg.Refill) / float64(arg.Window)}
		level := k.cap
		if b.stored[i] {
			level = float64(b.level[i]) / 1000
			if level > k.cap {
				level = k.cap
			}
		}
		level += float64(elapsed * k.rate)
		if level > k.cap {
			level = k.cap
		}
		k.level = level
		lv[i] = k
	}
	return lv, ts
}

// store mirrors prelude.lua's store without its TTL bookkeeping: ts never
// moves back, and every configured level is kept in thousandths, rounded
// down (never in the caller's favour).
func (b *Budget) store(now int64, ts float64, lv [4]bucket) {
	b.ts = int64(math.Max(float64(now), ts))
	b.hasTS = true
	for i, k := range lv {
		if k.on {
			b.level[i] = int64(math.Floor(k.level * 1000))
			b.stored[i] = true
		}
	}
}

// String describes the stored state, for test failures.
func (b *Budget) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "ts=%d", b.ts)
	if !b.hasTS {
		s.WriteString("(unset)")
	}
	for i := range b.level {
		if b.stored[i] {
			fmt.Fprintf(&s, " %s=%d", Name(i), b.level[i])
		}
	}
	fmt.Fprintf(&s, " pause=%d qc=%d qb=%d", b.pause, b.qc, b.qb)
	ids := make([]string, 0, len(b.leases))
	for id := range b.leases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	s.WriteString(" leases={")
	for i, id := range ids {
		if i > 0 {
			s.WriteString(" ")
		}
		fmt.Fprintf(&s, "%s:%d", id, b.leases[id])
	}
	s.WriteString("}")
	return s.String()
}
