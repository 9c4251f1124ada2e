package lua_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/internal/wire"
)

// The scripts against internal/model, the differential way: one sequence of
// acquires, claims, leaves, settles, keepalives, pauses, stops, defines
// and clock steps goes to both, on budgets of up to four rates of any unit
// and window (buckets and sliding windows), with weights and prices, and
// up to three tenants with their own rates and shares; every
// reply, and after every step every rate's field as the snapshot script
// reports it (a TAT, a sliding window's counts), each bucket's give-back
// stack, the pause, qb, the stop and the definition's version, every
// member of the lease set and of the slot queue, every field of every
// tenant's hash (tenant_test.go) and the definition key, must agree byte
// for byte. So must the admissions the scripts publish for queued waiters, in order. The runner
// also checks the budget's promises on the model (promise_test.go,
// tenant_test.go).
//
// On miniredis the test sets the clock (Mini.SetTime). A real Redis has a
// real clock, but every reply carries the clock the script read, and the
// model is a pure function of it; so the real lane is exact too, driven by
// the replies' clocks. It runs the same steps on a time axis compressed
// 10,000 times (a 70 s step is a 7 ms sleep, a 60 s window 6 ms; a step back
// is skipped), so leases expire and buckets refill within the test. What this lane
// adds is Redis's own Lua 5.1 against gopher-lua. It relies on no key of
// the budget expiring mid-run, which takes a second of idleness (see
// package model).
func TestScriptsMatchModel(t *testing.T) {
	// Nine budgets, 100 random steps each (the same steps on both lanes),
	// and the fuzzer's seeds, which reach the rarer replies. The last two
	// have sliding windows (of requests, tokens and spend), two token
	// rates of different windows, input and output rates, weights and
	// prices.
	rng := rand.New(rand.NewPCG(1, 2))
	steps := make([]byte, 100*stepLen)
	var inputs [][]byte
	for _, h := range [][]byte{
		seedHeader(16, [3]byte{9, 0, 0}, [3]byte{39, 0, 0}, [3]byte{99, 0, 3}, [3]byte{99, 0, 3}, 2, 0),
		seedHeader(7, [3]byte{1, 3, 1}, [3]byte{19, 0, 1}, off, off, 0, 2),
		seedHeader(40, off, [3]byte{99, 1, 0}, [3]byte{2, 0, 2}, [3]byte{1, 3, 2}, 1, 3),
		seedHeader(24, [3]byte{9, sliding | uReq, w10s}, [3]byte{19, sliding | uTok, w1s}, [3]byte{39, uTok, w1h},
			[3]byte{9, sliding | uSpend, w10s}, 1, floorByte(0, 1, 0)),
		seedHeader(48, [3]byte{4, 3, 5}, [3]byte{19, uIn | 1, w60s}, [3]byte{19, uOut, 6}, [3]byte{7, uSpend | 2, w60s},
			2, floorByte(2, 3, 1)),
		// Three tenants with a quarter share each, their own tokens a
		// minute and a sliding window of requests; versions sent.
		slices.Concat(seedHeader(8, [3]byte{9, 0, 0}, [3]byte{99, 0, 0}, off, [3]byte{39, uTok | 1, w1h}, 0, floorByte(2, 0, 0)|extTenants),
			tenantBlock(3, 2, [3]byte{19, uTok, w60s}, [3]byte{9, sliding | uReq, w10s})),
		// One tenant of a whole share, its own sliding tokens and a spend
		// cap, two slots, no version sent.
		slices.Concat(seedHeader(32, [3]byte{9, 0, 0}, [3]byte{49, 0, w10s}, off, off, 1, floorByte(0, 1, 0)|extTenantsOnly),
			tenantBlock(1, 4, [3]byte{19, sliding | uTok, w1s}, [3]byte{9, uSpend, w60s})),
		// Three tenants of a tenth each, their own tokens and requests a
		// minute (none sliding: batches take their fast path), versions
		// sent; and two of a quarter each on shares alone, two slots.
		slices.Concat(seedHeader(12, [3]byte{9, 0, 0}, [3]byte{99, 0, 0}, off, off, 0, floorByte(1, 0, 0)|extTenants),
			tenantBlock(3, 1, [3]byte{19, uTok, w60s}, [3]byte{9, uReq, w60s})),
		slices.Concat(seedHeader(20, [3]byte{9, 0, 0}, [3]byte{49, 0, 0}, off, off, 2, floorByte(0, 0, 0)|extTenants),
			tenantBlock(2, 2, off, off)),
		// Versions sent, no tenant.
		seedHeader(64, [3]byte{9, 0, 0}, [3]byte{39, 0, 0}, off, off, 0, floorByte(1, 0, 0)|extVersioned),
	} {
		for i := range steps {
			steps[i] = byte(rng.Uint32())
		}
		inputs = append(inputs, slices.Concat(h, steps))
	}
	// The lanes share nothing (a miniredis of its own, keys of its own on
	// Redis), and the real lane mostly sleeps: they run side by side.
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		b := redistest.Mini(t)
		rdb := b.Client(t)
		seen := map[string]int{}
		for _, in := range slices.Concat(inputs, fuzzSeeds()) {
			b.Mini.FlushAll()
			for k, n := range runScenario(t, lane{rdb: rdb, mini: b.Mini, scale: 1}, in, 200) {
				seen[k] += n
			}
		}
		t.Logf("seen %v", seen)
		// The steps must reach every kind of reply, or the comparison
		// proves little.
		for _, kind := range []string{"acquire 1", "acquire 1 later bucket", "acquire 1 later sliding", "acquire 2",
			"acquire 0 pause", "acquire 0 concurrency", "acquire 0 bucket", "acquire 0 sliding", "acquire -1 bucket",
			"acquire -1 sliding", "acquire 0 queued", "acquire 1 pending", "acquire 2 pending", "acquire 1 claim",
			"acquire 0 claim queued", "acquire 0 claim quota", "acquire 2 handed",
			"acquire 1 batch", "acquire 0 quota", "acquire 0 stop", "acquire 1 probe", "sliding exact wait",
			"weighted", "split charged", "spend charged",
			"handed 1", "handed 2", "handed 0", "handed tenant 0", "handed claim", "leave 0", "leave 1", "settle 1", "settle 0", "settle usage 1", "release 1", "cancel 1",
			"keepalive 1", "keepalive 0", "keepalive gives", "leave gives", "claim gives", "giveback all", "giveback part", "giveback none", "sliding giveback",
			"sliding debt", "spend corrected", "settle mixed", "stack merged", "stack popped", "throttle", "lowering",
			"stop quota", "stop stop", "resume", "acquire 3", "define 1", "define 0", "tenant acquire 1", "settles", "acquires", "acquires with a tenant", "settles with a tenant",
			"tenant acquire 0", "tenant acquire -1", "over share 1", "over share 0", "over share waits", "tenant settle"} {
			if seen[kind] == 0 {
				t.Errorf("no %q reply in %v", kind, seen)
			}
		}
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		b := redistest.Real(t)
		rdb := b.Client(t)
		for _, in := range inputs {
			l := lane{rdb: rdb, scale: 10_000, name: redistest.Name(t)}
			t.Cleanup(func() { rdb.Del(context.Background(), l.allKeys()...) })
			runScenario(t, l, in, 100)
		}
	})
}

