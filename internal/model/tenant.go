package model

import (
	"math"
	"slices"
	"strconv"
)

// Tenants (see docs/lua-contract.md, "Tenants"). A call charged to a
// tenant names the tenant's hash (KEYS[5]), and its charges go on after
// the budget's: fields marked '@' are the tenant's own rates, kept in its
// hash exactly as the budget's are in the state hash (a TAT and a
// give-back stack, or a sliding window's counts, "@~<g>:<name>"); fields
// marked '%' are its share of a budget bucket, a TAT without a stack. A
// tenant's hash is a hash of the same kind as the state hash, so one copy
// of every bucket's computation serves both: the model keeps it as one
// more hash, with its own qb and xp.

// Marks of a tenant's fields.
const (
	own   = '@' // one of the tenant's own rates
	share = '%' // the tenant's share of a budget bucket
)

// tenantField reports whether field lives in a tenant's hash.
func tenantField(field string) bool {
	return field != "" && (field[0] == own || field[0] == share)
}

// isShare reports whether field is a tenant's share of a budget bucket.
func isShare(field string) bool { return field != "" && field[0] == share }

// shared returns a share's TAT after a charge (or a debt) of d µs from
// tat: at most twice its allowance past now (us), so that a tenant is
// over its share for at most about a window after its heavy use ends, as
// prelude.lua's shared does for acquire and settle.
func shared(tat, d, us, allow int64) int64 { return min(tat+d, us+2*allow) }

// tenant returns tenant key's hash, made if missing.
func (b *Budget) tenant(key string) *hash {
	if b.tenants == nil {
		b.tenants = map[string]*hash{}
	}
	t := b.tenants[key]
	if t == nil {
		t = &hash{}
		b.tenants[key] = t
	}
	return t
}

// at returns the hash that field lives in, for a call naming tenant key
// ("": none).
func (b *Budget) at(key, field string) *hash {
	if key != "" && tenantField(field) {
		return b.tenant(key)
	}
	return &b.hash
}

// tidle is prelude.lua's TIDLE: the least slack of a tenant's hash, in ms.
const tidle = 60_000

// tcover is prelude.lua's tcover on hash t at now (ms): the hash is kept
// until ms plus a second, with a quarter of slack but at least tidle; xp
// records it, and only grows. ms is a float where the script's is (a TAT
// in µs over 1000).
func (t *hash) tcover(now int64, ms float64) {
	need := int64(math.Ceil(ms)) + 1000
	if need > t.xp {
		t.xp = need + max(int64(math.Ceil(float64(need-now)/4)), tidle)
	}
}

// Tenant returns tenant key's hash as Redis holds it: every field and its
// value, a give-back stack as its bytes; nil for a hash never written.
func (b *Budget) Tenant(key string) map[string]string {
	t := b.tenants[key]
	if t == nil {
		return nil
	}
	m := t.fields()
	if t.xp != 0 {
		m["xp"] = strconv.FormatInt(t.xp, 10)
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// fields returns the hash's buckets, windows and qb as stored.
func (t *hash) fields() map[string]string {
	m := map[string]string{}
	for f, g := range t.buckets {
		if g.stored {
			m[f] = strconv.FormatInt(g.tat, 10)
		}
		if len(g.stack) > 0 {
			m[f+".h"] = encodeStack(g.stack)
		}
	}
	for f, w := range t.windows {
		m[f] = w.String()
	}
	if t.qb != 0 {
		m["qb"] = strconv.FormatInt(t.qb, 10)
	}
	return m
}

// encodeStack returns a give-back stack as prelude.lua stores it: 14 bytes
// an entry, its time and headroom each a 7-byte big-endian integer.
func encodeStack(s []hentry) string {
	out := make([]byte, 0, 14*len(s))
	for _, e := range s {
		for _, v := range [2]int64{e.t, e.d} {
			for k := 6; k >= 0; k-- {
				out = append(out, byte(v>>(8*k)))
			}
		}
	}
	return string(out)
}

// definition is the definition key (KEYS[4]): its version (0: none
// stored) and the definition as its writer encoded it.
type definition struct {
	v   int64
	def string
}

// stored returns the stored version as acquire.lua reads it: "0" if none.
func (d definition) stored() string { return strconv.FormatInt(d.v, 10) }

// Define mirrors define.lua: version 0 reads the stored definition, -1
// stores def as the version after the stored one (define.lua's "next"),
// any other stores def as that version if it is newer than the stored one.
// A definition stored sets the state hash's copy of its version (dv) if
// the state hash exists. It returns 1 when def was stored, else 0, and
// the definition in force: its version (0: none) and text.
func (b *Budget) Define(version int64, def string) (stored int, v int64, text string) {
	v = version
	if version == -1 {
		v = b.def.v + 1
	}
	if v == 0 || b.def.v != 0 && b.def.v >= v {
		return 0, b.def.v, b.def.def
	}
	b.def = definition{v, def}
	if b.written {
		b.dv = b.def.stored()
	}
	return 1, v, def
}

// Version returns the state hash's copy of the definition's version, ""
// if it has none.
func (b *Budget) Version() string { return b.dv }

// Tenanted returns the configuration of a call charged to a tenant: the
// budget's rates, then the tenant's own (marked '@'), then with a Share
// its share of each budget rate (marked '%'), built as package pacer's
// Config.tenantBuckets builds them: Share of the rate's capacity and
// refill, at least one unit each (a sliding rate's refill is its limit a
// window), its room reaching Share of the refill (the limit).
func (c Config) Tenanted() Config {
	t := c
	t.Rates = slices.Clone(c.Rates)
	for _, r := range c.Tenant {
		r.Mark = own
		t.Rates = append(t.Rates, r)
	}
	if c.Share == 0 {
		return t
	}
	for _, r := range c.Rates {
		refill := r.Refill
		if r.Sliding {
			refill = r.Cap
		}
		r.Mark = share
		r.Cap = max(1, int64(float64(r.Cap)*c.Share))
		r.Refill = max(1, int64(float64(refill)*c.Share))
		r.Room = r.Refill // Share of the limit: what a window refills
		t.Rates = append(t.Rates, r)
	}
	return t
}

// Definition returns the definition key's version (0: none) and text.
func (b *Budget) Definition() (int64, string) { return b.def.v, b.def.def }

// Buckets returns the bucket fields of the state hash (key "") or of
// tenant key's hash as stored, a give-back stack as its bytes: every field
// a charge writes, without qb and xp.
func (b *Budget) Buckets(key string) map[string]string {
	h := &b.hash
	if key != "" {
		if h = b.tenants[key]; h == nil {
			return map[string]string{}
		}
	}
	m := h.fields()
	delete(m, "qb")
	return m
}
