package pacer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// record keeps the events a budget emits.
type record struct {
	mu     sync.Mutex
	events []pacer.Event
}

func (r *record) observe(e pacer.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *record) of(kind pacer.EventKind) []pacer.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pacer.Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitFor polls cond for up to 5 s: for what Fail does in the background.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
	}
}

var rateLimited = classify.Verdict{Kind: classify.RateLimited, Status: 429, Limit: classify.LimitRequests, RetryAfter: 2 * time.Second}

// A 429 handed to Fail ends the lease released, pauses every process
// once, and reports the failure in the lease's Ended event; a second Fail
// does nothing: no event, no second pause.
func TestFailPausesTheFleetOnce(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	rec := &record{}
	ps := newPacers(t, b, 2, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 60}, Observe: rec.observe})
	newClock(b)
	l, err := ps[0].Acquire(ctx, pacer.Request{Tokens: 10, Priority: pacer.Batch})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("429 Too Many Requests")
	if err := l.Fail(ctx, rateLimited, boom); err != nil {
		t.Fatalf("Fail = %v", err)
	}
	if s := snap(t, ps[1]); s.Paused < 1900*time.Millisecond || s.Rate("rpm").Level > 1 {
		t.Errorf("the other process's budget: paused %v, rpm %.1f; want paused 2s, rpm lowered to hold one request when it ends", s.Paused, s.Rate("rpm").Level)
	}
	if err := l.Fail(ctx, rateLimited, boom); err != nil {
		t.Errorf("second Fail = %v; want nil", err)
	}
	ended, paused := rec.of(pacer.Ended), rec.of(pacer.Paused)
	if len(ended) != 1 || ended[0].End != pacer.Released || ended[0].Verdict != rateLimited || !errors.Is(ended[0].Err, boom) || ended[0].Priority != pacer.Batch {
		t.Errorf("Ended events = %+v; want one, released, with the verdict, the call's error and its priority", ended)
	}
	if len(paused) != 1 || !paused[0].Throttled || paused[0].Limit != "rpm" {
		t.Errorf("Paused events = %+v; want one, throttled, on rpm", paused)
	}
}

// A caller whose context is done still tells the fleet: the pause goes
// out in the background, and the lease ends there too.
func TestFailWithDoneContextStillPauses(t *testing.T) {
	b := redistest.Mini(t)
	rec := &record{}
	ps := newPacers(t, b, 2, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 60}, Observe: rec.observe})
	newClock(b)
	l, err := ps[0].Acquire(context.Background(), pacer.Request{Tokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = l.Fail(ctx, rateLimited, context.Canceled) // its end is retried in the background
	waitFor(t, "the pause of a Fail whose context was done", func() bool { return snap(t, ps[1]).Paused > 0 })
	waitFor(t, "the end of a Fail whose context was done", func() bool { return l.Info().State == pacer.Released })
}

// An exhausted quota rejects the lease (its tokens back) and stops every
// process, for classify's longest wait when the verdict names none.
func TestFailQuotaStopsTheFleet(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	ps := newPacers(t, b, 2, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 60, TPM: 1000}, QuotaProbe: time.Hour})
	newClock(b)
	l, err := ps[0].Acquire(ctx, pacer.Request{Tokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fail(ctx, classify.Verdict{Kind: classify.QuotaExhausted, Status: 429}, nil); err != nil {
		t.Fatal(err)
	}
	s := snap(t, ps[1])
	if l.Info().State != pacer.Rejected || s.Rate("tpm").Level != 1000 {
		t.Errorf("lease %v, tpm %.0f; want rejected, its tokens back", l.Info().State, s.Rate("tpm").Level)
	}
	if !errors.Is(s.StoppedBy, pacer.ErrQuotaExhausted) || s.Stopped < classify.MaxRetryAfter-time.Minute {
		t.Errorf("stopped %v by %v; want about %v by the quota", s.Stopped, s.StoppedBy, classify.MaxRetryAfter)
	}
	if _, err := ps[1].TryAcquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrQuotaExhausted) {
		t.Errorf("the other process's call = %v; want ErrQuotaExhausted", err)
	}
}

