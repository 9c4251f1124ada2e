package pacer_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// A quota stop refuses every process at once, sending nothing and charging
// nothing, until a probe goes through and succeeds.
func TestQuotaStopAndProbe(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // the real lanes sleep out two probe intervals each, side by side
		ctx := context.Background()
		// On a real Redis the clock runs: the refusals must come before
		// the probe is due, however loaded the machine.
		probe := 300 * time.Millisecond
		if b.Mini == nil {
			probe = 2 * time.Second
		}
		ps := newPacers(t, b, 2, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100, TPM: 10000}, QuotaProbe: probe})
		c := newClock(b)
		// A call answered insufficient_quota stops every process, for the
		// provider's reset (here an hour), through its lease's Fail.
		quota := classify.Verdict{Kind: classify.QuotaExhausted, Status: 429, Code: "insufficient_quota", RetryAfter: time.Hour}
		first, err := ps[0].Acquire(ctx, pacer.Request{Tokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Fail(ctx, quota, nil); err != nil {
			t.Fatalf("Fail(quota) = %v", err)
		}
		if first.Info().State != pacer.Rejected {
			t.Errorf("the quota-refused lease ended %v; want rejected", first.Info().State)
		}
		for i, p := range ps {
			began := time.Now()
			_, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
			var se *pacer.RefusedError
			if !errors.As(err, &se) || !errors.Is(err, pacer.ErrQuotaExhausted) || !errors.Is(err, pacer.ErrStopped) {
				t.Fatalf("pacer %d: Acquire while stopped = %v; want a *RefusedError matching ErrStopped matching ErrQuotaExhausted", i, err)
			}
			if se.Limit != "" || !errors.Is(se, pacer.ErrQuotaExhausted) || retryAfter(se) <= 0 || retryAfter(se) > probe {
				t.Errorf("pacer %d: %+v; want no limit, ErrQuotaExhausted and RetryAfter in (0, %v]", i, *se, probe)
			}
			if took := time.Since(began); took > 2*time.Second {
				t.Errorf("pacer %d: Acquire took %v to refuse; want at once", i, took)
			}
			if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100}); !errors.Is(err, pacer.ErrStopped) || errors.Is(err, pacer.ErrWaitTimeout) {
				t.Errorf("pacer %d: TryAcquire while stopped = %v; want a *RefusedError matching ErrStopped, not ErrWaitTimeout", i, err)
			}
		}
		s := snap(t, ps[1])
		if s.StoppedBy != pacer.ErrQuotaExhausted || s.Stopped < 59*time.Minute {
			t.Errorf("Snapshot: Stopped %v by %v; want about an hour by quota", s.Stopped, s.StoppedBy)
		}
		if s.Rate("tpm").Level != 10000 || s.Rate("rpm").Level < 99-levelEps || s.Rate("rpm").Level > 100 {
			t.Errorf("levels after refusals: RPM %v TPM %v; want TPM full and RPM 99: the quota-refused call counted as a request only, the refusals nothing", s.Rate("rpm").Level, s.Rate("tpm").Level)
		}

		// The probe interval passes: one call goes through, the next is
		// refused until the one after.
		c.advance(probe + 50*time.Millisecond)
		l, err := ps[1].Acquire(ctx, pacer.Request{Tokens: 100})
		if err != nil {
			t.Fatalf("Acquire when the probe is due = %v; want the probe admitted", err)
		}
		if _, err := ps[0].Acquire(ctx, pacer.Request{Tokens: 100}); !errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Fatalf("a second call right after the probe = %v; want it refused", err)
		}
		// The probe failed for the quota again: its Fail stops the budget
		// again.
		if err := l.Fail(ctx, quota, nil); err != nil {
			t.Fatal(err)
		}
		c.advance(probe + 50*time.Millisecond)
		l, err = ps[0].Acquire(ctx, pacer.Request{Tokens: 100})
		if err != nil {
			t.Fatalf("the next probe = %v; want it admitted", err)
		}
		// This one succeeds: settling it resumes the budget everywhere.
		if err := l.Settle(ctx, 50); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for snap(t, ps[1]).Stopped != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the budget is still stopped 5 s after its probe was settled")
			}
			time.Sleep(5 * time.Millisecond)
		}
		for i, p := range ps {
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
			if err != nil {
				t.Fatalf("pacer %d: Acquire after the probe succeeded = %v", i, err)
			}
			_ = l.Settle(ctx, 100)
		}
	})
}

