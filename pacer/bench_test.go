package pacer_test

import (
	"context"
	"testing"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// BenchmarkAcquireSettle measures one admission and its settle, against
// miniredis and a real Redis, beside a trivial script on the same client as
// the baseline: compare the two ns/op of each backend, not across machines.
// storm/redisbench reports the full set of figures (docs/results.md).
func BenchmarkAcquireSettle(b *testing.B) {
	for _, be := range []struct {
		name string
		get  func(testing.TB) redistest.Backend
	}{{"miniredis", redistest.Mini}, {"redis", redistest.Real}} {
		b.Run(be.name+"/trivial", func(b *testing.B) {
			rdb := be.get(b).Client(b)
			s := redis.NewScript("return 1")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Run(ctx, rdb, []string{"x"}).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/acquire+settle", func(b *testing.B) {
			bk := be.get(b)
			p, err := pacer.New(bk.Client(b), pacer.Config{Name: redistest.Name(b), Limits: pacer.Limits{RPM: 1 << 40, TPM: 1 << 45, Concurrency: 1 << 30}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100})
				if err != nil || l == nil {
					b.Fatal(l, err)
				}
				if err := l.Settle(ctx, 60); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
