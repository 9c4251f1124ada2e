package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// Open reads a budget's levels from its stored definition alone, as the
// process that defined it sees them, its tenants' alike, and acts on it as
// any process does.
func TestOpen(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		if b.Mini != nil {
			b.Mini.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		}
		name := redistest.Name(t)
		cfg := pacer.Config{Name: name, KeyPrefix: "ops", Limits: pacer.Limits{RPM: 100, TPM: 10_000, Concurrency: 4},
			Rates:   []pacer.Rate{{Unit: pacer.Requests, Limit: 7, Window: 10 * time.Second, Sliding: true}},
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 5_000, Window: time.Hour}}, Share: 0.5},
			Version: 3}
		app := newPacer(t, b, cfg)
		l, err := app.Acquire(ctx, pacer.Request{Tokens: 1_200, Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Fail(ctx, serverError, nil)

		op, err := pacer.Open(ctx, b.Client(t), "ops", name)
		if err != nil {
			t.Fatalf("Open = %v", err)
		}
		if op.Config().Version != 3 || op.Config().Name != name || op.Config().Limits != cfg.Limits {
			t.Errorf("Open: Version %d, Name %q, Limits %v; want 3, %q, %v", op.Config().Version, op.Config().Name, op.Config().Limits, name, cfg.Limits)
		}
		// Levels refill between the two reads on a real Redis: compare
		// them to what the fastest bucket (tpm) refills between them, and
		// everything else exactly.
		opened := snap(t, op)
		own := snap(t, app)
		approx := cmpopts.EquateApprox(0, 1+own.Rate("tpm").PerSecond*own.Time.Sub(opened.Time).Seconds())
		ignore := cmpopts.IgnoreFields(pacer.Snapshot{}, "Time", "MeanHold")
		if diff := cmp.Diff(own, opened, approx, ignore); diff != "" {
			t.Errorf("Snapshot of the opened budget differs from the app's (-app +opened):\n%s", diff)
		}

		// The opened budget reads a tenant as the app does.
		want, err := app.TenantSnapshot(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		got, err := op.TenantSnapshot(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		// It refills 1.39 tokens a second since the charge, on a real
		// Redis's clock.
		most := 3_800 + 1 + 5_000/3600.0*got.Time.Sub(l.Info().Start).Seconds()
		if len(got.Rates) != 1 || got.Rates[0].Level > most || got.Rate("tokens/3600s") != got.Rates[0] {
			t.Errorf("TenantSnapshot of the opened budget = %+v; want 5000-1200 tokens left of the tenant's rate, found by Rate", got)
		}
		// A tenant's snapshot names the budget and the tenant, and leaves
		// the budget's own fields zero.
		if got.Name != name || got.Tenant != "acme" || len(got.Shares) != 3 || got.InFlight != 0 || got.Concurrency != 0 || got.Paused != 0 || got.StoppedBy != nil {
			t.Errorf("TenantSnapshot = %+v; want Name %q, Tenant acme, 3 shares, the budget's fields zero", got, name)
		}
		if own.Tenant != "" || own.Shares != nil {
			t.Errorf("Snapshot: Tenant %q, Shares %v; want none for the budget's", own.Tenant, own.Shares)
		}
		approx = cmpopts.EquateApprox(0, 1+own.Rate("tpm").PerSecond*got.Time.Sub(want.Time).Abs().Seconds())
		if diff := cmp.Diff(want, got, approx, cmpopts.IgnoreFields(pacer.Snapshot{}, "Time")); diff != "" {
			t.Errorf("TenantSnapshot of the opened budget differs from the app's (-app +opened):\n%s", diff)
		}

		// An operator's stop through the opened budget stops the app.
		if err := op.Stop(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := app.TryAcquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrStopped) {
			t.Errorf("TryAcquire after the opened budget's Stop = %v; want ErrStopped", err)
		}
		if err := op.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if s := snap(t, app); s.Stopped != 0 {
			t.Errorf("Stopped = %v after Resume; want 0", s.Stopped)
		}
	})
}

// A budget with a HashTag is opened as "{<HashTag>}<Name>": the same keys,
// the same levels, and a pause from the opened Pacer holds the app's
// callers. Its plain name is another budget, and a tag alone opens none.
func TestOpenHashTag(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		cfg := pacer.Config{Name: name, HashTag: name + "-g", Limits: pacer.Limits{RPM: 100}, Version: 1}
		app := newPacer(t, b, cfg)
		if _, err := app.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		}
		op, err := pacer.Open(ctx, b.Client(t), "", "{"+cfg.HashTag+"}"+name)
		if err != nil {
			t.Fatalf("Open of the tagged budget = %v", err)
		}
		if diff := cmp.Diff(pacer.Keys(app), pacer.Keys(op)); diff != "" {
			t.Errorf("Keys() of the opened budget (-app +opened):\n%s", diff)
		}
		if err := op.Pause(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := snap(t, app).Paused; got < 50*time.Second {
			t.Errorf("the app's Paused = %v after a pause of a minute from the opened Pacer", got)
		}
		if _, err := pacer.Open(ctx, b.Client(t), "", name); !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "no definition") {
			t.Errorf("Open of the plain name = %v; want ErrInvalid saying no definition is stored: another budget", err)
		}
		for _, bad := range []string{"{" + cfg.HashTag + "}", "{}" + name, "{a}b}c"} {
			if _, err := pacer.Open(ctx, b.Client(t), "", bad); !errors.Is(err, pacer.ErrInvalid) {
				t.Errorf("Open(%q) = %v; want ErrInvalid", bad, err)
			}
		}
	})
}