// An operator's stop refuses calls with ErrStopped (not a quota error), lets
// no probe through, and Resume ends it for every process.
func TestStopAndResume(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		ps := newPacers(t, b, 2, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100, Concurrency: 2}})
		c := newClock(b)
		if err := ps[0].Stop(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		c.advance(2 * time.Minute / 60) // any time: no probes
		_, err := ps[1].Acquire(ctx, pacer.Request{})
		if !errors.Is(err, pacer.ErrStopped) || errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Fatalf("Acquire while stopped by an operator = %v; want ErrStopped and not ErrQuotaExhausted", err)
		}
		if s := snap(t, ps[1]); s.StoppedBy != pacer.ErrStopped || s.InFlight != 0 {
			t.Errorf("Snapshot: stopped by %v, %d in flight; want %v and none", s.StoppedBy, s.InFlight, pacer.ErrStopped)
		}
		if err := ps[1].Resume(ctx); err != nil {
			t.Fatal(err)
		}
		l, err := ps[0].Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatalf("Acquire after Resume = %v", err)
		}
		_ = l.Settle(ctx, 0)
	})
}

// Bad stops are refused with ErrInvalid, and change nothing.
func TestStopInvalid(t *testing.T) {
	b := redistest.Mini(t)
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 10}})
	ctx := context.Background()
	for _, err := range []error{
		p.Stop(ctx, 0), p.Stop(ctx, -time.Second), p.Stop(ctx, 8*24*time.Hour),
	} {
		if !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("got %v; want ErrInvalid", err)
		}
	}
	if s := snap(t, p); s.Stopped != 0 {
		t.Errorf("stopped %v after only invalid stops", s.Stopped)
	}
	for _, probe := range []time.Duration{-time.Second, time.Microsecond, 8 * 24 * time.Hour} {
		cfg := pacer.Config{Name: "quota-probe", Limits: pacer.Limits{RPM: 10}, QuotaProbe: probe}
		if _, err := pacer.New(b.Client(t), cfg); !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "QuotaProbe") {
			t.Errorf("New with QuotaProbe %v = %v; want ErrInvalid naming the field", probe, err)
		}
	}
}

// Sync lowers a bucket to the room the provider reports, less the
// headroom, and never raises one.
func TestSyncLowersToTheProvidersRoom(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100, TPM: 10000}, Headroom: 0.1})
		newClock(b) // a still clock on miniredis
		near := func(what string, got, want float64) {
			t.Helper()
			// A real Redis refills while the test runs: at 150 tokens/s
			// (and 1.5 requests/s), a tolerance of 300 leaves 2 s.
			if math.Abs(got-want) > 300 {
				t.Errorf("%s = %.1f; want %.0f", what, got, want)
			}
		}
		rl := classify.RateLimits{
			Requests: classify.Window{Remaining: 40, HasRemaining: true},
			Tokens:   classify.Window{Remaining: 4000, HasRemaining: true},
		}
		if err := p.Sync(ctx, rl); err != nil {
			t.Fatalf("Sync = %v", err)
		}
		s := snap(t, p)
		// Headroom 0.1 keeps 10 requests and 1000 tokens unused.
		near("RPM level", s.Rate("rpm").Level, 30)
		near("TPM level", s.Rate("tpm").Level, 3000)

		// More room reported than the budget believes: nothing changes.
		rl.Tokens.Remaining, rl.Requests.Remaining = 10000, 100
		if err := p.Sync(ctx, rl); err != nil {
			t.Fatal(err)
		}
		s2 := snap(t, p)
		if s2.Rate("tpm").Level > s.Rate("tpm").Level+300 || s2.Rate("rpm").Level > s.Rate("rpm").Level+3 {
			t.Errorf("Sync with more room raised the budget: TPM %.0f -> %.0f, RPM %.1f -> %.1f", s.Rate("tpm").Level, s2.Rate("tpm").Level, s.Rate("rpm").Level, s2.Rate("rpm").Level)
		}

		// Nothing left: the next call waits for the refill.
		rl.Tokens.Remaining = 0
		if err := p.Sync(ctx, rl); err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1000}); !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Errorf("TryAcquire after the provider reported no tokens = %v; want ErrWaitTimeout", err)
		}
		near("TPM level after remaining 0", snap(t, p).Rate("tpm").Level, 0)
	})
}

