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

// Events carry what a metrics exporter needs: the request's tokens and
// priority on every Waiting event, the limit on Paused events, the tokens
// used and the time held on Ended events, and the verdict of a failed call.
func TestEventsCarryWhatMetricsNeed(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	var mu sync.Mutex
	var events []pacer.Event
	c := newClock(b)
	p := newPacer(t, b, pacer.Config{
		Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1000, RPM: 100},
		Observe: func(e pacer.Event) { mu.Lock(); events = append(events, e); mu.Unlock() },
	})
	take := func(kind pacer.EventKind) []pacer.Event {
		mu.Lock()
		defer mu.Unlock()
		var out []pacer.Event
		for _, e := range events {
			if e.Kind == kind {
				out = append(out, e)
			}
		}
		events = nil
		return out
	}

	l, err := p.Acquire(ctx, pacer.Request{Tokens: 800})
	if err != nil {
		t.Fatal(err)
	}
	c.advance(2 * time.Second)
	if err := l.Settle(ctx, 300); err != nil {
		t.Fatal(err)
	}
	if e := take(pacer.Ended); len(e) != 1 || e[0].End != pacer.Settled || e[0].Used != 300 || e[0].Tokens != 800 || e[0].Held != 2*time.Second {
		t.Errorf("Ended events = %+v; want one, settled, 800 reserved, 300 used, held 2s", e)
	}

	// About 733 of 1000 left (after the refund): a call of 900 waits for
	// its turn.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		if l, err := p.Acquire(wctx, pacer.Request{Tokens: 900}); err == nil {
			_ = l.Cancel(ctx)
		}
	}()
	var waiting []pacer.Event
	for deadline := time.Now().Add(5 * time.Second); len(waiting) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		waiting = take(pacer.Waiting)
	}
	if len(waiting) != 1 || waiting[0].Tokens != 900 || waiting[0].Limit != "tpm" || waiting[0].Wait <= 0 {
		t.Errorf("Waiting events = %+v; want one for 900 tokens, on tpm, with a wait", waiting)
	}
	stop()

	if err := pacer.Throttle(ctx, p, time.Second, classify.LimitRequests, pacer.Request{Tokens: 10}); err != nil {
		t.Fatal(err)
	}
	if e := take(pacer.Paused); len(e) != 1 || e[0].Limit != "rpm" || e[0].Wait != time.Second {
		t.Errorf("Paused events = %+v; want one, on rpm, for 1s", e)
	}

	c.advance(2 * time.Minute)
	boom := errors.New("bad request")
	l, err = p.TryAcquire(ctx, pacer.Request{Tokens: 50})
	if err != nil {
		t.Fatal(err)
	}
	take(pacer.Ended)
	permanent := classify.Verdict{Kind: classify.Permanent, Status: 400}
	if err := l.Fail(ctx, permanent, boom); err != nil {
		t.Fatal(err)
	}
	if err := l.Fail(ctx, permanent, boom); err != nil { // ended already: no second event
		t.Fatal(err)
	}
	if e := take(pacer.Ended); len(e) != 1 || e[0].End != pacer.Rejected || e[0].Verdict.Kind != classify.Permanent || e[0].Tokens != 50 || !errors.Is(e[0].Err, boom) {
		t.Errorf("Ended events = %+v; want one, rejected, permanent, 50 tokens, the call's error", e)
	}
}
