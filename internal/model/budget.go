package model

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// The bucket indexes, in the scripts' order.
const (
	RPM = iota // requests per minute
	TPM        // tokens per minute
	RPD        // requests per day
	TPD        // tokens per day
)

// Name returns the field the scripts use for bucket i ("rpm", "tpm", "rpd"
// or "tpd"): the reason an acquire reports.
func Name(i int) string {
	return [...]string{"rpm", "tpm", "rpd", "tpd"}[i]
}

// IsToken reports whether bucket i counts tokens (charged the call's cost)
// rather than requests (charged 1 per call).
func IsToken(i int) bool { return i == TPM || i == TPD }

// Bucket is one limit as a test configures it.
type Bucket struct {
	// Cap is the capacity in requests or tokens; 0 means the limit is not
	// configured.
	Cap int64
	// Refill is how much the bucket regains per Window, continuously.
	Refill int64
	// Window is the refill window in ms; it must be > 0.
	Window int64
}

// Wire returns the bucket as the scripts' caller sees it (package wire's
// Bucket), for bucket index i.
func (b Bucket) Wire(i int) wire.Bucket {
	unit := wire.Requests
	if IsToken(i) {
		unit = wire.Tokens
	}
	return wire.NewBucket(Name(i), b.Cap, b.Refill, time.Duration(b.Window)*time.Millisecond, unit)
}

// Buckets are the four limits in the scripts' order: rpm, tpm, rpd, tpd.
type Buckets [4]Bucket

// Budget is the state of one budget, as the state hash and the lease set
// hold it. Its methods are the scripts; each takes the clock the script
// reads from TIME.
//
// The zero value is a budget nobody has touched yet (every key missing):
// every bucket reads full, no lease, no pause. A Budget is not safe for
// simultaneous use; it models one Redis, which runs one script at a time.
type Budget struct {
	tat    [4]int64 // each bucket's TAT, µs
	stored [4]bool  // whether tat[i] is in the hash; a missing TAT reads full
	// stack is each bucket's give-back stack (see giveback.go), oldest
	// first.
	stack [4][]hentry
	pause int64 // ms until which nobody is admitted (0 = never set)
	qb    int64 // the batch virtual queue, ms (0 = unset)
	// leases is the lease set: id -> expiry ms for a lease holding its
	// slot, PENDING + expiry for a pending one.
	leases map[string]int64
	// queue is the slot queue: waiter id -> its score (a ticket, µs, plus
	// BATCH for a batch waiter); waiters each one's request (w:<id>).
	queue   map[string]int64
	waiters map[string]waiter
	// published are the messages published since Published was last
	// called.
	published []string
}

// from returns bucket i's TAT as the scripts start a charge from it at us:
// the stored TAT, or us if it is missing or in the past (the bucket is
// full, and restarts from now).
func (b *Budget) from(i int, us int64) int64 {
	if b.stored[i] && b.tat[i] >= us {
		return b.tat[i]
	}
	return us
}

// String describes the stored state, for test failures.
func (b *Budget) String() string {
	var s strings.Builder
	for i := range b.tat {
		if b.stored[i] {
			fmt.Fprintf(&s, "%s=%d ", Name(i), b.tat[i])
		}
		if len(b.stack[i]) > 0 {
			fmt.Fprintf(&s, "%s.h=%v ", Name(i), b.stack[i])
		}
	}
	fmt.Fprintf(&s, "pause=%d qb=%d", b.pause, b.qb)
	for _, set := range []struct {
		name string
		m    map[string]int64
	}{{"leases", b.leases}, {"queue", b.queue}} {
		ids := make([]string, 0, len(set.m))
		for id := range set.m {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		fmt.Fprintf(&s, " %s={", set.name)
		for i, id := range ids {
			if i > 0 {
				s.WriteString(" ")
			}
			fmt.Fprintf(&s, "%s:%d", id, set.m[id])
		}
		s.WriteString("}")
	}
	return s.String()
}