// Sync without a window the budget limits makes no Redis call: it succeeds
// even with Redis gone.
func TestSyncWithNothingToLower(t *testing.T) {
	b := redistest.Mini(t)
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPD: 100}})
	b.Mini.Close()
	rl := classify.RateLimits{Tokens: classify.Window{Remaining: 5, HasRemaining: true}}
	if err := p.Sync(context.Background(), rl); err != nil {
		t.Errorf("Sync of a window the budget does not limit = %v; want nil, no call", err)
	}
}

// An operator's stop is never turned into a quota stop, nor lifted by a
// probe: a StopQuota meanwhile only extends it.
func TestOperatorStopOutlivesQuotaMachinery(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		ps := newPacers(t, b, 2, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100}})
		c := newClock(b)
		const probe = 200 * time.Millisecond
		// A probe admitted under a quota stop...
		if err := pacer.StopQuota(ctx, ps[0], time.Hour, probe); err != nil {
			t.Fatal(err)
		}
		c.advance(probe + 50*time.Millisecond)
		l, err := ps[1].Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatalf("the probe = %v", err)
		}
		// ... then an operator stops the budget, and the transport meets
		// another quota error.
		if err := ps[0].Stop(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := pacer.StopQuota(ctx, ps[0], time.Hour, probe); err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, 0); err != nil { // the probe succeeds
			t.Fatal(err)
		}
		c.advance(probe + 50*time.Millisecond)
		time.Sleep(100 * time.Millisecond) // the probe's resume runs in the background
		_, err = ps[1].Acquire(ctx, pacer.Request{})
		if !errors.Is(err, pacer.ErrStopped) || errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Fatalf("Acquire after a probe succeeded under an operator's stop = %v; want ErrStopped, not a quota error", err)
		}
		if s := snap(t, ps[0]); s.StoppedBy != pacer.ErrStopped {
			t.Errorf("stopped by %v; want the operator's stop", s.StoppedBy)
		}
		if err := ps[0].Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := ps[1].Acquire(ctx, pacer.Request{}); err != nil {
			t.Errorf("Acquire after Resume = %v", err)
		}
	})
}

// A call that reserved its turn before a stop does not go at its turn:
// it learns of the stop then, and its tokens go back.
func TestStopReachesReservedTurns(t *testing.T) {
	t.Parallel()
	b := redistest.Mini(t)
	ctx := context.Background()
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{TPM: 600}})
	newClock(b)
	if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 600}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		// A turn 3 s ahead: time enough to stop the budget first, however
		// loaded the machine.
		_, err := p.Acquire(ctx, pacer.Request{Tokens: 30})
		errc <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for snap(t, p).Rate("tpm").Level > -1 { // the turn is reserved
		if time.Now().After(deadline) {
			t.Fatal("the call reserved no turn")
		}
		time.Sleep(time.Millisecond)
	}
	if err := pacer.StopQuota(ctx, p, time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Fatalf("the reserved call at its turn = %v; want ErrQuotaExhausted", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the reserved call did not return")
	}
	deadline = time.Now().Add(5 * time.Second)
	for snap(t, p).Rate("tpm").Level < -0.5 { // its 30 tokens come back
		if time.Now().After(deadline) {
			t.Fatalf("TPM level %.1f; want the reserved turn given back", snap(t, p).Rate("tpm").Level)
		}
		time.Sleep(time.Millisecond)
	}
}