// FuzzScriptsMatchModel is TestScriptsMatchModel's miniredis lane on
// sequences the fuzzer makes. An input is a 16-byte header (the rates, the
// concurrency limit, the batch floor, weights and prices; with tenants, 8
// bytes more) and then 8 bytes per step, decoded by decode; the seeds are written step by step with
// seedStep, and testdata/fuzz keeps sequences the fuzzer found and the
// seeds that first showed a disagreement.
func FuzzScriptsMatchModel(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	b := redistest.Mini(f)
	rdb := b.Client(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		b.Mini.FlushAll()
		runScenario(t, lane{rdb: rdb, mini: b.Mini, scale: 1}, data, 120)
	})
}

// The input format: see decode.
const (
	headerLen = 16
	stepLen   = 8
	// base is the first clock reading, in ms: divisible by 16, so a header's
	// start offset decides which admissions reap expired leases.
	base = 1_700_000_000_000
)

// Operations, the low nibble of a step's first byte.
const (
	opClaim       = 4 // 4 and 5: a waiter comes back with its ticket
	opRetry       = 6 // resend an earlier acquire, same id and arguments
	opSettle      = 7 // 7 to 10: settle, release or cancel a lease
	opKeepAlive   = 11
	opPause       = 12 // a pause, a lowering, or (a's bit 7) a stop
	opLeave       = 13 // a waiter gives up
	opReconfigure = 15 // configure other rates from now on
	opClock       = 14 // only moves the clock; with a's bit 7, defines
	// 0 to 3 acquire: with tenants, op mod (tenants+1) is the call's
	// tenant (0: the budget alone).
)

