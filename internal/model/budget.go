package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Rate is one limit as a test configures it: a GCRA bucket, or with
// Sliding a strict sliding window.
type Rate struct {
	Unit wire.Unit
	// Cap is the capacity in units: a bucket's burst, a sliding window's
	// limit.
	Cap int64
	// Refill is how much a bucket regains per Window, continuously (a
	// sliding window ignores it).
	Refill int64
	// Window is the refill window, or the sliding window, in ms (> 0).
	Window  int64
	Sliding bool
	// Mark is 0 for a budget's rate, '@' for a tenant's own rate, '%' for
	// a tenant's share of the budget's rate of the same name (a GCRA
	// bucket even when that rate is a sliding window; see Config.Tenanted).
	Mark byte
	// Room is, for a share, the most units its room for wire.ShareCalls
	// calls reaches: Share of the budget rate's limit.
	Room int64
}

// Name returns the rate's name as package pacer names it (pacer.Rate.Name,
// which the model does not import): rpm, tpm, rpd or tpd for requests or
// tokens a minute or a day, else "<unit>/<s>s" or "<unit>/<ms>ms". A
// sliding rate is always named by its unit and window.
func (r Rate) Name() string {
	if !r.Sliding {
		switch {
		case r.Unit == wire.Requests && r.Window == 60_000:
			return "rpm"
		case r.Unit == wire.Tokens && r.Window == 60_000:
			return "tpm"
		case r.Unit == wire.Requests && r.Window == 86_400_000:
			return "rpd"
		case r.Unit == wire.Tokens && r.Window == 86_400_000:
			return "tpd"
		}
	}
	unit := [...]string{wire.Requests: "requests", wire.Tokens: "tokens", wire.Input: "input_tokens",
		wire.Output: "output_tokens", wire.Spend: "spend"}[r.Unit]
	if r.Window%1000 == 0 {
		return fmt.Sprintf("%s/%ds", unit, r.Window/1000)
	}
	return fmt.Sprintf("%s/%dms", unit, r.Window)
}

// Wire returns the rate as the scripts' caller sees it: package wire's
// Bucket, built as package pacer builds it.
func (r Rate) Wire() wire.Bucket {
	w := time.Duration(r.Window) * time.Millisecond
	if r.Mark == share {
		wb := wire.NewBucket("%"+r.Name(), r.Cap, r.Refill, w, r.Unit)
		wb.Room = r.Room
		return wb
	}
	var wb wire.Bucket
	if r.Sliding {
		wb = wire.NewSliding(r.Name(), r.Cap, w, r.Unit)
	} else {
		wb = wire.NewBucket(r.Name(), r.Cap, r.Refill, w, r.Unit)
	}
	if r.Mark == own {
		wb.Field = "@" + wb.Field
	}
	return wb
}

// Field returns the rate's state hash field (marked "~<g>:" if sliding).
func (r Rate) Field() string { return r.Wire().Field }

// Config is a budget's rates, in the scripts' order, and what turns a
// request into their units: the models' weights on token rates, and their
// prices for Spend rates (the model "" prices any other model).
type Config struct {
	Rates   []Rate
	Weights map[string]float64
	Prices  map[string]wire.Price
	// Tenant are every tenant's own rates, and Share the fraction of each
	// of the budget's rates that is a tenant's share (see Tenanted).
	Tenant []Rate
	Share  float64
}

// Wire returns the rates as the scripts' caller sees them, in order.
func (c Config) Wire() []wire.Bucket {
	bs := make([]wire.Bucket, len(c.Rates))
	for i, r := range c.Rates {
		bs[i] = r.Wire()
	}
	return bs
}

// Fields returns the rates' fields, in order.
func (c Config) Fields() []string {
	fs := make([]string, len(c.Rates))
	for i, r := range c.Rates {
		fs[i] = r.Field()
	}
	return fs
}

// gcra is a bucket's state: its TAT (µs), whether it is stored (a missing
// TAT reads full), and its give-back stack (giveback.go), oldest first.
type gcra struct {
	tat    int64
	stored bool
	stack  []hentry
}

