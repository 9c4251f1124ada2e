package pacer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// hourly returns a budget of n requests an hour: a real Redis refills
// none of it while a test runs.
func hourly(n int64) []pacer.Rate {
	return []pacer.Rate{{Unit: pacer.Requests, Limit: n, Window: time.Hour}}
}

// admitAll calls TryAcquire until refused and returns how many it admitted.
func admitAll(t *testing.T, p *pacer.Pacer) int {
	t.Helper()
	for n := 0; n < 1000; n++ {
		_, err := p.TryAcquire(context.Background(), pacer.Request{})
		if errors.Is(err, pacer.ErrWaitTimeout) {
			return n
		}
		if err != nil {
			t.Fatalf("TryAcquire = %v", err)
		}
	}
	t.Fatal("no refusal in 1000 calls")
	return 0
}

// A process whose Config has a version stores its definition; a process
// without one follows it, and is told.
func TestDefinitionFollowed(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		var told atomic.Int64
		told.Store(-1)
		a := newPacer(t, b, pacer.Config{Name: name, Rates: hourly(10), Version: 1})
		old := newPacer(t, b, pacer.Config{Name: name, Rates: hourly(100), Observe: func(e pacer.Event) {
			if e.Kind == pacer.Redefined {
				told.Store(e.Version)
			}
		}})
		if _, err := a.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		}
		if n := admitAll(t, old); n != 9 {
			t.Errorf("the unversioned process admitted %d; want the stored definition's 10 less the 1 taken", n)
		}
		if told.Load() != 1 || old.Config().Version != 1 {
			t.Errorf("Redefined event version %d, Version() %d; want 1 and 1", told.Load(), old.Config().Version)
		}
	})
}

// A rolling deploy: the new version wins at once, and the old process
// runs it too; an old process started later does not roll it back.
func TestDefinitionNewestWins(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		v1 := newPacer(t, b, pacer.Config{Name: name, Rates: hourly(5), Version: 1})
		if _, err := v1.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		}
		v2 := newPacer(t, b, pacer.Config{Name: name, Rates: hourly(20), Version: 2})
		if _, err := v2.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		}
		late := newPacer(t, b, pacer.Config{Name: name, Rates: hourly(5), Version: 1})
		// Version 1's call used a fifth of its hour, which is 4 of version
		// 2's 20; with version 2's own call, 15 are left.
		if n := admitAll(t, v1) + admitAll(t, late); n != 15 {
			t.Errorf("the version-1 processes admitted %d; want version 2's 20 less the 5 taken", n)
		}
		if v1.Config().Version != 2 || late.Config().Version != 2 {
			t.Errorf("versions %d and %d; want both 2", v1.Config().Version, late.Config().Version)
		}
	})
}

// Define changes the budget at runtime for every process; an older
// version is refused; an invalid definition stores nothing.
func TestDefine(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		cfg := pacer.Config{Name: redistest.Name(t), Rates: hourly(4)}
		ps := newPacers(t, b, 3, cfg)
		for range 2 {
			if _, err := ps[0].TryAcquire(ctx, pacer.Request{}); err != nil {
				t.Fatal(err)
			}
		}
		v, err := ps[1].Define(ctx, pacer.Config{Rates: hourly(10)})
		if err != nil || v != 1 {
			t.Fatalf("Define = %d, %v; want version 1", v, err)
		}
		// The hour stays half used: 5 more of 10, from any process.
		if n := admitAll(t, ps[2]) + admitAll(t, ps[0]); n != 5 {
			t.Errorf("after Define, admitted %d; want 5", n)
		}
		if _, err := ps[2].Define(ctx, pacer.Config{Rates: hourly(1), Version: 1}); !errors.Is(err, pacer.ErrSuperseded) {
			t.Errorf("Define of version 1 over 1 = %v; want ErrSuperseded", err)
		}
		if _, err := ps[2].Define(ctx, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: -1, Window: time.Hour}}}); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("Define of a negative limit = %v; want ErrInvalid", err)
		}
		if _, err := ps[2].Define(ctx, pacer.Config{Name: "another", Rates: hourly(1)}); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("Define naming another budget = %v; want ErrInvalid", err)
		}
		if v, err := ps[0].Define(ctx, pacer.Config{Rates: hourly(1000)}); err != nil || v != 2 {
			t.Fatalf("second Define = %d, %v; want version 2", v, err)
		}
		// A full hour stays full, whatever its new size.
		if n := admitAll(t, ps[1]); n != 0 {
			t.Errorf("after the second Define, admitted %d; want 0", n)
		}
	})
}

