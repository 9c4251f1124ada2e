package lua_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/internal/redistest"
)

// The scripts against internal/model, the differential way: one sequence of
// acquires, claims, leaves, settles, keepalives, pauses and clock steps goes
// to both, and every reply, and after every step every bucket's TAT the
// snapshot script reports, every member of the lease set and of the slot
// queue, must agree exactly: they are integers. So must the admissions the
// scripts publish for queued waiters, in order. The runner also checks the budget's promises
// on the model (promise_test.go).
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
	// Three budgets, 100 random steps each (the same steps on both lanes),
	// and the fuzzer's seeds, which reach the rarer replies.
	rng := rand.New(rand.NewPCG(1, 2))
	steps := make([]byte, 100*stepLen)
	var inputs [][]byte
	for _, h := range [][]byte{
		seedHeader(16, [3]byte{9, 0, 0}, [3]byte{39, 0, 0}, [3]byte{99, 0, 3}, [3]byte{99, 0, 3}, 2, 0),
		seedHeader(7, [3]byte{1, 3, 1}, [3]byte{19, 0, 1}, off, off, 0, 2),
		seedHeader(40, off, [3]byte{99, 1, 0}, [3]byte{2, 0, 2}, [3]byte{1, 3, 2}, 1, 3),
	} {
		for i := range steps {
			steps[i] = byte(rng.Uint32())
		}
		inputs = append(inputs, slices.Concat(h, steps))
	}
	t.Run("miniredis", func(t *testing.T) {
		b := redistest.Mini(t)
		rdb := b.Client(t)
		seen := map[string]int{}
		for _, in := range slices.Concat(inputs, fuzzSeeds()) {
			b.Mini.FlushAll()
			for k, n := range runScenario(t, lane{rdb: rdb, mini: b.Mini, scale: 1}, in, 200) {
				seen[k] += n
			}
		}
		// The steps must reach every kind of reply, or the comparison
		// proves little.
		for _, kind := range []string{"acquire 1 ", "acquire 1 later", "acquire 2 ", "acquire 0 pause",
			"acquire 0 concurrency", "acquire 0 rpm", "acquire 0 tpm", "acquire -1 tpm",
			"acquire 0 queued", "acquire 1 pending", "acquire 2 pending", "acquire 1 claim",
			"acquire 0 claim queued", "acquire 2 handed", "acquire 1 batch",
			"handed 1", "handed 2", "handed 0", "handed claim", "leave 0", "leave 1",
			"settle 1", "settle 0", "release 1", "cancel 1",
			"keepalive 1", "keepalive 0", "giveback all", "giveback part", "giveback none",
			"stack merged", "stack popped", "throttle"} {
			if seen[kind] == 0 {
				t.Errorf("no %q reply in %v", kind, seen)
			}
		}
	})
	t.Run("redis", func(t *testing.T) {
		b := redistest.Real(t)
		rdb := b.Client(t)
		for _, in := range inputs {
			l := lane{rdb: rdb, scale: 10_000, name: redistest.Name(t)}
			t.Cleanup(func() { rdb.Del(context.Background(), l.keys()...) })
			runScenario(t, l, in, 100)
		}
	})
}

// FuzzScriptsMatchModel is TestScriptsMatchModel's miniredis lane on
// sequences the fuzzer makes. An input is a 16-byte header (the buckets, the
// concurrency limit, the batch floor) and then 8 bytes per step, decoded by
// decode; the seeds are written step by step with seedStep, and
// testdata/fuzz keeps a few long sequences the fuzzer found.
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
	opPause       = 12
	opLeave       = 13 // a waiter gives up
	opReconfigure = 15 // configure other buckets from now on
	// 0 to 3 acquire; 14 only moves the clock.
)

// scenario is a decoded input: one budget's configuration and its steps.
type scenario struct {
	start       int64
	buckets     model.Buckets
	conc, floor int64
	steps       []step
}

// step is one operation. a, b and c are read by the operation (see
// runner.do); ms is the clock step before it, negative for a step back.
type step struct {
	op   byte
	ms   int64
	a    byte
	b, c uint16
}

// decode reads a scenario from data, never failing: missing bytes read as
// zero. The header is the start offset (2 bytes), three bytes per bucket
// (capacity, refill and window selectors; a capacity selector divisible by 5
// leaves the limit unconfigured), the concurrency selector and the floor
// selector. Each step is op, clock (2 bytes), a, b (2), c (2). The clock's
// top 3 bits pick the size of the step (0-1: none, the same ms; 2-4: under
// 1 s; 5-6: under 8.2 s; 7: up to 70 s), its other 13 the amount; an op
// byte of 0xf0 or more steps the clock back instead, by up to 2 s.
// Durations are divided by scale.
func decode(data []byte, maxSteps int, scale int64) scenario {
	r := reader{data: data}
	sc := scenario{start: base + int64(r.u16())}
	for i := range sc.buckets {
		sc.buckets[i] = decodeBucket(i, r.byte(), r.byte(), r.byte(), scale)
	}
	if c := r.byte(); c%3 != 0 {
		sc.conc = 1 + int64(c%6)
	}
	sc.floor = [...]int64{200, 0, 500, 999}[r.byte()%4]
	for len(sc.steps) < maxSteps && r.off < len(data) {
		k, clock := r.byte(), r.u16()
		s := step{op: k & 0x0f, a: r.byte(), b: r.u16(), c: r.u16()}
		v := int64(clock & 0x1fff)
		switch class := clock >> 13; {
		case k >= 0xf0:
			s.ms = -(v % 2000)
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

func decodeBucket(i int, capSel, refillSel, windowSel byte, scale int64) model.Bucket {
	if capSel%5 == 0 {
		return model.Bucket{Cap: 0, Refill: 0, Window: 1}
	}
	c := int64(capSel)
	capacity := [...]int64{1 + c%12, 50 * (1 + c%200), 1 + c%100, 500 * (1 + c%200)}[i]
	return model.Bucket{
		Cap:    capacity,
		Refill: [...]int64{capacity, max(1, capacity/2), max(1, capacity/10), 2 * capacity}[refillSel%4],
		Window: max(1, [...]int64{60_000, 1_000, 10_000, 86_400_000}[windowSel%4]/scale),
	}
}

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
