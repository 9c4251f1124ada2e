package pacerhttp_test

import (
	"context"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// Issue 21, through anthropic-sdk-go: the offline estimate undercounts the
// prompt (the provider counts 500 input tokens) and the answer is far
// shorter than max_tokens (7 of 300). The input rate is charged a debt and
// the output rate gets its give-back in the same settle, and the day's
// tokens the net: each bucket ends at what the call used, not at its
// reservation.
func TestAnthropicSettleDebtAndGiveBack(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, pacer.Limits{TPD: 10_000_000}, fakeprovider.Config{Style: fakeprovider.Anthropic})
		r.cfg.Rates = []pacer.Rate{
			{Unit: pacer.InputTokens, Limit: 6_000, Window: time.Minute},
			{Unit: pacer.OutputTokens, Limit: 6_000, Window: time.Minute},
		}
		p, ev := r.pacer()
		c := r.anthropic(p)
		before, err := p.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model:     anthropic.ModelClaudeSonnet4_5,
			MaxTokens: 300,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello to the fleet"))},
		}, aoption.WithHeader(fakeprovider.PromptTokensHeader, "500"), aoption.WithHeader(fakeprovider.OutputTokensHeader, "7"))
		if err != nil {
			t.Fatalf("Messages.New = %v", err)
		}
		if msg.Usage.InputTokens != 500 || msg.Usage.OutputTokens != 7 {
			t.Fatalf("usage %+v; want the 500 input and 7 output the headers set", msg.Usage)
		}
		if reserved := admittedTokens(t, ev, 1); reserved >= 500+300 || reserved <= 300 {
			t.Fatalf("reserved %d tokens; want max_tokens 300 and an estimate of the prompt below the 500 it used", reserved)
		}
		settled(t, ev, 1, 507, "the call")
		s, err := p.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		elapsed := s.Time.Sub(before.Time)
		for _, c := range []struct {
			what  string
			bk    pacer.RateState
			used  int64
			limit float64
		}{{"the input rate", s.Rate("input_tokens/60s"), 500, 6_000}, {"the output rate", s.Rate("output_tokens/60s"), 7, 6_000}, {"TPD", s.Rate("tpd"), 507, 10_000_000}} {
			want := c.limit - float64(c.used)
			if c.bk.Level < want-0.5 || c.bk.Level > want+c.bk.PerSecond*elapsed.Seconds()+0.5 {
				t.Errorf("%s holds %.1f of %.0f: charged %.1f; want the %d used", c.what, c.bk.Level, c.limit, c.limit-c.bk.Level, c.used)
			}
		}
	})
}
