package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// BenchmarkList measures what one listing costs on the real Redis: a
// budget with 2,000 tenants, read with no tenants (the baseline), and with
// -tenant-scan 500 (the default) and 2,000.
func BenchmarkList(b *testing.B) {
	be := redistest.Real(b)
	ctx := context.Background()
	prefix := fmt.Sprintf("cmdbench%d", time.Now().UnixNano())
	p, err := pacer.New(be.Client(b), pacer.Config{Name: redistest.Name(b), KeyPrefix: prefix, Version: 1,
		Limits: pacer.Limits{RPM: 1_000_000, TPM: 100_000_000},
		// The tenants' keys last while their buckets refill: minutes, at
		// a million tokens a month.
		Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 1_000_000, Window: 30 * 24 * time.Hour}}}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 2000 {
		l, err := p.TryAcquire(ctx, pacer.Request{Tokens: int64(100 + i), Tenant: fmt.Sprint("tenant-", i)})
		if err != nil {
			b.Fatal(err)
		}
		_ = l.Settle(ctx, int64(100+i))
	}
	env := envOf(be)
	for _, scan := range []int{0, 500, 2000} {
		b.Run(fmt.Sprintf("tenant-scan=%d", scan), func(b *testing.B) {
			args := []string{"-prefix", prefix, "-json", "-tenant-scan", fmt.Sprint(max(scan, 1)), "-tenants", "5"}
			if scan == 0 {
				args[len(args)-1] = "0"
			}
			var out, errb bytes.Buffer
			for b.Loop() {
				out.Reset()
				if code := run(ctx, args, func(k string) string { return env[k] }, &out, &errb); code != exitOK {
					b.Fatalf("exit %d: %s", code, errb.String())
				}
			}
			// The listing read what it was asked to.
			var l listing
			if err := json.Unmarshal(out.Bytes(), &l); err != nil || len(l.Budgets) != 1 {
				b.Fatalf("listing = %v, %s", err, out.String())
			}
			if ts := l.Budgets[0].Tenants; scan > 0 && (ts == nil || ts.Found != 2000 || ts.Read != scan) {
				b.Fatalf("tenants = %+v; want 2000 found, %d read", ts, scan)
			}
		})
	}
}
