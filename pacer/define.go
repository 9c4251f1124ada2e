package pacer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// definition is what a budget's stored definition holds: the fields of
// Config that shape the budget, the same for every process. Name and
// KeyPrefix say which budget; Observe, Shadow and MaxWait stay each
// process's own.
//
// Burst and SlidingWindow are what versions before issue 24 stored beside
// Limits: they are read (see decodeDefinition) and written zero, so that
// the JSON of a definition stays what those versions write and read.
type definition struct {
	Limits        Limits             `json:"limits"`
	Burst         storedBurst        `json:"burst"`
	Rates         []Rate             `json:"rates,omitempty"`
	Tenants       Tenants            `json:"tenants"`
	Weights       map[string]float64 `json:"weights,omitempty"`
	Prices        map[string]Price   `json:"prices,omitempty"`
	SlidingWindow bool               `json:"sliding_window,omitempty"`
	Headroom      float64            `json:"headroom,omitempty"`
	NoRefund      bool               `json:"no_refund,omitempty"`
	BatchFloor    float64            `json:"batch_floor,omitempty"`
	LeaseTTL      time.Duration      `json:"lease_ttl,omitempty"`
}

// storedBurst is the old Config.Burst as a definition stores it: a lower
// capacity for each of Limits' four rates (0: the limit).
type storedBurst struct {
	RPM, TPM, RPD, TPD int64
}

func (c Config) definition() definition {
	return definition{
		Limits: c.Limits, Rates: c.Rates, Tenants: c.Tenants, Weights: c.Weights, Prices: c.Prices,
		Headroom: c.Headroom, NoRefund: c.NoRefund, BatchFloor: c.BatchFloor, LeaseTTL: c.LeaseTTL,
	}
}

// with returns c with d's fields in place of its own.
func (c Config) with(d definition, version int64) Config {
	c.Limits, c.Rates, c.Tenants, c.Weights, c.Prices = d.Limits, d.Rates, d.Tenants, d.Weights, d.Prices
	c.Headroom, c.NoRefund, c.BatchFloor, c.LeaseTTL = d.Headroom, d.NoRefund, d.BatchFloor, d.LeaseTTL
	c.Version = version
	return c
}

// decodeDefinition reads a stored definition, in today's terms. A burst
// an older version stored for one of Limits' rates becomes a Rate with
// that Burst, the same bucket (the same field, capacity and refill), so
// the budget runs as before. The old approximate sliding window
// (sliding_window: each bucket refilled at limit - burst) has no Rate
// that states it exactly, so such a definition is refused, saying what
// to store instead.
func decodeDefinition(def []byte) (definition, error) {
	var d definition
	if err := json.Unmarshal(def, &d); err != nil {
		return d, err
	}
	if d.SlidingWindow {
		return d, errors.New("it sets sliding_window, which this version no longer runs; Define it again with Rate.Sliding on its rates (a true sliding window), or as Rates with a Burst of half the limit")
	}
	for _, f := range []struct {
		name   string
		limit  *int64
		burst  int64
		unit   Unit
		window time.Duration
	}{{"RPM", &d.Limits.RPM, d.Burst.RPM, Requests, time.Minute}, {"TPM", &d.Limits.TPM, d.Burst.TPM, Tokens, time.Minute},
		{"RPD", &d.Limits.RPD, d.Burst.RPD, Requests, 24 * time.Hour}, {"TPD", &d.Limits.TPD, d.Burst.TPD, Tokens, 24 * time.Hour}} {
		if f.burst == 0 {
			continue
		}
		if *f.limit == 0 {
			return d, fmt.Errorf("its burst.%s = %d has no limit", f.name, f.burst)
		}
		d.Rates = append(d.Rates, Rate{Unit: f.unit, Limit: *f.limit, Window: f.window, Burst: f.burst})
		*f.limit = 0
	}
	d.Burst = storedBurst{}
	return d, nil
}

