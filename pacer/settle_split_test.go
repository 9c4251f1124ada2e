package pacer_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// anthropicBudget is an Anthropic-style budget: input and output tokens per
// minute apart (ITPM, OTPM) and tokens per day.
func anthropicBudget(name string) pacer.Config {
	return pacer.Config{Name: name, Limits: pacer.Limits{TPD: 10_000_000},
		Rates: []pacer.Rate{
			{Unit: pacer.InputTokens, Limit: 6_000, Window: time.Minute},
			{Unit: pacer.OutputTokens, Limit: 6_000, Window: time.Minute},
		}}
}

// checkUsed fails unless bucket what, of capacity c refilling perSecond,
// holds c - used, or up to elapsed's refill more (a real Redis's clock
// runs on while the test does: at most 100 tokens a second here, where a
// dropped give-back leaves thousands charged).
func checkUsed(t *testing.T, what string, level, c, perSecond float64, used int64, elapsed time.Duration) {
	t.Helper()
	want := c - float64(used)
	if level < want-0.5 || level > want+perSecond*elapsed.Seconds()+0.5 {
		t.Errorf("%s holds %.1f of %.0f: charged %.1f; want exactly the %d used", what, level, c, c-level, used)
	}
}

// A settle whose corrections differ in sign: the prompt was undercounted
// (16 estimated, 25 used: a debt to the input rate) and the answer was
// shorter than max_tokens (300 reserved, 7 used: a give-back to the
// output rate); the day's tokens get the net. Ten such leases from two
// Pacers, settled at once in random order: each bucket ends at exactly
// what was used, not at the reservations.
func TestSettleUsageMixedSigns(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		ps := newPacers(t, b, 2, anthropicBudget(redistest.Name(t)))
		c := newClock(b)
		start := snap(t, ps[0]).Time // on the Redis clock
		const n, in, out, usedIn, usedOut = 10, 16, 300, 25, 7
		ls := make([]*pacer.Lease, n)
		for i := range ls {
			l, err := ps[i%2].TryAcquire(ctx, pacer.Request{Input: in, Output: out})
			if err != nil {
				t.Fatalf("lease %d: %v", i, err)
			}
			ls[i] = l
			// A µs apart at least: a lease's give-back is bounded by the
			// charges after it, which one µs cannot order.
			c.advance(time.Millisecond)
		}
		var wg sync.WaitGroup
		for _, i := range rand.Perm(n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := ls[i].SettleUsage(ctx, pacer.Usage{Input: usedIn, Output: usedOut}); err != nil {
					t.Errorf("lease %d: SettleUsage = %v", i, err)
				}
			}()
		}
		wg.Wait()
		s := snap(t, ps[0])
		elapsed := s.Time.Sub(start)
		if len(s.Rates) != 3 {
			t.Fatalf("Snapshot.Rates = %+v; want TPD, the input and the output rates", s.Rates)
		}
		checkUsed(t, "the input rate", s.Rates[1].Level, 6_000, s.Rates[1].PerSecond, n*usedIn, elapsed)
		checkUsed(t, "the output rate", s.Rates[2].Level, 6_000, s.Rates[2].PerSecond, n*usedOut, elapsed)
		checkUsed(t, "TPD", s.Rate("tpd").Level, float64(s.Rate("tpd").Capacity), s.Rate("tpd").PerSecond, n*(usedIn+usedOut), elapsed)
	})
}
