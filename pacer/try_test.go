package pacer_test

import (
	"context"
	"errors"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// tryAcquire is TryAcquire with "no room" as a wait, the form most tests
// read best: a lease, or nil and the time until room, or an error.
func tryAcquire(p *pacer.Pacer, ctx context.Context, r pacer.Request) (*pacer.Lease, time.Duration, error) {
	l, err := p.TryAcquire(ctx, r)
	if errors.Is(err, pacer.ErrNotYet) {
		return nil, retryAfter(err), nil
	}
	return l, 0, err
}

// retryAfter is pacer.RetryAfter for an error that must carry a wait; one
// that carries none reads as -1, which no test's bound admits.
func retryAfter(err error) time.Duration {
	if d, ok := pacer.RetryAfter(err); ok {
		return d
	}
	return -1
}
