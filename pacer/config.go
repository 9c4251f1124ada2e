package pacer

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Limits are a provider's limits for one API key or deployment, as the
// provider states them. A zero field means the provider has no such limit;
// at least one field must be set.
type Limits struct {
	RPM         int64 // requests per minute
	TPM         int64 // tokens per minute (prompt + completion)
	RPD         int64 // requests per day
	TPD         int64 // tokens per day
	Concurrency int64 // calls in flight at once
}

// Config describes one shared budget. The zero value of every field but Name
// and Limits (or Rates) has a sane default, given on the field.
type Config struct {
	// Name identifies the budget: every Pacer, in any process, created with
	// the same Name (and KeyPrefix) against the same Redis shares one budget.
	// A good name says whose limits these are: "openai:gpt-4o-mini",
	// "azure:eastus:chat-prod". 1 to 200 printable bytes, without '{' or '}'
	// (they would break the Redis Cluster hash tag).
	Name string

	// Limits are the provider's limits. At least one of them, or a Rate,
	// must be set.
	Limits Limits

	// Weights are per-model multipliers on token rates: a call whose
	// Request.Model is m is charged its tokens times Weights[m] on every
	// rate of tokens, input or output tokens, so that one budget shared by
	// several models counts a large model's tokens for more. Models not
	// listed weigh 1. Each weight is above 0 and at most 1000. A
	// provider's headers count raw tokens: Sync reads them as they are,
	// so weigh the models of a budget that follows headers with care.
	Weights map[string]float64

	// Prices are the models' prices, for Spend rates: Request.Model picks
	// one; the entry "" is the price of a model not listed. A budget with
	// a Spend rate refuses (ErrInvalid) a call whose model has no price.
	Prices map[string]Price

	// Rates are limits over any window, and of input or output tokens
	// apart, beside Limits: 200,000 tokens an hour, 10 requests a second,
	// Anthropic's input and output tokens per minute. A rate of requests
	// or tokens per minute or per day is the same bucket as Limits' field
	// for it: set it in one place only, here when it needs a Rate.Burst
	// below its limit or a sliding window (Rate.Sliding). At most 16
	// rates.
	Rates []Rate

	// Version is the version of this Config's definition of the budget:
	// its Limits, Rates, Tenants, Weights, Prices, Headroom, NoRefund,
	// BatchFloor and LeaseTTL. A positive version is
	// stored in Redis at the Pacer's first call if no newer one is
	// stored; every process of the budget then follows the newest, so a
	// rolling deploy that raises the version moves the whole fleet at
	// once, and an older process runs the newer definition rather than
	// its own. 0 (the default) stores nothing and follows a definition
	// stored by another process or by Define. See Pacer.Define.
	Version int64

	// Tenants gives the budget's tenants (named by Request.Tenant) their
	// own limits and a fair share of the budget's: see Tenants. The zero
	// value has no tenants.
	Tenants Tenants

	// Headroom is the fraction of every rate limit (not Concurrency) kept
	// unused, for estimation error and callers outside the pacer: 0.1 runs at
	// 90% of each limit, and of each Rate.Burst. Default 0: the limits are used as
	// given.
	Headroom float64

	// NoRefund says the provider charges a call's reservation (prompt plus
	// max_tokens) when the call arrives and never gives the unused part
	// back. Settle then charges overruns only, so the budget never runs
	// ahead of the provider's count. Leave it false for providers that
	// correct their count when a call ends (Anthropic's output-token limits,
	// Azure OpenAI's reservations); set it when 429s follow refunds.
	NoRefund bool

	// BatchFloor is the fraction of every bucket (and of the concurrency
	// slots) that Batch calls may not take, so that Interactive calls find
	// room while a batch job saturates the budget. Default 0.2; a negative
	// value means no floor.
	BatchFloor float64

	// LeaseTTL is how long an unsettled lease holds its concurrency slot: a
	// crashed worker's slot comes back after it. Set it above your longest
	// call, or keep long calls alive (Lease.KeepAlive). Default 10 minutes.
	LeaseTTL time.Duration

	// QuotaProbe is how often a budget stopped for an exhausted provider
	// quota (Lease.Fail) lets one call through, in whichever process asks
	// first, to see whether the provider serves again. Between 1ms and 7
	// days; default (0) a minute. Each stop carries the interval of the
	// process that set it to Redis, where every process follows it, so it
	// is not part of a stored definition (Define).
	QuotaProbe time.Duration

	// MaxWait is the default bound on Acquire's wait; Request.MaxWait and the
	// context's deadline may shorten it. Default 1 minute.
	MaxWait time.Duration

	// KeyPrefix starts every Redis key of the budget. Default "llmpacer".
	// Same rules as Name.
	KeyPrefix string

	// HashTag, if set, is the Redis Cluster hash tag of the budget's keys,
	// in place of "<KeyPrefix>:<Name>": the keys become
	// "{<HashTag>}<KeyPrefix>:<Name>:s" and so on. Budgets with one
	// HashTag live in one hash slot, so one script can touch them all:
	// give the deployments of a Group one, and it routes each call in one
	// round trip on a Cluster too (see NewGroup). They then also live on
	// one node. Empty (the default): each budget its own slot, keys
	// "{<KeyPrefix>:<Name>}:s". Same rules as Name. Every process of a
	// budget must use the same HashTag: another one is another budget.
	HashTag string

	// Shadow makes the budget observe without ever holding a call, to
	// adopt it safely: Acquire and TryAcquire never wait and never fail
	// for want of room, nor for Redis. A call the budget has room for now
	// is admitted and charged as usual; a call it would make wait, refuse
	// or could not ask Redis about gets a Denied event that says how long
	// and why, and a lease the budget does not count (LeaseInfo.Shadow), so
	// it runs at once. Watch the Denied events (a call that would have
	// waited is one wrapping ErrWaitTimeout with a Bound of 0, which
	// SlogObserver logs at Debug; pacerprom counts them all), then turn
	// Shadow off.
	Shadow bool

	// Outage says which limits fail open while Redis is unreachable, and
	// what share of them this process may use then. The zero value fails
	// closed: no call is admitted until Redis answers. See Outage.
	Outage Outage

	// Observe, if set, is called for every admission, denial, wait and end
	// of a lease, synchronously: keep it fast (count, log, export metrics).
	Observe func(Event)
}

