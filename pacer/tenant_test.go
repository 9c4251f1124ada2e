package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A tenant inside a budget: the tenant empty holds its calls back while the
// budget has room; the budget empty holds every tenant back; a refusal
// charges neither. The budget's 10,000 are an hour's, so that its refill
// (3 tokens a second) cannot add the last call's 50 while a loaded
// machine runs the test on a real Redis's clock.
func TestTenantAllOrNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		cfg := pacer.Config{
			Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 10_000, Window: time.Hour}},
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 3000, Window: time.Hour}}},
		}
		p := newPacer(t, b, cfg)
		newClock(b)
		if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "a", Tokens: 3000}); err != nil {
			t.Fatalf("tenant a's first 3,000 = %v", err)
		}
		ny := notYet(t, "tenant a past its hour", func() error { _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "a", Tokens: 100}); return err }())
		if ny.Limit != "@tokens/3600s" || retryAfter(ny) < 100*time.Second {
			t.Errorf("%+v; want tenant a's hourly rate, about 2 minutes", *ny)
		}
		// Tenant b has its own hour, and the budget 7,000 left.
		if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "b", Tokens: 3000}); err != nil {
			t.Fatalf("tenant b = %v", err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 3500}); err != nil {
			t.Fatalf("the budget alone = %v", err)
		}
		// 500 left in the budget: tenant c, with 3,000 of its own, is held
		// back by the budget, and charged nothing.
		ny = notYet(t, "tenant c on an empty budget", func() error { _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "c", Tokens: 1000}); return err }())
		if ny.Limit != "tokens/3600s" {
			t.Errorf("limit %q; want the budget's tokens/3600s", ny.Limit)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "c", Tokens: 500}); err != nil {
			t.Fatalf("tenant c's 500 = %v; its refused 1,000 must not have been charged", err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "c", Tokens: 50}); err == nil {
			t.Fatalf("the budget gave more than its 10,000")
		}
	})
}

// A tenant's settle corrects its own buckets: unused tokens come back to
// the tenant as well as the budget.
func TestTenantSettleRefunds(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{
			Name: redistest.Name(t), Limits: pacer.Limits{TPD: 1_000_000},
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 1000, Window: 24 * time.Hour}}},
		})
		newClock(b)
		l, err := p.TryAcquire(ctx, pacer.Request{Tenant: "t", Tokens: 800})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, 100); err != nil {
			t.Fatal(err)
		}
		// 900 left of the tenant's day: within a token or two of rounding.
		if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "t", Tokens: 895}); err != nil {
			t.Fatalf("after a settle of 100 of 800, 895 more = %v; want the 700 back", err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "t", Tokens: 10}); err == nil {
			t.Fatalf("the tenant's day gave more than 1,000")
		}
		// A debt: the tenant's overrun is charged to it.
		l, err = p.TryAcquire(ctx, pacer.Request{Tenant: "u", Tokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, 700); err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "u", Tokens: 310}); err == nil {
			t.Fatalf("tenant u used 700 and still got 310 of its 1,000")
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "u", Tokens: 295}); err != nil {
			t.Fatalf("tenant u's last 295 = %v", err)
		}
	})
}

