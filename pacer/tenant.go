package pacer

import (
	"context"
	"fmt"
	"math"
	"strings"

	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// Tenants divides a budget among its tenants: customers, API keys, or
// operations (embeddings apart from chat). A call names its tenant in
// Request.Tenant, and one script checks and charges the tenant's limits
// with the budget's, all or nothing: the budget empty holds the call back
// even when its tenant has room, and the tenant empty holds it back even
// when the budget has room.
//
// Each tenant's state is its own Redis hash, in the budget's hash tag, that
// expires when the tenant is idle: a call touches only its own tenant's
// key, so a hundred thousand tenants cost per call what one does. The key
// names the tenant by the first 32 hex digits of its id's SHA-256, so no
// id (braces, newlines, 10 kB of lookalike Unicode) can reach another
// tenant's key, the budget's keys, or another Redis Cluster slot.
type Tenants struct {
	// Rates are every tenant's own limits, the same for each tenant (at
	// most 16): for example 200,000 tokens an hour, or a daily Spend cap.
	// A rate here is checked and charged exactly as one of Config.Rates
	// is, and Headroom applies to it alike. A tenant has
	// no concurrency limit of its own.
	Rates []Rate

	// Share is the fraction of each of the budget's rates that a tenant
	// may use before it yields, from 0 (none: tenants have only their
	// Rates) to 1. Each tenant keeps a soft bucket per budget rate,
	// sized from the rate's burst, not its limit: it holds Share of the
	// burst (of the limit for a sliding rate, whose burst that is), with
	// room for 8 of the call at hand but never more than Share of the
	// limit, and refills at Share of the rate. A tenant new to the budget
	// is therefore within its share for its part of what the budget gives
	// at once (or 8 calls), not for Share of a whole window's calls: that
	// is all it can reserve ahead of the others in its first seconds. The
	// 8 calls keep a light tenant whose calls arrive at random, close
	// together now and then, within it. With the burst at the limit (the
	// default) a share holds Share of the limit.
	//
	// A call that finds its tenant's share spent is over its share, and
	// is served the way a batch call is: it never reserves a later turn
	// of the budget, and waits spaced along its tenant's own queue. It
	// leaves tenants within their share room in each budget bucket for 8
	// calls of its size, up to half the bucket and at least BatchFloor of
	// it (never more than lets the call fit): the room their own random
	// arrivals take at once. A heavy tenant then fills whatever room the
	// others leave, and the budget stays used, but it never queues ahead
	// of a tenant within its share.
	//
	// With n tenants of equal standing, 1/n is each one's fair share; a
	// larger Share lets a tenant burst alone before it yields.
	Share float64
}

// set reports whether t sets anything: a budget with tenants.
func (t Tenants) set() bool { return len(t.Rates) > 0 || t.Share != 0 }

// validate checks the tenants' configuration.
func (t Tenants) validate() error {
	if math.IsNaN(t.Share) || t.Share < 0 || t.Share > 1 {
		return invalidf("Config.Tenants.Share = %v: must be a fraction from 0 (no share) to 1, e.g. 0.1 for ten tenants of equal standing", t.Share)
	}
	if len(t.Rates) > maxRates {
		return invalidf("Config.Tenants.Rates has %d rates: at most %d, so that one script call stays bounded", len(t.Rates), maxRates)
	}
	seen := map[string]int{}
	for i, r := range t.Rates {
		if err := r.checkAt(fmt.Sprintf("Config.Tenants.Rates[%d]", i)); err != nil {
			return err
		}
		if j, dup := seen[r.Name()]; dup {
			return invalidf("Config.Tenants.Rates[%d] and [%d] are both %s: state each rate once", j, i, r.Name())
		}
		seen[r.Name()] = i
	}
	return nil
}

// tenantBuckets returns every tenant's buckets, as each tenant's hash holds
// them: its own rates (fields "@<name>"), then its share of each of the
// budget's buckets (fields "%<name>").
func (c Config) tenantBuckets(budget []bucket) ([]bucket, error) {
	var out []bucket
	for i, r := range c.Tenants.Rates {
		sp := bucketSpec{fmt.Sprintf("Tenants.Rates[%d]", i), r.Name(), r.Limit, r.Burst, r.Window, r.Unit, r}
		b, err := c.newBucket(sp)
		if err != nil {
			return nil, err
		}
		if r.Unit == Spend && len(c.Prices) == 0 {
			return nil, invalidf("Config.Tenants.Rates[%d] is a Spend rate but Config.Prices is empty: give the models' prices per million tokens", i)
		}
		b.wb.Field = "@" + b.wb.Field
		b.field = b.wb.Field
		out = append(out, b)
	}
	if c.Tenants.Share == 0 {
		return out, nil
	}
	for _, pb := range budget {
		name := pb.field
		if pb.wb.Sub > 0 {
			name = name[strings.IndexByte(name, ':')+1:]
		}
		// The share refills at Share of the budget's refill and holds
		// Share of its burst, with room for wire.ShareCalls calls up to
		// Share of its limit (see Tenants.Share). Held to Share of the
		// limit, a heavy newcomer was within it for a window's share of
		// calls, reserving turns ahead of everyone up to its wait bound
		// (RPM 600, burst 10, Share 0.2: 120 calls, 15 s of 429s for
		// light tenants). Never less than one unit.
		wb := wire.ShareBucket(name, int64(pb.capacity), pb.limit, pb.window, pb.wb.Unit, c.Tenants.Share)
		out = append(out, bucket{name: "share of " + pb.name, field: wb.Field, limit: wb.Capacity, stated: wb.Capacity,
			capacity: float64(wb.Capacity), wb: wb, perMs: float64(wb.Room) / float64(pb.window.Milliseconds()), window: pb.window, unit: pb.unit})
	}
	return out, nil
}

// maxTenantLen bounds a tenant id: it is hashed, never stored, but a caller
// passing megabytes by mistake should hear of it.
const maxTenantLen = 64 << 10

// tenantKey returns the key of tenant id's hash: in the budget's hash tag,
// named by a digest of the id, so that no id can name another key.
func (p *Pacer) tenantKey(id string) string {
	return wire.TenantKey(p.tag, wire.TenantHash(id))
}

// TenantSnapshot reads tenant's state in the budget without changing it:
// a Snapshot with Tenant set, Rates the tenant's own rates
// (Config.Tenants.Rates) and Shares its shares of the budget's rates; the
// fields of the budget as a whole are left zero (see Snapshot). A tenant
// never seen, or idle long enough for its state to expire, reads full.
func (p *Pacer) TenantSnapshot(ctx context.Context, tenant string) (Snapshot, error) {
	if len(tenant) > maxTenantLen {
		return Snapshot{}, invalidf("TenantSnapshot: the tenant id is %d bytes long: use at most %d", len(tenant), maxTenantLen)
	}
	return p.tenantSnapshot(ctx, p.tenantKey(tenant), tenant)
}

// tenantSnapshot reads the tenant whose hash is key, named tenant.
func (p *Pacer) tenantSnapshot(ctx context.Context, key, tenant string) (Snapshot, error) {
	if p.s().withTenant == nil {
		return Snapshot{}, invalidf("TenantSnapshot: Config.Tenants is empty: the budget has no tenants")
	}
	fields := make([]any, len(p.s().tenants))
	for i, b := range p.s().tenants {
		fields[i] = b.field
	}
	keys := []string{key, p.keys[1], p.keys[2]}
	v, err := p.callKeys(ctx, keys, lua.Snapshot, fields, nil)
	if err != nil {
		return Snapshot{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3+len(fields) {
		return Snapshot{}, fmt.Errorf("pacer: tenant snapshot of %q: %w: %v", p.s().name, wire.ErrReply, v)
	}
	now, ok := a[0].(int64)
	if !ok {
		return Snapshot{}, fmt.Errorf("pacer: tenant snapshot of %q: %w: %v", p.s().name, wire.ErrReply, v)
	}
	s := Snapshot{Name: p.s().name, Tenant: tenant, Time: time.UnixMicro(now)}
	budget := p.s().configured()
	for i, b := range p.s().tenants {
		str, _ := a[3+i].(string)
		st, err := b.state(now, str)
		if err != nil {
			return Snapshot{}, fmt.Errorf("pacer: tenant snapshot of %q: %w", p.s().name, err)
		}
		if i < len(p.s().tenantRates) {
			st.Rate = p.s().tenantRates[i]
			s.Rates = append(s.Rates, st)
			continue
		}
		pb := budget[i-len(p.s().tenantRates)]
		st.Rate = Rate{Unit: pb.unit, Limit: b.limit, Window: pb.window}
		s.Shares = append(s.Shares, st)
	}
	return s, nil
}
