package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// listing is what list and show print: the JSON of -json.
type listing struct {
	Redis  string `json:"redis"`
	Prefix string `json:"prefix"`
	// KeysMatched counts the keys of the prefix the scan found, and
	// Truncated says -scan cut it: budgets or tenants may be missing.
	KeysMatched int      `json:"keys_matched"`
	Truncated   bool     `json:"truncated"`
	Budgets     []budget `json:"budgets"`
	// Missing are the budgets show named that have no keys.
	Missing []string `json:"missing,omitempty"`
}

// budget is one budget's state.
type budget struct {
	Name string `json:"name"`
	// Version of the stored definition; 0 when none is stored, and then
	// Limits is empty and Raw holds what the state says without one.
	Version int64 `json:"version"`
	// Time is the moment read, on the Redis clock.
	Time   time.Time `json:"time"`
	Limits []level   `json:"limits,omitempty"`
	Raw    []field   `json:"raw,omitempty"`
	// InFlight counts the concurrency slots held; Concurrency is their
	// limit (0: none, or unknown without a definition). Waiting counts
	// the callers queued for a slot.
	InFlight    int64 `json:"in_flight"`
	Concurrency int64 `json:"concurrency"`
	Waiting     int64 `json:"waiting"`
	// PausedS is how long every caller still waits, in seconds; StoppedS
	// how long the budget stays stopped, and StoppedBy "quota" or "stop".
	PausedS   float64  `json:"paused_s"`
	StoppedS  float64  `json:"stopped_s"`
	StoppedBy string   `json:"stopped_by,omitempty"`
	Tenants   *tenants `json:"tenants,omitempty"`
	// Error says why the budget could not be read; the rest is then
	// what could be.
	Error string `json:"error,omitempty"`
}

// level is one limit's state, as pacer.Snapshot reads it.
type level struct {
	Name      string  `json:"name"`
	Unit      string  `json:"unit"`
	Limit     int64   `json:"limit"`
	Capacity  int64   `json:"capacity"`
	Level     float64 `json:"level"`
	PerSecond float64 `json:"per_second"`
	// FullInS is how long until the bucket is full again, in seconds, at
	// its refill rate; for a strict sliding window (Sliding), at most
	// this: its counts roll out at most a window after they were made.
	FullInS float64 `json:"full_in_s"`
	WindowS float64 `json:"window_s"`
	Sliding bool    `json:"sliding,omitempty"`
}

// field is one bucket of the raw state, read without a definition.
type field struct {
	Field string `json:"field"`
	// FullInS is how long until the bucket is full again (its stored
	// time less now, in seconds); Value is the stored value instead when
	// it is not a time (a sliding window's counts).
	FullInS float64 `json:"full_in_s"`
	Value   string  `json:"value,omitempty"`
}

// tenants are a budget's busiest tenants.
type tenants struct {
	// Found counts the tenant keys the scan found, Read those read
	// (at most -tenant-scan), and Busiest the -tenants shown: those with
	// the least room left first.
	Found   int      `json:"found"`
	Read    int      `json:"read"`
	Busiest []tenant `json:"busiest"`
}

// tenant is one tenant's state, known by the hash of its id.
type tenant struct {
	Hash string `json:"hash"`
	// Room is the smallest fraction left of any of its rates and shares,
	// 0 empty, 1 full; with a definition only.
	Room   *float64 `json:"room,omitempty"`
	Rates  []level  `json:"rates,omitempty"`
	Shares []level  `json:"shares,omitempty"`
	Raw    []field  `json:"raw,omitempty"`
}

// reader reads budgets on one Redis.
type reader struct {
	rdb redis.UniversalClient
	o   options
}

// read reads one budget, whose tenants' hashes are given. An error is
// kept in the budget's Error: one unreadable budget must not hide the
// others.
func (r reader) read(ctx context.Context, name string, hashes []string) budget {
	b := budget{Name: name}
	var unusable error
	p, err := pacer.Open(ctx, r.rdb, r.o.prefix, name)
	switch {
	case err == nil:
		err = r.readDefined(ctx, p, &b)
	case errors.Is(err, pacer.ErrInvalid):
		// No definition stored, or one no process can use: the latter is
		// said. Either way the state is shown as it reads without one.
		if defined, derr := r.defined(ctx, name); derr != nil || defined {
			unusable = err
		}
		p, err = nil, r.readRaw(ctx, &b)
	}
	if err == nil && r.o.tenants > 0 && len(hashes) > 0 {
		b.Tenants, err = r.readTenants(ctx, p, &b, hashes)
	}
	if err == nil {
		b.Waiting, err = r.waiting(ctx, name)
	}
	if err = errors.Join(unusable, err); err != nil {
		b.Error = err.Error()
	}
	return b
}

// defined says whether a definition of budget name is stored: whether its
// definition key (wire.DefinitionSuffix) exists. pacer.Open's ErrInvalid
// means no definition when none is.
func (r reader) defined(ctx context.Context, name string) (bool, error) {
	n, err := r.rdb.Exists(ctx, wire.Keys(tag(r.o.prefix, name))[3]).Result()
	return n > 0, err
}

// readDefined reads a budget through its stored definition.
func (r reader) readDefined(ctx context.Context, p *pacer.Pacer, b *budget) error {
	b.Version = p.Config().Version
	s, err := p.Snapshot(ctx)
	if err != nil {
		return err
	}
	b.Time, b.InFlight, b.Concurrency = s.Time, s.InFlight, s.Concurrency
	b.PausedS, b.StoppedS, b.StoppedBy = s.Paused.Seconds(), s.Stopped.Seconds(), stopKind(s.StoppedBy)
	for _, rs := range s.Rates {
		b.Limits = append(b.Limits, levelOf("", rs))
	}
	return nil
}

// levelOf returns a rate's level, named by the rate, after prefix.
func levelOf(prefix string, rs pacer.RateState) level {
	l := level{
		Name: prefix + rs.Rate.Name(), Unit: rs.Rate.Unit.String(), Limit: rs.Limit, Capacity: rs.Capacity,
		Level: rs.Level, PerSecond: rs.PerSecond, WindowS: rs.Rate.Window.Seconds(), Sliding: rs.Rate.Sliding,
	}
	switch {
	case rs.Level >= float64(rs.Capacity):
	case rs.Rate.Sliding:
		l.FullInS = l.WindowS
	case rs.PerSecond > 0:
		l.FullInS = (float64(rs.Capacity) - rs.Level) / rs.PerSecond
	}
	return l
}

// waiting counts the callers queued for a slot, the sentinel member left
// out (see lua/prelude.lua).
func (r reader) waiting(ctx context.Context, name string) (int64, error) {
	n, err := r.rdb.ZCount(ctx, tag(r.o.prefix, name)+wire.QueueSuffix, "-inf", "(9000000000000000").Result()
	if err != nil {
		return 0, fmt.Errorf("counting the waiters of %q: %w", name, err)
	}
	return n, nil
}

// stopKind names a stop as the JSON's stopped_by says it (the stop's kind,
// as lua/stop.lua writes it): "quota", "stop", or "" for none.
func stopKind(by error) string {
	switch {
	case errors.Is(by, pacer.ErrQuotaExhausted):
		return "quota"
	case by != nil:
		return "stop"
	}
	return ""
}
