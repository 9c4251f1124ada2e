package wire_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Input and output corrections: each its own difference; a total alone
// bounds both; mixed signs send a debt and a give-back together.
func TestCorrectionsSplit(t *testing.T) {
	in := wire.NewBucket("input_tokens/60s", 1000, 1000, time.Minute, wire.Input)
	out := wire.NewBucket("output_tokens/60s", 1000, 1000, time.Minute, wire.Output)
	tok := wire.NewBucket("tpm", 10_000, 10_000, time.Minute, wire.Tokens)
	bs := []wire.Bucket{in, out, tok}
	r := wire.Use{Tokens: 900, Input: 500, Output: 400, Split: true}
	sum := func(cs []wire.Correction) map[string]int64 {
		m := map[string]int64{}
		for _, c := range cs {
			m[c.Field] = c.Us
		}
		return m
	}
	got := sum(wire.Corrections(bs, r, wire.Use{Tokens: 600, Input: 500, Output: 100, Split: true}, false, 0))
	if got[out.Field] != -out.Refund(300) || got[tok.Field] != -tok.Refund(300) || got[in.Field] != 0 {
		t.Errorf("split usage: %v; want 300 back to output and tokens, nothing to input", got)
	}
	got = sum(wire.Corrections(bs, r, wire.Use{Tokens: 300}, false, 0))
	if got[in.Field] != -in.Refund(200) || got[out.Field] != -out.Refund(100) || got[tok.Field] != -tok.Refund(600) {
		t.Errorf("total alone: %v; want input 200 back, output 100 back, tokens 600 back", got)
	}
	got = sum(wire.Corrections(bs, r, wire.Use{Tokens: 1000, Input: 300, Output: 700, Split: true}, false, 0))
	if got[in.Field] != -in.Refund(200) || got[out.Field] != out.Charge(300) || got[tok.Field] != tok.Charge(100) {
		t.Errorf("mixed signs: %v; want input 200 back, output 300 and tokens 100 owed", got)
	}
	got = sum(wire.Corrections(bs, r, wire.Use{Tokens: 607, Input: 600, Output: 7, Split: true}, false, 0))
	if got[in.Field] != in.Charge(100) || got[out.Field] != -out.Refund(393) || got[tok.Field] != -tok.Refund(293) {
		t.Errorf("undercounted prompt, short answer: %v; want input 100 owed, output 393 and tokens 293 back", got)
	}
	for _, c := range wire.Corrections(bs, r, wire.Use{}, true, 0) {
		if c.Us >= 0 {
			t.Errorf("a canceled call corrects %s by %d; want a give-back", c.Field, c.Us)
		}
	}
}

// A sliding window's corrections are units, sent with the sub-window of
// the call's turn; without the turn, a give-back is dropped.
func TestSlidingCorrections(t *testing.T) {
	s := wire.NewSliding("tokens/10s", 1000, 10*time.Second, wire.Tokens)
	if s.Field != "~156250:tokens/10s" || s.Charge(300) != 300 || s.Allowance(0.2) != 800 {
		t.Fatalf("%+v: want field ~156250:tokens/10s, charges in units, a batch allowance of 800", s)
	}
	r := wire.Use{Tokens: 500}
	cs := wire.Corrections([]wire.Bucket{s}, r, wire.Use{Tokens: 200}, false, 1_000_000)
	if len(cs) != 1 || cs[0].Us != -300 || cs[0].At != 6400 || !cs[0].Sliding {
		t.Errorf("give-back %+v; want -300 at sub-window 6400", cs)
	}
	args := wire.SettleArgs("id", 1, 0, 0, cs)
	if got := args[len(args)-1]; got != "-300@6400" {
		t.Errorf("sent %v; want -300@6400", got)
	}
	if cs := wire.Corrections([]wire.Bucket{s}, r, wire.Use{Tokens: 200}, false, 0); len(cs) != 0 {
		t.Errorf("a give-back without the turn: %+v; want none", cs)
	}
	if cs := wire.Corrections([]wire.Bucket{s}, r, wire.Use{Tokens: 700}, false, 0); len(cs) != 1 || cs[0].Us != 200 {
		t.Errorf("a debt: %+v; want +200", cs)
	}
}

// A sliding window's level, from its header as stored: at most what the
// window ending now counts; a value of the format before, every count not
// rolled out.
func TestSlidingLevel(t *testing.T) {
	s := wire.NewSliding("tokens/10s", 1000, 10*time.Second, wire.Tokens)
	const now = 1_000_000_000 // sub-window 6400
	st := wire.SlidingState{Head: 6402, Last: 6402, Total: 7 + 100 + 40, Current: 243, Folded: 30, FoldedLast: 6337}
	st.Counts[6338%64] = 7   // slot 2
	st.Counts[6400%64] = 100 // slot 0
	st.Counts[6401%64] = 40  // slot 1
	v := st.Header()
	back, ok, err := wire.ParseSlidingHeader(v)
	back.Counts = st.Counts
	if err != nil || !ok || back != st {
		t.Fatalf("ParseSlidingHeader(%q) = %+v, %v, %v; want %+v", v, back, ok, err, st)
	}
	if r := st.Ring(0); len(r) != 16*9 || r[:27] != "00000001T00000000X000000007" || st.Ring(3) != strings.Repeat("0", 16*9) {
		t.Errorf("Ring(0) = %q; want 16 counts of 9 base-64 digits, 100 (1T), 40 (X) and 7 first; Ring(3) zeros", r)
	}
	for _, c := range []struct {
		name string
		v    string
		want float64
	}{
		{"empty", "", 1000},
		{"ring, head and folded", v, 1000 - 147 - 243 - 30},
		{"head alone in the window", "6336:6336:500:20", 980},
		{"rolled out", "6335:6335:500:20", 1000},
		// -n skips n sub-windows: 6334 rolled out, 6399 counted, 6465 too.
		{"format before", "6334 7 -64 100 -65 300", 600},
	} {
		lv, err := s.SlidingLevel(now, c.v)
		if err != nil || lv != c.want {
			t.Errorf("%s: SlidingLevel = %v, %v; want %v", c.name, lv, err, c.want)
		}
	}
	for _, bad := range []string{"1:2:3", "1:2:3:4:5", "1:2:3:4:5:x", "x y"} {
		if _, err := s.SlidingLevel(now, bad); err == nil {
			t.Errorf("SlidingLevel(%q) = nil error; want one", bad)
		}
	}
	if (wire.SlidingState{}).Header() != "" {
		t.Errorf("an empty state is not stored as \"\"")
	}
}