// Hostile tenant ids never share state with each other or the budget, and
// every tenant key stays in the budget's hash tag.
func TestTenantHostileIDs(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{
			Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 1000, Window: time.Hour}},
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 1, Window: time.Hour}}},
		})
		newClock(b)
		ids := []string{
			"a", "a ", "A", "{x}", "}{", "a}:s", "\n", "a\nb", "a\x00", "\u0430", // Cyrillic a
			"ＡＢＣ", "ABC", strings.Repeat("z", 10_000), strings.Repeat("z", 10_001), ":t:", "*", "?",
		}
		tag := pacer.Keys(p)[0][:strings.Index(pacer.Keys(p)[0], "}")+1]
		seen := map[string]string{}
		for _, id := range ids {
			k := pacer.TenantKey(p, id)
			if !strings.HasPrefix(k, tag+":t:") || len(k) != len(tag)+3+32 {
				t.Errorf("TenantKey(%.20q) = %q; want %s:t: and 32 hex digits", id, k, tag)
			}
			if other, dup := seen[k]; dup {
				t.Errorf("ids %.20q and %.20q share key %s", id, other, k)
			}
			seen[k] = id
			if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: id}); err != nil {
				t.Errorf("tenant %.20q's first call = %v; another id's call must not count against it", id, err)
			}
		}
		if b.Kind == "cluster" {
			// Every tenant's hash lives in the budget's slot: one script
			// reaches them all.
			rdb := b.Client(t).(*redis.ClusterClient)
			want, err := rdb.ClusterKeySlot(ctx, pacer.Keys(p)[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			for k := range seen {
				if got, _ := rdb.ClusterKeySlot(ctx, k).Result(); got != want {
					t.Errorf("tenant key %s is in slot %d; the budget's is %d", k, got, want)
				}
			}
		}
		for _, id := range ids {
			if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: id}); !errors.Is(err, pacer.ErrWaitTimeout) {
				t.Errorf("tenant %.20q's second call = %v; want ErrWaitTimeout (1 an hour)", id, err)
			}
		}
		s := snap(t, p)
		if got := 1000 - s.Rates[0].Level; got < float64(len(ids))-0.5 || got > float64(len(ids))+0.5 {
			t.Errorf("the budget counted %.1f calls; want the %d admitted", got, len(ids))
		}
	})
}

// Bad tenant configuration and requests are refused with what to do.
func TestTenantInvalid(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 10}})
	if _, err := p.TryAcquire(ctx, pacer.Request{Tenant: "x"}); !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "Config.Tenants") {
		t.Errorf("a tenant on a budget without tenants = %v; want ErrInvalid naming Config.Tenants", err)
	}
	for _, tc := range []pacer.Tenants{
		{Share: -0.1}, {Share: 1.5},
		{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 0, Window: time.Minute}}},
		{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 10, Window: time.Minute}, {Unit: pacer.Tokens, Limit: 20, Window: time.Minute}}},
		{Rates: []pacer.Rate{{Unit: pacer.Spend, Limit: 10, Window: time.Hour}}},
	} {
		_, err := pacer.New(b.Client(t), pacer.Config{Name: "x", Limits: pacer.Limits{RPM: 10}, Tenants: tc})
		if !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "Tenants") {
			t.Errorf("Tenants %+v: New = %v; want ErrInvalid naming Config.Tenants", tc, err)
		}
	}
	tp := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 10},
		Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 100, Window: time.Minute}}}})
	if _, err := tp.TryAcquire(ctx, pacer.Request{Tenant: strings.Repeat("x", 70_000)}); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("a 70 kB tenant id = %v; want ErrInvalid", err)
	}
	if _, err := tp.TryAcquire(ctx, pacer.Request{Tenant: "x", Tokens: 101}); !errors.Is(err, pacer.ErrTooLarge) {
		t.Errorf("101 tokens on a tenant's 100 = %v; want ErrTooLarge", err)
	}
}

// Many goroutines on several Pacers, many tenants: no tenant and not the
// budget ever admits more than its limit. Budget 40 requests an hour,
// each tenant 6: 8 tenants want 10 each.
func TestTenantsNeverOversubscribe(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		cfg := pacer.Config{
			Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 40, Window: time.Hour}},
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 6, Window: time.Hour}}},
		}
		ps := newPacers(t, b, 4, cfg)
		newClock(b)
		var per [8]atomic.Int64
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5 {
					tenant := (g + i) % 8
					_, err := ps[g%4].TryAcquire(ctx, pacer.Request{Tenant: fmt.Sprint("tenant-", tenant)})
					switch {
					case err == nil:
						per[tenant].Add(1)
					case !errors.Is(err, pacer.ErrWaitTimeout):
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		total := int64(0)
		for i := range per {
			n := per[i].Load()
			total += n
			// A real Redis refills a little while the test runs: 6 an hour
			// is one per 10 minutes, never within the test.
			if n > 6 {
				t.Errorf("tenant %d admitted %d; its limit is 6", i, n)
			}
		}
		if total > 40 || total < 40 {
			t.Errorf("admitted %d in all; want exactly the budget's 40 (8 tenants × 6 = 48 wanted past it)", total)
		}
	})
}