// A definition changed while many goroutines on several Pacers call:
// every Pacer ends on the new version, and the budget never admits more
// than the larger of the two limits.
func TestDefineUnderLoad(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		cfg := pacer.Config{Name: redistest.Name(t), Rates: hourly(50)}
		ps := newPacers(t, b, 4, cfg)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if _, err := ps[g%4].TryAcquire(ctx, pacer.Request{}); err == nil {
						admitted.Add(1)
					} else if !errors.Is(err, pacer.ErrWaitTimeout) {
						t.Error(err)
					}
				}
			}()
		}
		if _, err := ps[0].Define(ctx, pacer.Config{Rates: hourly(80)}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for _, p := range ps {
			_, _ = p.TryAcquire(ctx, pacer.Request{})
			if p.Config().Version != 1 {
				t.Errorf("a Pacer runs version %d; want 1", p.Config().Version)
			}
		}
		if n := admitted.Load(); n > 80 {
			t.Errorf("admitted %d; the larger limit is 80", n)
		}
	})
}

// A stored definition this library cannot use is an error that says so,
// not a silently different budget.
func TestDefinitionUnusable(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Rates: hourly(5)})
	if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
		t.Fatal(err)
	}
	d := pacer.Keys(p)[3]
	b.Mini.HSet(d, "v", "7", "def", `{"rates":[{"Unit":1,"Limit":-5,"Window":3600000000000}]}`)
	b.Mini.HSet(pacer.Keys(p)[0], "dv", "7")
	_, err := p.TryAcquire(ctx, pacer.Request{})
	if !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "version 7") {
		t.Errorf("TryAcquire on an unusable stored definition = %v; want ErrInvalid naming version 7", err)
	}
}

// A definition an older version stored with a burst for one of Limits'
// rates runs the same bucket, read back as a Rate with that Burst; one
// with the old approximate sliding window is refused, saying what to
// store instead.
func TestDefinitionStoredByAnOlderVersion(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Rates: hourly(5)})
	if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
		t.Fatal(err)
	}
	d := pacer.Keys(p)[3]
	b.Mini.HSet(d, "v", "7", "def", `{"limits":{"RPM":60,"TPM":0,"RPD":0,"TPD":0,"Concurrency":0},"burst":{"RPM":3,"TPM":0,"RPD":0,"TPD":0},"tenants":{"Rates":null,"Share":0}}`)
	b.Mini.HSet(pacer.Keys(p)[0], "dv", "7")
	admitted := 0
	for range 10 {
		if _, err := p.TryAcquire(ctx, pacer.Request{}); err == nil {
			admitted++
		}
	}
	want := []pacer.Rate{{Unit: pacer.Requests, Limit: 60, Window: time.Minute, Burst: 3}}
	if got := p.Config(); admitted != 3 || got.Limits != (pacer.Limits{}) || !slices.Equal(got.Rates, want) {
		t.Errorf("a stored burst of 3 on RPM 60: %d admitted at once, Config() Limits %+v Rates %+v; want 3, none and %+v", admitted, got.Limits, got.Rates, want)
	}
	if rs := snap(t, p).Rate("rpm"); rs.Capacity != 3 || rs.Limit != 60 {
		t.Errorf("Snapshot.Rate(rpm) = %+v; want capacity 3 of limit 60", rs)
	}

	b.Mini.HSet(d, "v", "8", "def", `{"limits":{"RPM":60,"TPM":0,"RPD":0,"TPD":0,"Concurrency":0},"burst":{"RPM":0,"TPM":0,"RPD":0,"TPD":0},"tenants":{"Rates":null,"Share":0},"sliding_window":true}`)
	b.Mini.HSet(pacer.Keys(p)[0], "dv", "8")
	_, err := p.TryAcquire(ctx, pacer.Request{})
	if !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "sliding_window") || !strings.Contains(err.Error(), "Rate.Sliding") {
		t.Errorf("TryAcquire on a stored sliding_window = %v; want ErrInvalid naming sliding_window and Rate.Sliding", err)
	}
}