// scenario is a decoded input: one budget's configuration and its steps.
// tenants is how many tenants call (0: none; cfg.Tenant and cfg.Share are
// theirs), versioned whether calls send the definition's version.
type scenario struct {
	start       int64
	cfg         model.Config
	conc, floor int64
	tenants     int
	versioned   bool
	steps       []step
}

// step is one operation. k is the first byte's high nibble (an acquire's
// model and split), and a, b and c are read by the operation (see
// runner.do); ms is the clock step before it, negative for a step back.
type step struct {
	op, k byte
	ms    int64
	a     byte
	b, c  uint16
}

// decode reads a scenario from data, never failing: missing bytes read as
// zero. The header is the start offset (2 bytes), three bytes for each of
// four rates (see decodeRate), the concurrency selector and the floor
// byte: bits 0-1 the batch floor, 2-3 the models' weights, 4-5 their
// prices, 6-7 the extension: 0 none (no tenant, no version sent), 1 calls
// send the definition's version, 2 and 3 tenants too (3: no version):
// then 8 more bytes follow the header (see decodeTenants). Each step is op, clock (2 bytes), a, b (2), c (2). The clock's
// top 3 bits pick the size of the step (0-1: none, the same ms; 2-4: under
// 1 s; 5-6: under 8.2 s; 7: up to 70 s), its other 13 the amount; an op
// byte of 0xf0 or more steps the clock back instead, by up to 2 s.
// Durations are divided by scale.
func decode(data []byte, maxSteps int, scale int64) scenario {
	r := reader{data: data}
	sc := scenario{start: base + int64(r.u16())}
	taken := map[string]bool{}
	for i := range 4 {
		rt, ok := decodeRate(i, r.byte(), r.byte(), r.byte(), scale)
		if !ok {
			continue
		}
		// Two rates of one name would share a field: package pacer
		// refuses them. The later one's window grows by a ms instead.
		for taken[rt.Name()] {
			rt.Window++
		}
		taken[rt.Name()] = true
		sc.cfg.Rates = append(sc.cfg.Rates, rt)
	}
	if c := r.byte(); c%3 != 0 {
		sc.conc = 1 + int64(c%6)
	}
	f := r.byte()
	sc.floor = [...]int64{200, 0, 500, 999}[f%4]
	sc.cfg.Weights = weights[f>>2&3]
	sc.cfg.Prices = prices[f>>4&3]
	if ext := f >> 6; ext > 0 {
		sc.versioned = ext != 3
		if ext >= 2 {
			decodeTenants(&sc, &r, scale)
		}
	}
	for len(sc.steps) < maxSteps && r.off < len(data) {
		k, clock := r.byte(), r.u16()
		s := step{op: k & 0x0f, k: k >> 4, a: r.byte(), b: r.u16(), c: r.u16()}
		v := int64(clock & 0x1fff)
		switch class := clock >> 13; {
		case k >= 0xf0:
			s.ms = -(v % 2000)
			s.k = 0
		case class >= 2 && class <= 4:
			s.ms = v % 1000
		case class == 5 || class == 6:
			s.ms = v
		case class == 7:
			s.ms = v * 70_000 / 0x1fff
		}
		s.ms /= scale
		sc.steps = append(sc.steps, s)
	}
	return sc
}