// Defaults used when a Config field is zero.
const (
	defaultBatchFloor = 0.2
	defaultLeaseTTL   = 10 * time.Minute
	defaultMaxWait    = time.Minute
	defaultKeyPrefix  = wire.DefaultPrefix
)

// Upper bounds on inputs, past which a value is surely a mistake (a unit
// error, an overflow) and is rejected rather than silently used.
const (
	maxLimit   = 1 << 50 // any limit or burst
	maxTokens  = 1 << 50 // one call's tokens, reserved or used
	maxNameLen = 200
	maxRates   = 16                 // Config.Rates
	maxDur     = 7 * 24 * time.Hour // TTLs, waits, pauses
	maxSpan    = 1 << 50            // µs a full bucket may take to refill (35 years)
	// maxInputMargin bounds Price.InputMargin: 1,000% of the estimate.
	maxInputMargin = 10
)

// bucket is one rate limit as the scripts see it.
type bucket struct {
	name     string        // RPM, TPM, RPD, TPD
	field    string        // its state hash field: rpm, tpm, rpd, tpd
	limit    int64         // per window, after headroom
	stated   int64         // per window, as configured
	capacity float64       // burst
	wb       wire.Bucket   // as the scripts see it
	perMs    float64       // refill per millisecond
	window   time.Duration // the limit's window
	unit     Unit
}

// settings is a validated Config with defaults applied.
type settings struct {
	name, prefix string
	limits       Limits
	buckets      [4]bucket // rpm, tpm, rpd, tpd; limit 0 = not set
	rates        []bucket  // the other Config.Rates, in order
	rateOf       []Rate    // the Rate each of rates comes from
	fourRate     [4]Rate   // the Rate each of buckets says
	cfg          Config    // the Config these settings come from
	weights      map[string]float64
	prices       map[string]wire.Price
	spend        bool // a Spend rate is configured
	shadow       bool
	batchFloor   float64
	noRefund     bool
	leaseTTL     time.Duration
	maxWait      time.Duration
	quotaProbe   time.Duration
	observe      func(Event)
	keep         float64 // the batch floor, or 0 with no floor
	// tenants are every tenant's buckets (see Config.tenantBuckets), and
	// withTenant the budget's wire buckets followed by theirs.
	tenants     []bucket
	withTenant  []wire.Bucket
	budget      *leaseBudget // what leases admitted under this definition end against
	version     int64        // the stored definition's version; 0: none
	share       float64      // Config.Tenants.Share
	tenantRates []Rate       // Config.Tenants.Rates
	fields      []any        // the configured buckets' fields, boxed once
	wireBuckets []wire.Bucket
	outage      outageSettings
}