// An idle tenant's hash expires on its own: a hundred thousand tenants do
// not fill Redis.
func TestTenantKeysExpire(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 1000},
		Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 10, Window: time.Minute}}, Share: 0.5}})
	newClock(b)
	l, err := p.TryAcquire(ctx, pacer.Request{Tenant: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	k := pacer.TenantKey(p, "idle")
	ttl := b.Mini.TTL(k)
	if ttl <= 0 || ttl > 2*time.Minute {
		t.Fatalf("tenant key TTL %v; want set, within a couple of minutes", ttl)
	}
	b.Mini.FastForward(ttl + time.Second)
	if b.Mini.Exists(k) {
		t.Errorf("tenant key %s outlived its TTL", k)
	}
}

// A tenant over its share never reserves a turn ahead of a tenant within
// it. The budget is drained; a heavy tenant (each call 5 times its share)
// starts to wait for 500 tokens; a light tenant asking 50 after it is
// served in about the 0.25 s its own tokens take to refill, not behind the
// heavy call's 2.5 s. The heavy call is served after it. (At five times
// the pace, 1,000 tokens a second, a stall of half a second let the heavy
// call ask again first.)
func TestTenantOverShareYields(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // each waits out the heavy call, side by side
		ctx := context.Background()
		waiting := make(chan struct{}, 1)
		cfg := pacer.Config{
			Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 1000, Window: 5 * time.Second}},
			Tenants: pacer.Tenants{Share: 0.1},
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Waiting && e.Tokens == 500 {
					select {
					case waiting <- struct{}{}:
					default:
					}
				}
			},
		}
		p := newPacer(t, b, cfg)
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1000}); err != nil {
			t.Fatal(err)
		}
		heavy := make(chan pacer.LeaseInfo, 1)
		go func() {
			l, err := p.Acquire(ctx, pacer.Request{Tenant: "heavy", Tokens: 500, MaxWait: 30 * time.Second})
			if err != nil {
				t.Error(err)
				heavy <- pacer.LeaseInfo{}
				return
			}
			heavy <- l.Info()
		}()
		<-waiting
		l, err := p.Acquire(ctx, pacer.Request{Tenant: "light", Tokens: 50, MaxWait: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// Read on the Redis clock, which a loaded machine does not bend:
		// the light call's turn comes about 0.25 s after the bucket had
		// room for it, before the heavy call's (2.5 s or more out). Behind a
		// reserved heavy turn it would come after it.
		light := l.Info().Start
		if h := <-heavy; !light.Before(h.Start) {
			t.Errorf("the light tenant's turn %v is not before the heavy one's %v: the heavy tenant over its share reserved ahead of it", light, h.Start)
		}
	})
}

// Tenants returns a copy: a caller that changes it changes nothing in the
// Pacer.
func TestTenantsReturnsCopy(t *testing.T) {
	b := redistest.Mini(t)
	hour := pacer.Rate{Unit: pacer.Tokens, Limit: 3000, Window: time.Hour}
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 10_000},
		Tenants: pacer.Tenants{Rates: []pacer.Rate{hour}, Share: 0.5}})
	got := p.Config().Tenants
	got.Rates[0].Limit = 1
	got.Rates = append(got.Rates[:0], pacer.Rate{Unit: pacer.Requests, Limit: 2, Window: time.Second})
	if again := p.Config().Tenants; len(again.Rates) != 1 || again.Rates[0] != hour {
		t.Errorf("Tenants().Rates after the caller changed its copy = %+v; want [%+v]", again.Rates, hour)
	}
}