// A stop wins over a pause: a budget paused and then stopped refuses with
// the stop, at once, on TryAcquire and on a waiting Acquire alike, and a
// quota stop's probe does not go through a pause. A caller that fails fast
// on ErrStopped must not be told to wait the pause out.
func TestStopWinsOverPause(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		ps := newPacers(t, b, 2, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100}})
		c := newClock(b)
		if err := ps[0].Pause(ctx, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := ps[0].Stop(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		_, err := ps[1].TryAcquire(ctx, pacer.Request{Tokens: 1})
		var se *pacer.RefusedError
		if !errors.Is(err, pacer.ErrStopped) || !errors.As(err, &se) || se.Limit != "" || errors.Is(err, pacer.ErrQuotaExhausted) {
			t.Fatalf("TryAcquire on a paused, then stopped budget = %v; want a *RefusedError matching ErrStopped by the operator's stop", err)
		}
		began := time.Now()
		if _, err := ps[1].Acquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrStopped) {
			t.Fatalf("Acquire on a paused, then stopped budget = %v; want ErrStopped", err)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("Acquire took %v to learn of the stop; want it at once, not after the pause", took)
		}

		// A quota stop whose probe is due: the pause still holds the probe
		// back, and the answer is the stop, due again when the pause ends.
		if err := ps[0].Resume(ctx); err != nil {
			t.Fatal(err)
		}
		probe := 200 * time.Millisecond
		if err := pacer.StopQuota(ctx, ps[0], time.Hour, probe); err != nil {
			t.Fatal(err)
		}
		c.advance(probe + probe/2)
		l, err := ps[1].TryAcquire(ctx, pacer.Request{Tokens: 1})
		if !errors.Is(err, pacer.ErrStopped) || !errors.As(err, &se) || se.Limit != "" || !errors.Is(err, pacer.ErrQuotaExhausted) {
			if l != nil {
				_ = l.Settle(ctx, 0)
			}
			t.Fatalf("TryAcquire on a paused budget whose quota probe is due = %v; want a *RefusedError matching ErrStopped by the quota, no probe", err)
		}
		if retryAfter(se) < 15*time.Second {
			t.Errorf("RetryAfter %v; want the pause's end (about 20 s), when the probe may go", retryAfter(se))
		}
	})
}

// A Group whose deployments are all paused and stopped answers with the
// stop, not the pause's wait, on both paths.
func TestGroupStopWinsOverPause(t *testing.T) {
	eachPath(t, func(t *testing.T, b redistest.Backend, split bool) {
		ctx := context.Background()
		ps := deployments(t, b.Client(t), redistest.Name(t),
			pacer.Config{Limits: pacer.Limits{RPM: 100}}, pacer.Config{Limits: pacer.Limits{RPM: 100}})
		for _, p := range ps {
			if err := p.Pause(ctx, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := p.Stop(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		g := newGroup(t, pacer.FillInOrder, split, ps...)
		if _, _, err := g.TryAcquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrStopped) {
			t.Fatalf("Group.TryAcquire with every deployment paused and stopped = %v; want ErrStopped", err)
		}
		began := time.Now()
		if _, _, err := g.Acquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrStopped) {
			t.Fatalf("Group.Acquire with every deployment paused and stopped = %v; want ErrStopped", err)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("Group.Acquire took %v to learn of the stop; want it at once", took)
		}
	})
}