// configured returns the buckets the budget has, in the scripts' order:
// the four Limits states, then the other rates.
func (s settings) configured() []bucket {
	var out []bucket
	for _, b := range s.buckets {
		if b.limit != 0 {
			out = append(out, b)
		}
	}
	return append(out, s.rates...)
}

// settings validates c and returns it with defaults applied.
func (c Config) settings() (settings, error) {
	if err := c.validate(); err != nil {
		return settings{}, err
	}
	s := settings{
		name: c.Name, prefix: cmp.Or(c.KeyPrefix, defaultKeyPrefix), limits: c.Limits,
		batchFloor: c.BatchFloor, noRefund: c.NoRefund, observe: c.Observe,
		leaseTTL: cmp.Or(c.LeaseTTL, defaultLeaseTTL), maxWait: cmp.Or(c.MaxWait, defaultMaxWait),
		quotaProbe: cmp.Or(c.QuotaProbe, defaultQuotaProbe), cfg: c,
	}
	switch {
	case s.batchFloor == 0:
		s.batchFloor = defaultBatchFloor
	case s.batchFloor < 0:
		s.batchFloor = 0
	}
	s.keep = s.batchFloor
	s.weights = maps.Clone(c.Weights)
	for m, pr := range c.Prices {
		if s.prices == nil {
			s.prices = map[string]wire.Price{}
		}
		s.prices[m] = wire.Price(pr) // InputMargin as set: price resolves it per call
	}
	// A tenant's Spend rate prices calls too, with none on the budget.
	for _, r := range append(slices.Clip(c.Rates), c.Tenants.Rates...) {
		s.spend = s.spend || r.Unit == Spend
	}
	s.shadow = c.Shadow
	four, more, err := c.bucketSpecs()
	if err != nil {
		return settings{}, err
	}
	for i, sp := range four {
		if sp.limit == 0 {
			continue
		}
		b, err := c.newBucket(sp)
		if err != nil {
			return settings{}, err
		}
		s.buckets[i] = b
		s.fourRate[i] = sp.rate
		if sp.rate == (Rate{}) {
			s.fourRate[i] = Rate{Unit: sp.unit, Limit: sp.limit, Window: sp.window, Burst: sp.burst}
		}
		s.fields = append(s.fields, b.field)
		s.wireBuckets = append(s.wireBuckets, b.wb)
	}
	for _, sp := range more {
		b, err := c.newBucket(sp)
		if err != nil {
			return settings{}, err
		}
		s.rates = append(s.rates, b)
		s.rateOf = append(s.rateOf, sp.rate)
		s.fields = append(s.fields, b.field)
		s.wireBuckets = append(s.wireBuckets, b.wb)
	}
	if c.Tenants.set() {
		if s.tenants, err = c.tenantBuckets(s.configured()); err != nil {
			return settings{}, err
		}
		s.share, s.tenantRates = c.Tenants.Share, c.Tenants.Rates
		s.withTenant = append([]wire.Bucket(nil), s.wireBuckets...)
		for _, b := range s.tenants {
			s.withTenant = append(s.withTenant, b.wb)
		}
	}
	if s.outage, err = c.outageSettings(s); err != nil {
		return settings{}, err
	}
	return s, nil
}

