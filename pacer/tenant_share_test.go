package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// A tenant's share is over for at most about a window after its heavy use
// ends, also when settles charge it debts: settle caps the share's TAT at
// now plus twice its allowance, as acquire does. Four overruns, each a
// full share of debt, would otherwise leave it over for four windows.
func TestTenantShareDebtCapped(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 100_000},
		Tenants: pacer.Tenants{Share: 0.1}})
	c := newClock(b)
	for i := range 4 {
		l, err := p.TryAcquire(ctx, pacer.Request{Tenant: "a", Tokens: 100})
		if err != nil {
			t.Fatalf("call %d: TryAcquire = %v", i, err)
		}
		if err := l.Settle(ctx, 10_100); err != nil { // a share of debt
			t.Fatalf("call %d: Settle = %v", i, err)
		}
		c.advance(time.Millisecond)
	}
	s, err := p.TenantSnapshot(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// The share holds 10,000 tokens a minute; capped, it lies at most two
	// minutes ahead (a level of -10,000), and a little for the slack.
	share := s.Shares[0]
	if share.Level < -float64(share.Capacity)-10 {
		t.Errorf("share level after four overruns = %.0f; want at least -%d (now + 2 allowances)", share.Level, share.Capacity)
	}
	// Just over a window later the tenant is within its share again.
	c.advance(61 * time.Second)
	if s, err = p.TenantSnapshot(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if lv := s.Shares[0].Level; lv < 100 {
		t.Errorf("share level a window after the overruns = %.0f; want room for a 100-token call", lv)
	}
}

// A heavy tenant new to the budget is within its share for its part of the
// burst (or a few calls), not of the limit: past it, it leaves the floor
// to the light tenants from the first second. RPM 6,000 with a burst of
// 10, Share 0.2; the clock moves a call's refill (10 ms) a step. Each
// step the heavy tenant asks 5 calls at once, and every other step one of
// five light tenants (each within its share, at 5 a second) asks one: it
// is admitted at once, every time. Held to Share of the limit (1,200
// calls), the heavy tenant stayed within its share for its first 12 s,
// took every refill before the light ones and left them nothing.
func TestTenantNewcomerLeavesTheFloor(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // the real lanes step a real clock; each lane has its own name
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 6000, Window: time.Minute, Burst: 10}},
			Tenants: pacer.Tenants{Share: 0.2}})
		c := newClock(b)
		heavy, refused := 0, 0
		for step := range 100 {
			for range 5 {
				_, err := p.TryAcquire(ctx, pacer.Request{Tenant: "heavy"})
				switch {
				case err == nil:
					heavy++
				case errors.Is(err, pacer.ErrWaitTimeout):
				default:
					t.Fatalf("step %d: heavy TryAcquire = %v", step, err)
				}
			}
			if step%2 == 0 {
				light := fmt.Sprintf("light-%d", step/2%5)
				if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: light}); err != nil {
					refused++
					if refused <= 3 {
						t.Errorf("step %d (%d ms): %s refused beside the heavy tenant: %v", step, step*10, light, err)
					}
				}
			}
			c.advance(10 * time.Millisecond)
		}
		if refused > 0 {
			t.Errorf("%d of 50 light calls refused; want none", refused)
		}
		// The heavy tenant fills what the light ones leave: the burst and
		// about every other refill.
		if heavy < 40 {
			t.Errorf("the heavy tenant was admitted %d times in 100 steps; want at least 40 (it fills the room the light ones leave)", heavy)
		}
	})
}

// Light tenants whose calls arrive together beside a heavy tenant are all
// admitted at once: a call over its share leaves room for 8 calls like it
// (up to half the burst), not only the batch floor. RPM 6,000 with a burst
// of 12, Share 0.1: once the heavy tenant has spent its share and fills the
// budget flat out, five light tenants ask in the same instant. The batch
// floor alone (a fifth of 12 calls) left room for two of them: the other
// three waited a refill or more, and a Poisson stream of light calls met
// such bunches often enough to double its p95 wait.
func TestTenantHeavyLeavesRoomForABunch(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 6000, Window: time.Minute, Burst: 12}},
			Tenants: pacer.Tenants{Share: 0.1}})
		c := newClock(b)
		heavy := 0
		for range 60 {
			for range 3 {
				if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "heavy"}); err == nil {
					heavy++
				} else if !errors.Is(err, pacer.ErrWaitTimeout) {
					t.Fatalf("heavy TryAcquire = %v", err)
				}
			}
			c.advance(10 * time.Millisecond)
		}
		// 600 ms: the burst (12) and a refill every 10 ms (60), less the
		// room it leaves.
		if heavy < 60 {
			t.Fatalf("the heavy tenant was admitted %d times in 600 ms; want at least 60 (it fills the budget)", heavy)
		}
		for i := range 5 {
			if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: fmt.Sprintf("light-%d", i)}); err != nil {
				t.Errorf("light-%d, the %d. of five arriving together: %v; want admitted at once", i, i+1, err)
			}
		}
	})
}
