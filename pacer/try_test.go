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
	var notYet *pacer.NotYetError
	if errors.As(err, &notYet) {
		return nil, notYet.RetryAfter, nil
	}
	return l, 0, err
}