// validate checks every field of c on its own: names, ranges, fractions.
// What depends on several fields at once (a burst against its limit after
// Headroom) is checked by newBucket.
func (c Config) validate() error {
	if err := checkName("Name", c.Name); err != nil {
		return err
	}
	if err := checkName("KeyPrefix", cmp.Or(c.KeyPrefix, defaultKeyPrefix)); err != nil {
		return err
	}
	if c.HashTag != "" {
		if err := checkName("HashTag", c.HashTag); err != nil {
			return err
		}
	}
	l := c.Limits
	if l == (Limits{}) && len(c.Rates) == 0 {
		return invalidf("Config.Limits: no limit is set; set at least one of RPM, TPM, RPD, TPD, Concurrency, or a Config.Rates entry")
	}
	if err := c.validateModels(); err != nil {
		return err
	}
	if c.Version < 0 {
		return invalidf("Config.Version = %d: must be 0 (follow what is stored) or positive", c.Version)
	}
	if err := c.Tenants.validate(); err != nil {
		return err
	}
	if err := c.validateRates(); err != nil {
		return err
	}
	for _, f := range []struct {
		n string
		v int64
	}{{"RPM", l.RPM}, {"TPM", l.TPM}, {"RPD", l.RPD}, {"TPD", l.TPD}, {"Concurrency", l.Concurrency}} {
		if f.v < 0 || f.v > maxLimit {
			return invalidf("Config.%s = %d: must be between 0 (no limit) and %d", f.n, f.v, int64(maxLimit))
		}
	}
	if math.IsNaN(c.Headroom) || c.Headroom < 0 || c.Headroom >= 1 {
		return invalidf("Config.Headroom = %v: must be a fraction in [0, 1), e.g. 0.1 to keep 10%% unused", c.Headroom)
	}
	if math.IsNaN(c.BatchFloor) || c.BatchFloor >= 1 {
		return invalidf("Config.BatchFloor = %v: must be below 1 (e.g. 0.2); a negative value disables the floor", c.BatchFloor)
	}
	if c.LeaseTTL != 0 && (c.LeaseTTL < time.Millisecond || c.LeaseTTL > maxDur) {
		return invalidf("Config.LeaseTTL = %v: must be between 1ms and %v", c.LeaseTTL, maxDur)
	}
	if c.QuotaProbe != 0 && (c.QuotaProbe < time.Millisecond || c.QuotaProbe > maxDur) {
		return invalidf("Config.QuotaProbe = %v: must be between 1ms and %v (0 for the default %v)", c.QuotaProbe, maxDur, defaultQuotaProbe)
	}
	if c.MaxWait < 0 || c.MaxWait > maxDur {
		return invalidf("Config.MaxWait = %v: must be between 0 (default %v) and %v", c.MaxWait, defaultMaxWait, maxDur)
	}
	_, _, err := c.bucketSpecs()
	return err
}

// validateModels checks the models' prices and weights.
func (c Config) validateModels() error {
	for m, pr := range c.Prices {
		for _, v := range []float64{pr.Input, pr.CachedInput, pr.Output} {
			if !(v >= 0 && v <= 1e12) {
				return invalidf("Config.Prices[%q] = %+v: prices are per million tokens, from 0 to 1e12", m, pr)
			}
		}
		if !(pr.InputMargin <= maxInputMargin) || math.IsInf(pr.InputMargin, -1) {
			return invalidf("Config.Prices[%q].InputMargin = %v: a share of the prompt's estimate, at most %v; 0 takes the model family's default, a negative value none", m, pr.InputMargin, float64(maxInputMargin))
		}
	}
	for m, w := range c.Weights {
		if !(w > 0 && w <= 1000) {
			return invalidf("Config.Weights[%q] = %v: a weight must be above 0 and at most 1000 (1 is the default)", m, w)
		}
	}
	return nil
}

// validateRates checks Config.Rates: each rate, and each stated once.
func (c Config) validateRates() error {
	if len(c.Rates) > maxRates {
		return invalidf("Config.Rates has %d rates: at most %d, so that one script call stays bounded", len(c.Rates), maxRates)
	}
	seen := map[string]int{}
	for i, r := range c.Rates {
		if err := r.check(i); err != nil {
			return err
		}
		if r.Unit == Spend && len(c.Prices) == 0 {
			return invalidf("Config.Rates[%d] is a Spend rate but Config.Prices is empty: give the models' prices per million tokens", i)
		}
		if j, dup := seen[r.Name()]; dup {
			return invalidf("Config.Rates[%d] and [%d] are both %s: state each rate once", j, i, r.Name())
		}
		seen[r.Name()] = i
	}
	return nil
}

// bucketSpec is one rate limit as Config states it.
type bucketSpec struct {
	name, field  string
	limit, burst int64
	window       time.Duration
	unit         Unit
	rate         Rate // the Config.Rates entry, if any
}

// limitName and burstName name the spec's limit and burst as Config
// states them, for errors.
func (sp bucketSpec) limitName() string {
	if strings.HasPrefix(sp.name, "Rates[") {
		return "Config." + sp.name + ".Limit"
	}
	return "Limits." + sp.name
}

// burstName names the field that sets sp's burst: a Rate's Burst, or for
// Limits' fields the limit itself.
func (sp bucketSpec) burstName() string {
	if sp.rate == (Rate{}) {
		return "Limits." + sp.name
	}
	return "Config." + sp.name + ".Burst"
}