// A shadow lease the budget never counted still reports its failure (with
// no tokens: nothing was counted), and its 429 still pauses the budget, as
// it did when callers paused it themselves.
func TestFailShadowLease(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	rec := &record{}
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 1}, Shadow: true, Observe: rec.observe})
	newClock(b)
	if _, err := p.Acquire(ctx, pacer.Request{Tokens: 10}); err != nil {
		t.Fatal(err)
	}
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
	if err != nil || !l.Info().Shadow {
		t.Fatalf("second Acquire = %v, %v; want a shadow lease", l, err)
	}
	if err := l.Fail(ctx, rateLimited, nil); err != nil {
		t.Fatal(err)
	}
	ended := rec.of(pacer.Ended)
	if len(ended) != 1 || ended[0].Verdict != rateLimited || ended[0].Tokens != 0 || ended[0].Used != 0 || l.Info().State != pacer.Released {
		t.Errorf("Ended events %+v, state %v; want one, with the verdict and no tokens, released", ended, l.Info().State)
	}
	if s := snap(t, p); s.Paused <= 0 {
		t.Errorf("a shadow budget after a 429: paused %v; want paused", s.Paused)
	}
	// A failure nothing is known of (pacerhttp's handler ends the leases
	// its handlers leave open so) reports nothing for a shadow lease.
	quiet, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
	if err != nil || !quiet.Info().Shadow {
		t.Fatalf("third Acquire = %v, %v; want a shadow lease", quiet, err)
	}
	if err := quiet.Fail(ctx, classify.Verdict{}, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.of(pacer.Ended)); n != 1 {
		t.Errorf("%d Ended events after a shadow lease failed with no verdict; want still 1", n)
	}
}

// A lease admitted locally while Redis is down ends locally; the pause
// cannot reach Redis, and Fail says so.
func TestFailLocalLease(t *testing.T) {
	p, k, b := outagePacer(t, pacer.Config{Limits: pacer.Limits{RPM: 600}, Outage: pacer.Outage{FailOpen: []string{"rpm"}, Replicas: 1}})
	ctx := context.Background()
	b.Mini.Close()
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 10, MaxWait: 5 * time.Second})
	if err != nil || !l.Info().Local {
		t.Fatalf("Acquire with Redis down = %v, %v; want a local lease", l, err)
	}
	err = l.Fail(ctx, rateLimited, nil)
	if !errors.Is(err, pacer.ErrUnavailable) || l.Info().State != pacer.Released {
		t.Errorf("Fail of a local lease = %v, state %v; want ErrUnavailable (no pause without Redis), released", err, l.Info().State)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var ended []pacer.Event
	for _, e := range k.events {
		if e.Kind == pacer.Ended {
			ended = append(ended, e)
		}
	}
	if len(ended) != 1 || !ended[0].Local || ended[0].Verdict != rateLimited {
		t.Errorf("Ended events %+v; want one, local, with the verdict", ended)
	}
}

// In a group, Fail pauses the deployment whose lease it ends, not the
// others.
func TestFailPausesItsDeployment(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	ps := deployments(t, b.Client(t), redistest.Name(t), pacer.Config{Limits: pacer.Limits{RPM: 60}}, pacer.Config{Limits: pacer.Limits{RPM: 60}})
	g := newGroup(t, pacer.FillInOrder, false, ps...)
	l, p, err := g.Acquire(ctx, pacer.Request{Tokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fail(ctx, rateLimited, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range ps {
		if paused := snap(t, d).Paused > 0; paused != (d == p) {
			t.Errorf("deployment %p paused %v; want only the lease's own (%p)", d, paused, p)
		}
	}
}

// A lease whose Fail could not reach Redis before it expired still
// reports the failure: expired, with the verdict.
func TestFailReportedWhenTheEndNeverLands(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	rec := &record{}
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 60}, LeaseTTL: 300 * time.Millisecond, Observe: rec.observe})
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	b.Mini.Close()
	verdict := classify.Verdict{Kind: classify.Transient, Status: 502}
	if err := l.Fail(ctx, verdict, nil); err == nil {
		t.Fatal("Fail with Redis gone = nil; want its error")
	}
	waitFor(t, "the lapsed lease's Ended event", func() bool { return len(rec.of(pacer.Ended)) > 0 })
	e := rec.of(pacer.Ended)
	if len(e) != 1 || e[0].End != pacer.Expired || !errors.Is(e[0].Err, pacer.ErrLeaseExpired) || e[0].Verdict != verdict {
		t.Errorf("Ended events %+v; want one, expired, ErrLeaseExpired, with the verdict", e)
	}
}