// A request's and a usage's units: tokens weighed and rounded up, spend
// priced from the unweighed tokens.
func TestReservedAndUsed(t *testing.T) {
	p := wire.Price{Input: 1e6, CachedInput: 5e5, Output: 4e6} // 1, 0.5 and 4 a token
	if got, want := wire.Reserved(10, 0, 0, 0.25, p, true), (wire.Use{Tokens: 3, Spend: 40}); got != want {
		t.Errorf("Reserved(10 tokens, weight 0.25) = %+v; want %+v", got, want)
	}
	if got, want := wire.Reserved(0, 3, 7, 1.5, p, true), (wire.Use{Tokens: 16, Input: 5, Output: 11, Split: true, Spend: 31}); got != want {
		t.Errorf("Reserved(3 in, 7 out, weight 1.5) = %+v; want %+v", got, want)
	}
	if got, want := wire.Reserved(10, 0, 0, 2, p, false), (wire.Use{Tokens: 20}); got != want {
		t.Errorf("Reserved unpriced = %+v; want %+v", got, want)
	}
	// An input margin enlarges the input's price in a reservation, never
	// the tokens the rates are charged, nor what a usage costs.
	pm := p
	pm.InputMargin = 0.5
	if got, want := wire.Reserved(0, 4, 1, 1, pm, true), (wire.Use{Tokens: 5, Input: 4, Output: 1, Split: true, Spend: 10}); got != want {
		t.Errorf("Reserved(4 in, 1 out, margin 50%%) = %+v; want %+v", got, want)
	}
	pm.InputMargin = 4 // the input's 5 a token passes the output's 4
	if got, want := wire.Reserved(10, 0, 0, 1, pm, true), (wire.Use{Tokens: 10, Spend: 50}); got != want {
		t.Errorf("Reserved(10 tokens, margin 400%%) = %+v; want %+v", got, want)
	}
	if got, want := wire.UsedSplit(4, 2, 1, 1, pm, true).Spend, int64(7); got != want {
		t.Errorf("UsedSplit(4 in, 2 cached, 1 out, margin 400%%).Spend = %d; want %d", got, want)
	}
	if got, want := wire.UsedTotal(10, 0, p, true), (wire.Use{Tokens: 10, Spend: 40}); got != want {
		t.Errorf("UsedTotal(10, no weight) = %+v; want %+v", got, want)
	}
	if got, want := wire.UsedSplit(4, 2, 1, 1, p, true), (wire.Use{Tokens: 5, Input: 4, Output: 1, Split: true, Spend: 7}); got != want {
		t.Errorf("UsedSplit(4 in, 2 cached, 1 out) = %+v; want %+v", got, want)
	}
}

// TestShareKeep: a call over its tenant's share leaves room for ShareCalls
// calls like it, up to half of each budget bucket, at least the floor, and
// never so much that it could not fit; a tenant's own buckets do not count.
func TestShareKeep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cs    []wire.Charge
		floor float64
		want  float64
	}{
		{"burst of 12 calls: half", []wire.Charge{{Field: "tpm", Charge: 1000, Allow: 12_000}}, 0.2, 0.5},
		{"burst of 60 calls: 8 of them", []wire.Charge{{Field: "tpm", Charge: 1000, Allow: 60_000}}, 0.1, 8.0 / 60},
		{"burst of 100 calls: the floor", []wire.Charge{{Field: "tpm", Charge: 1000, Allow: 100_000}}, 0.2, 0.2},
		{"a burst of one call: nothing, or it never fits", []wire.Charge{{Field: "rpm", Charge: 1000, Allow: 1000}}, 0.2, 0},
		{"burst of 3 calls: it still fits", []wire.Charge{{Field: "rpm", Charge: 1000, Allow: 3000}}, 0.2, 0.5},
		{"burst of 1.5 calls: a third", []wire.Charge{{Field: "rpm", Charge: 1000, Allow: 1500}}, 0.2, 1.0 / 3},
		{"the largest want of the budget's buckets, the smallest fit", []wire.Charge{
			{Field: "rpm", Charge: 1000, Allow: 10_000}, {Field: "tpm", Charge: 1000, Allow: 100_000},
			{Field: "%rpm", Charge: 9000, Allow: 10_000}, {Field: "@tpd", Charge: 99_000, Allow: 100_000}}, 0.2, 0.5},
		{"no floor", []wire.Charge{{Field: "tpm", Charge: 1000, Allow: 100_000}}, 0, 0.08},
	} {
		if got := wire.ShareKeep(tc.cs, tc.floor); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: ShareKeep = %v, want %v", tc.name, got, tc.want)
		}
	}
}
