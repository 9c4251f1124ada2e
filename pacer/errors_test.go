package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// RetryAfter reads the wait of every error that carries one, as the
// budget made it and wrapped, and reports none for the rest.
func TestRetryAfter(t *testing.T) {
	rdb, done := stillRedis()
	defer done()
	ctx := context.Background()
	p, err := pacer.New(rdb, pacer.Config{Name: "retry-after", Limits: pacer.Limits{RPM: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
		t.Fatal(err)
	}
	_, notYet := p.TryAcquire(ctx, pacer.Request{})
	_, wait := p.Acquire(ctx, pacer.Request{MaxWait: time.Millisecond})
	if err := p.Stop(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	_, stopped := p.TryAcquire(ctx, pacer.Request{})
	for _, c := range []struct {
		name     string
		err      error
		min, max time.Duration
		ok       bool
	}{
		{"not yet", notYet, 59 * time.Second, 61 * time.Second, true},
		{"wait", wait, 59 * time.Second, 61 * time.Second, true},
		{"stopped", stopped, 89 * time.Second, 90 * time.Second, true},
		{"wrapped", fmt.Errorf("job 7: %w", fmt.Errorf("attempt 2: %w", notYet)), 59 * time.Second, 61 * time.Second, true},
		{"too large", pacer.ErrTooLarge, 0, 0, false},
		{"nil", nil, 0, 0, false},
	} {
		d, ok := pacer.RetryAfter(c.err)
		if ok != c.ok || d < c.min || d > c.max {
			t.Errorf("%s: RetryAfter(%v) = %v, %v; want %v in [%v, %v]", c.name, c.err, d, ok, c.ok, c.min, c.max)
		}
	}
	if !errors.Is(notYet, pacer.ErrWaitTimeout) || !errors.Is(wait, pacer.ErrWaitTimeout) || !errors.Is(stopped, pacer.ErrStopped) {
		t.Errorf("errors %v, %v, %v; want ErrWaitTimeout, ErrWaitTimeout, ErrStopped", notYet, wait, stopped)
	}
	// TryAcquire's refusal is one of no room within a bound of 0; each
	// refusal matches its own sentinel alone.
	var re *pacer.RefusedError
	if !errors.As(notYet, &re) || re.Bound != 0 || !strings.Contains(notYet.Error(), "no room yet in rpm; retry after") {
		t.Errorf("TryAcquire's refusal = %v; want a *RefusedError with Bound 0 saying no room yet in rpm", notYet)
	}
	if !errors.As(wait, &re) || re.Bound != time.Millisecond || !strings.Contains(wait.Error(), "within the wait bound 1ms") {
		t.Errorf("Acquire's refusal = %v; want a *RefusedError with Bound 1ms", wait)
	}
	for _, c := range []struct {
		err  error
		not  []error
		name string
	}{
		{notYet, []error{pacer.ErrStopped, pacer.ErrQuotaExhausted, pacer.ErrUnavailable, context.DeadlineExceeded}, "not yet"},
		{wait, []error{pacer.ErrStopped, context.DeadlineExceeded}, "wait"},
		{stopped, []error{pacer.ErrWaitTimeout, pacer.ErrQuotaExhausted}, "an operator's stop"},
	} {
		for _, target := range c.not {
			if errors.Is(c.err, target) {
				t.Errorf("%s: errors.Is(%v, %v) = true; want false", c.name, c.err, target)
			}
		}
	}
}

// RetryAfter is the one way to ask an error how long to wait, whichever
// call made it and however it was wrapped.
func ExampleRetryAfter() {
	rdb, done := stillRedis()
	defer done()
	ctx := context.Background()
	p, _ := pacer.New(rdb, pacer.Config{Name: "openai:gpt-4o", Limits: pacer.Limits{RPD: 1}})
	_, _ = p.TryAcquire(ctx, pacer.Request{})

	_, err := p.TryAcquire(ctx, pacer.Request{})
	err = fmt.Errorf("job 7: %w", err)
	if wait, ok := pacer.RetryAfter(err); ok {
		fmt.Println("back to the queue for", wait.Round(time.Hour))
	}
	// Output: back to the queue for 24h0m0s
}