func TestOpenRefuses(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	name := redistest.Name(t)
	app := newPacer(t, b, pacer.Config{Name: name, Limits: pacer.Limits{RPM: 10}})
	if _, err := app.TryAcquire(ctx, pacer.Request{}); err != nil {
		t.Fatal(err)
	}
	// A budget in use without a stored definition has nothing to open.
	if _, err := pacer.Open(ctx, b.Client(t), "", name); !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "no definition") ||
		!strings.Contains(err.Error(), "Pacer.Define") || !strings.Contains(err.Error(), "prefix") {
		t.Errorf("Open of an undefined budget = %v; want ErrInvalid saying none is stored, to Define it and to check the name and prefix", err)
	}
	if _, err := pacer.Open(ctx, b.Client(t), "", "a{b}"); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("Open of a name with braces = %v; want ErrInvalid", err)
	}
	b.Mini.HSet(pacer.Keys(app)[3], "v", "2", "def", `{"limits":{"RPM":-1}}`)
	if _, err := pacer.Open(ctx, b.Client(t), "", name); !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("Open of an unusable definition = %v; want ErrInvalid naming version 2", err)
	}
	if _, err := app.Define(ctx, pacer.Config{Limits: pacer.Limits{RPM: 10}}); err != nil {
		t.Fatal(err)
	}
	op, err := pacer.Open(ctx, b.Client(t), "", name)
	if err != nil {
		t.Fatal(err)
	}
	// The budget has no tenants.
	if _, err := op.TenantSnapshot(ctx, "acme"); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("TenantSnapshot on a budget without tenants = %v; want ErrInvalid", err)
	}
}

// An operator's tool reads a budget by its name alone, from the definition
// stored in Redis.
func ExampleOpen() {
	rdb, done := stillRedis()
	defer done()
	ctx := context.Background()
	// A process of the application defines the budget and uses it.
	app, _ := pacer.New(rdb, pacer.Config{Name: "openai:gpt-4o", Limits: pacer.Limits{RPM: 500, TPM: 200_000}, Version: 1})
	l, _ := app.Acquire(ctx, pacer.Request{Tokens: 30_000})
	defer l.Fail(ctx, serverError, nil)

	// The operator knows only the name.
	op, err := pacer.Open(ctx, rdb, "", "openai:gpt-4o")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := op.Snapshot(ctx)
	fmt.Printf("version %d: rpm %.0f of %d, tpm %.0f of %d\n", op.Config().Version, s.Rate("rpm").Level, s.Rate("rpm").Capacity, s.Rate("tpm").Level, s.Rate("tpm").Capacity)
	// Output:
	// version 1: rpm 499 of 500, tpm 170000 of 200000
}
