package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/llmpacer/llmpacer/internal/wire"
)

// rpm 60 (1 per second), tpm 6000 (100 per second): the budget of
// lua/contract_test.go.
var contract = Config{Rates: []Rate{
	{Unit: wire.Requests, Cap: 60, Refill: 60, Window: 60_000},
	{Unit: wire.Tokens, Cap: 6000, Refill: 6000, Window: 60_000},
}}

// rpm and tpm are contract's buckets.
var rpm, tpm = contract.Rates[0].Wire(), contract.Rates[1].Wire()

// tokens is a request of n tokens.
func tokens(n int64) Request { return Request{Tokens: n} }

// t0 (ms) is divisible by 16: admissions at t0 reap expired leases.
const t0 = 1_700_000_000_000

type reply struct {
	Code   int
	Wait   int64
	Reason string
}

func acquire(b *Budget, ms int64, id string, cost, maxWait int64) reply {
	r := b.Acquire(ms*1000, Call{ID: id, MaxWait: maxWait, TTL: 60_000, Limit: 2, BatchSlots: 2, Spacing: 50, Charges: contract.Charges(tokens(cost), false, 200)})
	return reply{r.Code, r.Wait, r.Reason}
}

// plain is an interactive call of cost tokens with no concurrency limit.
func plain(id string, ttl int64, c Config, cost int64) Call {
	return Call{ID: id, TTL: ttl, Spacing: 1, Charges: c.Charges(tokens(cost), false, 0)}
}

// The sequence of TestContractAsDocumented, on the model.
func TestContractSequence(t *testing.T) {
	var b Budget
	refund := contract.Deltas(Settled, tokens(5000), 0, Usage{Tokens: 1000})
	steps := []struct {
		name string
		got  func() reply
		want reply
	}{
		{"a fits", func() reply { return acquire(&b, t0, "a", 5000, 0) }, reply{1, 0, ""}},
		{"a again", func() reply { return acquire(&b, t0, "a", 5000, 0) }, reply{2, 0, ""}},
		{"b over what is left", func() reply { return acquire(&b, t0, "b", 2000, 0) }, reply{0, 10_000, "tpm"}},
		{"c over capacity", func() reply { return acquire(&b, t0, "c", 7000, 0) }, reply{-1, 0, "tpm"}},
		{"d reserves its turn", func() reply { return acquire(&b, t0, "d", 2000, 60_000) }, reply{1, 10_000, "tpm"}},
		// d holds no slot until its turn, but every later call waits
		// behind its tokens.
		{"e waits behind d's turn", func() reply { return acquire(&b, t0, "e", 0, 0) }, reply{0, 10_000, "tpm"}},
		{"a settles", func() reply {
			return reply{Code: b.Settle((t0+1000)*1000, "a", t0*1000, 0, 0, refund)}
		}, reply{Code: 1}},
		{"a settles twice", func() reply {
			return reply{Code: b.Settle((t0+1000)*1000, "a", t0*1000, 0, 0, refund)}
		}, reply{Code: 0}},
	}
	for _, s := range steps {
		if diff := cmp.Diff(s.want, s.got()); diff != "" {
			t.Fatalf("%s: mismatch (-want +got):\n%s", s.name, diff)
		}
	}
	// tpm: 6000 - 5000 - 2000 + 100 (a second's refill) + 4000 (a's refund);
	// rpm: 60 - 2 + 1.
	us := int64(t0+1000) * 1000
	if got := b.Level(us, tpm); got != 3100 {
		t.Errorf("tpm level = %v; want 3100", got)
	}
	if got := b.Level(us, rpm); got != 59 {
		t.Errorf("rpm level = %v; want 59", got)
	}
	if s := b.Snapshot(us); s.InFlight != 0 || s.PauseRemaining != 0 {
		t.Errorf("Snapshot() = %+v; want none in flight (d's lease is pending), no pause", s)
	}
}

// A debt is taken from now when the bucket is full: 6000 - 1000 reserved -
// 6000 owed (the cap of one bucket, applied by the caller).
func TestSettleDebt(t *testing.T) {
	var b Budget
	b.Acquire(t0*1000, plain("a", 60_000, contract, 1000))
	if got := b.Settle(t0*1000, "a", t0*1000, 0, 0, contract.Deltas(Settled, tokens(1000), 0, Usage{Tokens: 1_000_000})); got != 1 {
		t.Fatalf("Settle() = %d; want 1", got)
	}
	if got := b.Level(t0*1000, tpm); got != -1000 {
		t.Errorf("tpm level after a huge overrun = %v; want -1000", got)
	}
}

// Once the bucket has refilled past full, a refund gives nothing: the TAT
// stays where it is, in the past, and the bucket reads full, never above.
func TestRefundPastFullReadsFull(t *testing.T) {
	var b Budget
	b.Acquire(t0*1000, plain("a", 120_000, contract, 5000))
	us := int64(t0+60_000) * 1000
	if got := b.Settle(us, "a", t0*1000, 0, 0, contract.Deltas(Settled, tokens(5000), 0, Usage{Tokens: 1000})); got != 1 {
		t.Fatalf("Settle() = %d; want 1", got)
	}
	if got := b.Level(us, tpm); got != 6000 {
		t.Errorf("tpm level = %v; want 6000 (full)", got)
	}
	if got, want := b.Value(tpm.Field), "1700000050000000"; got != want {
		t.Errorf("stored tpm TAT = %s; want %s (as charged, now in the past)", got, want)
	}
}