// Define stores cfg's definition of the budget in Redis, where every
// process of the budget follows it from its next call (each is told by a
// Redefined event): a runtime change of limits, rates, tenants or prices is
// this one call. The definition is cfg's Limits, Rates, Tenants,
// Weights, Prices, Headroom, NoRefund, BatchFloor and LeaseTTL; cfg's Name and KeyPrefix must be the budget's or empty, and its
// other fields are ignored.
//
// With cfg.Version 0, the definition is stored as the next version after
// the one stored; with a positive cfg.Version, only if it is higher than
// the stored one, else Define returns ErrSuperseded. It returns the
// version stored. An invalid definition is refused (ErrInvalid) before
// anything is stored.
//
// Changing a rate does not reset its bucket: the bucket keeps the time it
// needs to fill again, so a bucket 40% used stays 40% used of its new
// capacity and refills at the new rate. A sliding window keeps its counts.
func (p *Pacer) Define(ctx context.Context, cfg Config) (int64, error) {
	if cfg.Name != "" && cfg.Name != p.local.Name || cfg.KeyPrefix != "" && cfg.KeyPrefix != p.local.KeyPrefix {
		return 0, invalidf("Define: cfg names budget %q (prefix %q), not this Pacer's %q: leave Name and KeyPrefix empty or the same", cfg.Name, cfg.KeyPrefix, p.local.Name)
	}
	next := p.local.with(cfg.definition(), cfg.Version)
	s, err := next.settings()
	if err != nil {
		return 0, err
	}
	body, err := json.Marshal(next.definition())
	if err != nil {
		return 0, fmt.Errorf("pacer: encoding the definition of %q: %w", p.local.Name, err)
	}
	version := any(cfg.Version)
	if cfg.Version == 0 {
		version = "next"
	}
	p.defining.Lock()
	defer p.defining.Unlock()
	stored, v, _, err := p.define(ctx, version, body)
	if err != nil {
		return 0, err
	}
	if !stored {
		return v, fmt.Errorf("%w: version %d is stored, %d was asked", ErrSuperseded, v, cfg.Version)
	}
	s.version = v
	p.adopt(&s)
	p.emit(Event{Kind: Redefined, Version: v})
	return v, nil
}

// define runs define.lua: it stores body as version (an integer, or
// "next"), or with version 0 only reads. It returns whether it stored,
// and the version and definition stored after it.
func (p *Pacer) define(ctx context.Context, version any, body []byte) (bool, int64, []byte, error) {
	v, err := p.call(ctx, lua.Define, []any{version, string(body)}, nil)
	if err != nil {
		return false, 0, nil, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		return false, 0, nil, fmt.Errorf("pacer: define on %q: %w: %v", p.local.Name, wire.ErrReply, v)
	}
	stored, ok1 := a[0].(int64)
	ver, ok2 := a[1].(int64)
	def, ok3 := a[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return false, 0, nil, fmt.Errorf("pacer: define on %q: %w: %v", p.local.Name, wire.ErrReply, v)
	}
	return stored == 1, ver, []byte(def), nil
}

// settleDefinition makes sure the Pacer runs the definition in force
// before its first call: it stores its Config's, if it has a version and
// none newer is stored, or follows the one stored.
func (p *Pacer) settleDefinition(ctx context.Context) error {
	if p.defined.Load() {
		return nil
	}
	p.defining.Lock()
	defer p.defining.Unlock()
	if p.defined.Load() {
		return nil
	}
	if p.local.Version > 0 {
		body, err := json.Marshal(p.local.definition())
		if err != nil {
			return fmt.Errorf("pacer: encoding the definition of %q: %w", p.local.Name, err)
		}
		stored, v, def, err := p.define(ctx, p.local.Version, body)
		if err != nil {
			return err
		}
		if stored || v == p.local.Version {
			s := *p.s()
			s.version = v
			p.adopt(&s)
		} else if err := p.follow(v, def); err != nil {
			return err
		}
	}
	p.defined.Store(true)
	return nil
}

// reload follows the definition stored, which acquire.lua said differs
// from the one this Pacer runs.
func (p *Pacer) reload(ctx context.Context) error {
	p.defining.Lock()
	defer p.defining.Unlock()
	_, v, def, err := p.define(ctx, 0, nil)
	if err != nil {
		return err
	}
	if v == p.s().version {
		return nil // another goroutine followed it already
	}
	if v == 0 {
		// The definition was deleted: back to this process's own.
		s, err := p.local.with(p.local.definition(), 0).settings()
		if err != nil {
			return err
		}
		p.adopt(&s)
		p.emit(Event{Kind: Redefined, Version: 0})
		return nil
	}
	return p.follow(v, def)
}

// follow makes the stored definition def, of version v, the one in force.
func (p *Pacer) follow(v int64, def []byte) error {
	d, err := decodeDefinition(def)
	var s settings
	if err == nil {
		s, err = p.local.with(d, v).settings()
	}
	if err != nil {
		err = fmt.Errorf("%w: the definition of %q stored in Redis (version %d) cannot be used: %v; store a valid one with Define", ErrInvalid, p.local.Name, v, err)
		p.emit(Event{Kind: Redefined, Version: v, Err: err})
		return err
	}
	s.version = v
	p.adopt(&s)
	p.emit(Event{Kind: Redefined, Version: v})
	return nil
}
