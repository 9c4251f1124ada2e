package pacer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// A shadow budget never holds a call: what fits is admitted and counted,
// what would wait gets a Denied event and an uncounted lease, at once.
func TestShadowNeverHolds(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		var mu sync.Mutex
		var denied []pacer.Event
		var ended int
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 2}, Shadow: true, Observe: func(e pacer.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Kind {
			case pacer.Denied:
				denied = append(denied, e)
			case pacer.Ended:
				ended++
			}
		}}
		p := newPacer(t, b, cfg)
		newClock(b)
		began := time.Now()
		var shadows int
		for range 5 {
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
			if err != nil {
				t.Fatalf("Acquire in shadow mode = %v; want a lease, always", err)
			}
			if l.Info().Shadow {
				shadows++
			}
			if err := l.Settle(ctx, 10); err != nil {
				t.Errorf("Settle = %v", err)
			}
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("5 calls took %v; want no waiting", took)
		}
		mu.Lock()
		defer mu.Unlock()
		if shadows != 3 || len(denied) != 3 || ended != 2 {
			t.Fatalf("%d shadow leases, %d Denied, %d Ended; want 3, 3 and 2 (only counted leases end)", shadows, len(denied), ended)
		}
		if denied[0].Limit != "rpm" || !errors.Is(denied[0].Err, pacer.ErrWaitTimeout) || denied[0].Wait <= 0 {
			t.Errorf("Denied %+v; want rpm, ErrWaitTimeout and how long the call would have waited", denied[0])
		}
		if s := snap(t, p); s.Rate("rpm").Level > 0.1 {
			t.Errorf("RPM level %.2f; want the two counted calls to have used it", s.Rate("rpm").Level)
		}
	})
}

// With Redis gone, a shadow budget still lets every call run; bad input is
// still an error.
func TestShadowRedisDown(t *testing.T) {
	t.Parallel()
	b := redistest.Mini(t)
	p := newPacer(t, b, pacer.Config{Limits: pacer.Limits{RPM: 2}, Shadow: true})
	b.Mini.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
	if err != nil || !l.Info().Shadow {
		t.Fatalf("Acquire with Redis down in shadow mode = %v, %v; want a shadow lease", l, err)
	}
	if err := l.Settle(ctx, 5); err != nil {
		t.Errorf("Settle of a shadow lease = %v; want nil, no Redis call", err)
	}
	if _, err := p.Acquire(ctx, pacer.Request{Tokens: -1}); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("a bad request in shadow mode = %v; want ErrInvalid", err)
	}
}
