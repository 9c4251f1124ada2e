package wire_test

import (
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// Input and output corrections: each its own difference; a total alone
// bounds both; mixed signs keep the debts only.
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
	if got[in.Field] != 0 || got[out.Field] != out.Charge(300) || got[tok.Field] != tok.Charge(100) {
		t.Errorf("mixed signs: %v; want the debts only (output 300, tokens 100)", got)
	}
	for _, c := range wire.Corrections(bs, r, wire.Use{}, true, 0) {
		if c.Us >= 0 {
			t.Errorf("a canceled call corrects %s by %d; want a give-back", c.Field, c.Us)
		}
	}
}
