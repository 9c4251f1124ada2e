package pacer_test

import (
	"context"
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