// bucketSpecs returns the four buckets Limits states, in the scripts'
// order, with a Rate that names one of them in its place; and the other
// rates. A rate stated in both places is an error.
func (c Config) bucketSpecs() ([4]bucketSpec, []bucketSpec, error) {
	l := c.Limits
	four := [4]bucketSpec{
		{"RPM", "rpm", l.RPM, 0, time.Minute, Requests, Rate{}},
		{"TPM", "tpm", l.TPM, 0, time.Minute, Tokens, Rate{}},
		{"RPD", "rpd", l.RPD, 0, 24 * time.Hour, Requests, Rate{}},
		{"TPD", "tpd", l.TPD, 0, 24 * time.Hour, Tokens, Rate{}},
	}
	var more []bucketSpec
	for i, r := range c.Rates {
		sp := bucketSpec{fmt.Sprintf("Rates[%d]", i), r.Name(), r.Limit, r.Burst, r.Window, r.Unit, r}
		k := slices.IndexFunc(four[:], func(f bucketSpec) bool { return f.field == sp.field })
		if k < 0 || r.Sliding {
			more = append(more, sp)
			continue
		}
		if four[k].limit != 0 {
			return four, nil, invalidf("Config.Rates[%d] is %s, which Limits.%s already sets: state it in one place (in Rates to give it a Burst)", i, sp.field, four[k].name)
		}
		four[k] = sp
	}
	return four, more, nil
}

// newBucket builds the bucket sp describes, after Headroom.
func (c Config) newBucket(sp bucketSpec) (bucket, error) {
	limit := wire.Headroom(sp.limit, c.Headroom)
	if limit < 1 {
		return bucket{}, invalidf("%s = %d leaves nothing after Headroom %v: raise the limit or lower Headroom", sp.limitName(), sp.limit, c.Headroom)
	}
	if sp.rate.Sliding {
		// A strict sliding window: counted, not refilled (see
		// wire.NewSliding).
		wb := wire.RateBucket(sp.field, sp.limit, 0, sp.window, sp.unit.wire(), true, c.Headroom)
		return bucket{
			name: sp.name, field: wb.Field, limit: limit, stated: sp.limit, capacity: float64(limit),
			unit: sp.unit, wb: wb, perMs: float64(limit) / float64(sp.window.Milliseconds()), window: sp.window,
		}, nil
	}
	if burst := wire.Headroom(sp.burst, c.Headroom); burst > limit {
		return bucket{}, invalidf("%s = %d exceeds the limit %d (after Headroom): a burst can only lower capacity", sp.burstName(), burst, limit)
	}
	wb := wire.RateBucket(sp.field, sp.limit, sp.burst, sp.window, sp.unit.wire(), false, c.Headroom)
	burst, refill := wb.Capacity, limit
	b := bucket{
		name: sp.name, field: sp.field, limit: limit, stated: sp.limit, capacity: float64(burst),
		unit: sp.unit, wb: wb, perMs: float64(refill) / float64(sp.window.Milliseconds()), window: sp.window,
	}
	// Times stay exact integers in a Lua double: a TAT is now plus a few
	// spans, so a span must stay far below 2^53 µs.
	if span := float64(burst) * b.wb.Interval; span > maxSpan {
		return bucket{}, invalidf("%s = %d refills at %d per %v: a full bucket would take %.0f years to refill; raise the limit or lower the burst",
			sp.burstName(), burst, refill, sp.window, span/(365*24*3600e6))
	}
	return b, nil
}

// checkName rejects names that would break the key layout. Braces would
// change the Redis Cluster hash tag (and so could make two budgets share
// keys, or split one budget over slots); invisible characters, spaces and
// invalid UTF-8 make keys that cannot be typed into redis-cli, or that look
// like another budget's.
func checkName(field, v string) error {
	if v == "" {
		return invalidf("Config.%s is empty: name the budget, e.g. \"openai:gpt-4o-mini\"", field)
	}
	if len(v) > maxNameLen {
		return invalidf("Config.%s is %d bytes long: use at most %d", field, len(v), maxNameLen)
	}
	if !utf8.ValidString(v) {
		return invalidf("Config.%s %q is not valid UTF-8", field, v)
	}
	for i, r := range v {
		// unicode.IsPrint leaves out control characters (U+0085), line and
		// paragraph separators (U+2028) and format characters such as the
		// bidi overrides (U+202E), which make a key read as another.
		if r == ' ' || r == '{' || r == '}' || !unicode.IsPrint(r) {
			return invalidf("Config.%s %q: %U at byte %d is not allowed; use printable characters without spaces, '{' or '}'", field, v, r, i)
		}
	}
	return nil
}
