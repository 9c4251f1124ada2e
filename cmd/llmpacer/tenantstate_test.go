package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/pacer"
)

// A tenant read by its key's hash, from the stored definition alone, reads
// as pacer's TenantSnapshot reads it by its id: its own rates (a bucket with
// a burst, a sliding window) and its shares, under Headroom.
func TestReadTenantAsPacerDoes(t *testing.T) {
	b := redistest.Mini(t)
	b.Mini.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()
	name := redistest.Name(t)
	cfg := pacer.Config{Name: name, KeyPrefix: "ops", Limits: pacer.Limits{TPM: 10_000, Concurrency: 4}, Headroom: 0.1, Version: 2,
		Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 100, Window: time.Minute, Burst: 7}, {Unit: pacer.Requests, Limit: 7, Window: 10 * time.Second, Sliding: true}},
		Tenants: pacer.Tenants{Share: 0.3, Rates: []pacer.Rate{
			{Unit: pacer.Tokens, Limit: 5_000, Window: time.Hour, Burst: 2_000},
			{Unit: pacer.Requests, Limit: 9, Window: 20 * time.Second, Sliding: true}}}}
	app, err := pacer.New(b.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := app.Acquire(ctx, pacer.Request{Tokens: 1_200, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Fail(ctx, classify.Verdict{Kind: classify.Transient}, nil)
	want, err := app.TenantSnapshot(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}

	op, err := pacer.Open(ctx, b.Client(t), "ops", name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := op.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	def, ok := tenantDefOf(op.Config(), s)
	if !ok {
		t.Fatal("tenantDefOf: no tenants; want the definition's")
	}
	r := reader{rdb: b.Client(t), o: options{prefix: "ops"}}
	rates, shares, err := r.readTenant(ctx, name, wire.TenantHash("acme"), def)
	if err != nil {
		t.Fatal(err)
	}
	got := pacer.Snapshot{Name: want.Name, Tenant: "acme", Time: want.Time, Rates: rates, Shares: shares}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("readTenant differs from pacer's TenantSnapshot (-pacer +llmpacer):\n%s", diff)
	}
	if len(rates) != 2 || len(shares) != 3 || rates[0].Level >= float64(rates[0].Capacity) {
		t.Errorf("readTenant = %+v, %+v; want 2 rates, the first used, and 3 shares", rates, shares)
	}

	bare, err := pacer.New(b.Client(t), pacer.Config{Name: name + "-bare", Limits: pacer.Limits{RPM: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tenantDefOf(bare.Config(), pacer.Snapshot{}); ok {
		t.Error("tenantDefOf of a budget without tenants: ok; want none")
	}
}