// Charges round against the caller: a token in a bucket refilling 3 per ms
// takes 334 µs, not 333.3. The allowance adds a slack under 1 ms and under
// half an interval (999 µs for the request bucket, 166 µs for the token
// bucket), so that calls adding up to the capacity fit a full bucket.
func TestChargesRoundUp(t *testing.T) {
	bs := Config{Rates: []Rate{{Unit: wire.Requests, Cap: 1, Refill: 1, Window: 7}, {Unit: wire.Tokens, Cap: 10, Refill: 3, Window: 1}}}
	cs := bs.Charges(tokens(1), false, 0)
	want := []Charge{{Field: "requests/7ms", Charge: 7000, Allow: 7999, Empty: 7000}, {Field: "tokens/1ms", Charge: 334, Allow: 3334 + 166, Empty: 3334}}
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("Charges mismatch (-want +got):\n%s", diff)
	}
	if ds := bs.Deltas(Canceled, tokens(1), 0, Usage{}); ds[1].Us != -333 {
		t.Errorf("Deltas(cancel)[tpm] = %d; want -333 (a refund rounds down)", ds[1].Us)
	}
}

func TestPauseOnlyGrows(t *testing.T) {
	var b Budget
	if got := b.Pause(t0, 5000); got != 5000 {
		t.Errorf("Pause(5000) = %d; want 5000", got)
	}
	if got := b.Pause(t0+100, 10); got != 4900 {
		t.Errorf("Pause(10) after Pause(5000) = %d; want 4900", got)
	}
	if r := acquire(&b, t0+100, "a", 1, 60_000); r != (reply{0, 4900, "pause"}) {
		t.Errorf("acquire during a pause = %+v; want {0 4900 pause}", r)
	}
}

func TestKeepAlive(t *testing.T) {
	var b Budget
	acquire(&b, t0, "a", 1, 0)
	tests := []struct {
		name       string
		now, ttl   int64
		code       int
		wantExpiry int64
	}{
		{"shorter keeps the expiry", t0 + 1000, 1000, 1, t0 + 60_000},
		{"longer extends it", t0 + 1000, 120_000, 1, t0 + 121_000},
		{"on the expiry it is over", t0 + 121_000, 120_000, 0, 0},
	}
	for _, tt := range tests {
		code, expiry := b.KeepAlive(tt.now*1000, "a", tt.ttl, 0, 0)
		if code != tt.code || expiry != tt.wantExpiry {
			t.Errorf("%s: KeepAlive(%d) = %d, %d; want %d, %d", tt.name, tt.ttl, code, expiry, tt.code, tt.wantExpiry)
		}
	}
}

// An expired lease still answers a retry with code 2 until an admission on
// a millisecond divisible by 16, a minute or more after its expiry, reaps
// it.
func TestReapingEndsRetries(t *testing.T) {
	var b Budget
	b.Acquire((t0+1)*1000, plain("a", 10, contract, 1))
	if r := acquire(&b, t0+100, "a", 1, 0); r.Code != 2 {
		t.Fatalf("retry of an expired, unreaped lease = %+v; want code 2", r)
	}
	acquire(&b, t0+16*10, "b", 1, 0)
	if r := acquire(&b, t0+16*10+1, "a", 1, 0); r.Code != 2 {
		t.Fatalf("retry of a lease expired under a minute ago = %+v; want code 2, not reaped yet", r)
	}
	acquire(&b, t0+16*3760, "c", 1, 0)
	if r := acquire(&b, t0+16*3760+1, "a", 1, 0); r.Code != 1 {
		t.Errorf("retry of a reaped lease = %+v; want code 1, admitted anew", r)
	}
}

// A give-back that arrives after the bucket refilled past its charge and
// was spent again gives nothing: the refill already restored it. RPM 60
// with a burst of 5: a call at t0 and its cancel delayed 1.3 s, while
// another caller takes the refilled burst at t0+1.15 s.
func TestLateGiveBack(t *testing.T) {
	bs := Config{Rates: []Rate{{Unit: wire.Requests, Cap: 5, Refill: 60, Window: 60_000}}}
	var b Budget
	acq := func(ms int64, id string) int {
		return b.Acquire(ms*1000, plain(id, 60_000, bs, 0)).Code
	}
	if got := acq(t0, "a"); got != 1 {
		t.Fatalf("acquire a = %d; want 1", got)
	}
	admitted := 0
	for i := range 6 {
		admitted += acq(t0+1150, "b"+string(rune('0'+i)))
	}
	if admitted != 5 {
		t.Fatalf("the refilled burst admitted %d; want 5", admitted)
	}
	if got := b.Settle((t0+1300)*1000, "a", t0*1000, 0, 0, bs.Deltas(Canceled, tokens(0), 0, Usage{})); got != 1 {
		t.Fatalf("late cancel of a = %d; want 1", got)
	}
	if got := acq(t0+1300, "c"); got != 0 {
		t.Errorf("acquire after the late cancel = %d; want 0: six calls in 150 ms against a bound of 5.15", got)
	}
	// A give-back from a lease charged since the restart still counts.
	if got := b.Settle((t0+1300)*1000, "b0", (t0+1150)*1000, 0, 0, bs.Deltas(Canceled, tokens(0), 0, Usage{})); got != 1 {
		t.Fatalf("cancel of b0 = %d; want 1", got)
	}
	if got := acq(t0+1300, "d"); got != 1 {
		t.Errorf("acquire after b0's cancel = %d; want 1", got)
	}
}

// An expired lease answers 2 and stays in the set, so a retried settle is
// answered 2 again.
func TestSettleExpired(t *testing.T) {
	var b Budget
	b.Acquire(t0*1000, plain("a", 1000, contract, 100))
	for range 2 {
		if got := b.Settle((t0+1000)*1000, "a", t0*1000, 0, 0, contract.Deltas(Settled, tokens(100), 0, Usage{Tokens: 10})); got != 2 {
			t.Fatalf("Settle() after expiry = %d; want 2", got)
		}
	}
}