// Budget is the state of one budget, as the state hash and the lease set
// hold it. Its methods are the scripts; each takes the clock the script
// reads from TIME.
//
// The zero value is a budget nobody has touched yet (every key missing):
// every bucket reads full, no lease, no pause. A Budget is not safe for
// simultaneous use; it models one Redis, which runs one script at a time.
type Budget struct {
	// hash is the state hash's buckets and qb; each tenant's are a hash of
	// their own (tenant.go).
	hash
	pause int64 // ms until which nobody is admitted (0 = never set)
	stop  stop  // the stop (qs), if one was set
	// tenants are the tenants' hashes, by key (KEYS[5]).
	tenants map[string]*hash
	// def is the stored definition (KEYS[4]), dv the state hash's copy of
	// its version ("" missing), and written whether a script has written
	// the state hash (define.lua sets dv only in a state that exists).
	def     definition
	dv      string
	written bool
	// found says the acquire running found the state lost (see lost).
	found bool
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

// hash is a hash of buckets, the state hash's or a tenant's: for each
// rate, by its field, a GCRA bucket's TAT and give-back stack or a sliding
// window's counts; its batch queue qb (ms, 0 unset); and its xp, the
// expiry last set on it (ms), which the model keeps for tenants' hashes
// only (see tcover).
type hash struct {
	// buckets and windows are the GCRA buckets and the sliding windows, by
	// field, once a script has touched them.
	buckets map[string]*gcra
	windows map[string]*window
	qb      int64
	xp      int64
}

// bucket returns the state of the bucket field, made if missing.
func (b *hash) bucket(field string) *gcra {
	if b.buckets == nil {
		b.buckets = map[string]*gcra{}
	}
	g := b.buckets[field]
	if g == nil {
		g = &gcra{}
		b.buckets[field] = g
	}
	return g
}

// from returns bucket field's TAT as the scripts start a charge from it at
// us: the stored TAT, or us if it is missing or in the past (the bucket is
// full, and restarts from now).
func (b *hash) from(field string, us int64) int64 {
	if g := b.buckets[field]; g != nil && g.stored && g.tat >= us {
		return g.tat
	}
	return us
}

// Value returns field as the state hash holds it, "" if missing: a
// bucket's TAT in decimal, a sliding window's counts (see window).
func (b *hash) Value(field string) string {
	if sub(field) > 0 {
		return b.windows[field].String()
	}
	if g := b.buckets[field]; g != nil && g.stored {
		return strconv.FormatInt(g.tat, 10)
	}
	return ""
}

// Ring returns a sliding window's ring fields ("<field>.r0" ..) as a
// script writes them: all zeros where a field may be missing or "".
func (b *Budget) Ring(field string) [wire.SlidingRingFields]string {
	return b.windows[field].ring()
}

// TenantRing returns, as Ring, a sliding window's ring fields in tenant
// key's hash.
func (b *Budget) TenantRing(key, field string) [wire.SlidingRingFields]string {
	if t := b.tenants[key]; t != nil {
		return t.windows[field].ring()
	}
	return (*window)(nil).ring()
}

// String describes the stored state, for test failures.
func (b *Budget) String() string {
	var s strings.Builder
	for _, f := range keys(b.buckets) {
		g := b.buckets[f]
		if g.stored {
			fmt.Fprintf(&s, "%s=%d ", f, g.tat)
		}
		if len(g.stack) > 0 {
			fmt.Fprintf(&s, "%s.h=%v ", f, g.stack)
		}
	}
	for _, f := range keys(b.windows) {
		fmt.Fprintf(&s, "%s=%q ", f, b.windows[f].String())
	}
	fmt.Fprintf(&s, "pause=%d qb=%d", b.pause, b.qb)
	if b.stop.set {
		fmt.Fprintf(&s, " qs=%q", b.stop.String())
	}
	for _, set := range []struct {
		name string
		m    map[string]int64
	}{{"leases", b.leases}, {"queue", b.queue}} {
		fmt.Fprintf(&s, " %s={", set.name)
		for i, id := range keys(set.m) {
			if i > 0 {
				s.WriteString(" ")
			}
			fmt.Fprintf(&s, "%s:%d", id, set.m[id])
		}
		s.WriteString("}")
	}
	return s.String()
}

// keys returns m's keys, sorted.
func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
