package pacer_test

import (
	"context"
	"fmt"
	"github.com/llmpacer/llmpacer/estimate"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// A daily spend cap on Claude: a call reserves its prompt's estimate plus
// Claude's default margin of 25%, and its output cap, at their prices; it
// settles at what its usage cost. With the prompt undercounted by up to
// the margin, what is in flight never passes the cap.
func ExamplePrice_inputMargin() {
	rdb, done := stillRedis()
	defer done()
	const model = "claude-sonnet-4-5"
	p, _ := pacer.New(rdb, pacer.Config{Name: "anthropic:spend",
		// $0.10 a day, in micro-dollars.
		Rates: []pacer.Rate{{Unit: pacer.Spend, Limit: 100_000, Window: 24 * time.Hour, Sliding: true}},
		// $3, $0.30 and $15 a million tokens; InputMargin 0: the family's.
		Prices: map[string]pacer.Price{model: {Input: 3_000_000, CachedInput: 300_000, Output: 15_000_000}}})
	ctx := context.Background()
	spent := func() float64 { s, _ := p.Snapshot(ctx); return 100_000 - s.Rates[0].Level }

	fmt.Println("margin:", estimate.InputMargin(model))
	l, _ := p.Acquire(ctx, pacer.Request{Input: 4_000, Output: 1_000, Model: model})
	fmt.Printf("reserved: %.0f µ$\n", spent()) // 4,000 × 1.25 × $3/M + 1,000 × $15/M
	_ = l.SettleUsage(ctx, pacer.Usage{Input: 4_800, Output: 600})
	fmt.Printf("spent: %.0f µ$\n", spent()) // the prompt was 20% more than its estimate
	// Output:
	// margin: 0.25
	// reserved: 30000 µ$
	// spent: 23400 µ$
}