// The models a call may name (a step's k mod 3), and the weights and
// prices a header may give them. Prices are per million tokens, in the
// Spend rates' unit: fractions of a unit per token, so that the rounding
// up is exercised; the third set prices only "mini", so a call of another
// model reserves no spend.
var (
	models  = [...]string{"", "mini", "big"}
	weights = [...]map[string]float64{nil, {"big": 10, "mini": 0.5}, {"big": 2.5}, {"mini": 0.3, "big": 1.7}}
	prices  = [...]map[string]wire.Price{
		{"": {Input: 1e6, CachedInput: 5e5, Output: 4e6}},
		{"": {Input: 2.5e5, CachedInput: 1.25e5, Output: 1e6}, "big": {Input: 5e6, CachedInput: 2.5e6, Output: 2e7}},
		{"mini": {Input: 1.5e5, CachedInput: 7.5e4, Output: 6e5}},
		{"": {Input: 3e6, CachedInput: 3e6, Output: 3e6}},
	}
)

// decodeRate reads rate i of the header: capSel (divisible by 5: no rate)
// sets its capacity, refillSel its refill (bits 0-1), its unit (bits 2-4;
// 0, 6 and 7 keep the slot's: requests for 0 and 2, tokens for 1 and 3)
// and whether it is a sliding window (bit 7), windowSel its window (bits
// 0-2). Selectors below 4 give the four buckets the fuzzer began with.
func decodeRate(i int, capSel, refillSel, windowSel byte, scale int64) (model.Rate, bool) {
	if capSel%5 == 0 {
		return model.Rate{}, false
	}
	c := int64(capSel)
	unit := [...]wire.Unit{0, wire.Requests, wire.Tokens, wire.Input, wire.Output, wire.Spend, 0, 0}[refillSel>>2&7]
	if refillSel>>2&7 == 0 || refillSel>>2&7 >= 6 {
		unit = [...]wire.Unit{wire.Requests, wire.Tokens, wire.Requests, wire.Tokens}[i]
	}
	var capacity int64
	switch {
	case unit == wire.Requests && i == 0:
		capacity = 1 + c%12
	case unit == wire.Requests:
		capacity = 1 + c%100
	case unit == wire.Spend:
		capacity = 1000 * (1 + c%200)
	case i == 3:
		capacity = 500 * (1 + c%200)
	default:
		capacity = 50 * (1 + c%200)
	}
	window := [...]int64{60_000, 1_000, 10_000, 86_400_000, 3_600_000, 1_500, 2_000, 300_000}[windowSel%8]
	return model.Rate{
		Unit:    unit,
		Cap:     capacity,
		Refill:  [...]int64{capacity, max(1, capacity/2), max(1, capacity/10), 2 * capacity}[refillSel%4],
		Window:  max(1, window/scale),
		Sliding: refillSel&0x80 != 0,
	}, true
}

// decodeTenants reads the tenants' 8 bytes: the first's bits 0-1 the
// number of tenants (1 + its value mod 3) and bits 2-4 the share (see
// shares), then two rates of each tenant's own (see decodeRate: as the
// budget's second and third). The last byte is spare.
func decodeTenants(sc *scenario, r *reader, scale int64) {
	e := r.byte()
	sc.tenants = 1 + int(e&3)%3
	sc.cfg.Share = shares[e>>2&7]
	taken := map[string]bool{}
	for i := 1; i <= 2; i++ {
		rt, ok := decodeRate(i, r.byte(), r.byte(), r.byte(), scale)
		if !ok {
			continue
		}
		for taken[rt.Name()] {
			rt.Window++
		}
		taken[rt.Name()] = true
		sc.cfg.Tenant = append(sc.cfg.Tenant, rt)
	}
	r.byte()
}

// shares are the tenants' shares a header may give.
var shares = [...]float64{0, 0.1, 0.25, 0.5, 1, 0.3, 0.05, 0.75}

type reader struct {
	data []byte
	off  int
}

func (r *reader) byte() byte {
	if r.off >= len(r.data) {
		r.off++
		return 0
	}
	r.off++
	return r.data[r.off-1]
}

func (r *reader) u16() uint16 { return uint16(r.byte())<<8 | uint16(r.byte()) }
