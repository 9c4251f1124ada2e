package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// retryIn says how long a worker waits before it asks the budget again
// after err, and whether asking again can help at all. The budget says how
// long until it has room; a worker that asks again sooner is refused
// again, and a loop that never sleeps makes thousands of refused calls a
// second.
func retryIn(err error, failures int) (time.Duration, bool) {
	switch {
	case errors.Is(err, pacer.ErrWaitTimeout):
		// Acquire found no room within MaxWait, or TryAcquire none now.
		wait, _ := pacer.RetryAfter(err)
		return jitter(wait), true
	case errors.Is(err, pacer.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		// Redis is unreachable (or hung, while that is being found out):
		// back off, doubling up to 5 s.
		return min(100*time.Millisecond<<min(failures, 6), 5*time.Second), true
	}
	return 0, false // ErrTooLarge, ErrInvalid, ErrStopped...: report the job
}

// jitter adds up to 10%, so that workers told the same wait do not all
// come back at once.
func jitter(d time.Duration) time.Duration {
	return d + rand.N(d/10+1)
}

// A worker loop: each job acquires a lease, makes its call and settles.
// When the budget has no room, the loop sleeps for as long as the error
// says, then asks again; it never spins. Acquire's short MaxWait hands the
// wait back to the loop, which may do other work meanwhile; TryAcquire's
// *RefusedError is handled the same way.
func ExamplePacer_Acquire_workerLoop() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mr.SetTime(now)
	// A worker sleeps with time.Sleep (or a timer and ctx.Done); here the
	// sleep moves miniredis's clock, so that the example runs at once.
	sleep := func(d time.Duration) { now = now.Add(d); mr.SetTime(now) }
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	p, err := pacer.New(rdb, pacer.Config{Name: "openai:gpt-4o-mini:jobs", Limits: pacer.Limits{RPM: 3}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	done, refused := 0, 0
	for job := range 6 {
		for failures := 0; ; failures++ {
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 500, MaxWait: time.Millisecond})
			if err != nil {
				d, again := retryIn(err, failures)
				if !again || ctx.Err() != nil {
					panic(fmt.Sprintf("job %d: %v", job, err))
				}
				refused++
				sleep(d)
				continue
			}
			r, err := callModel(ctx)
			if err != nil {
				_ = l.Fail(ctx, classify.FromError(err), err) // a 429 pauses every process
				break
			}
			_ = l.Settle(ctx, r.Usage.TotalTokens) // a failed settle is retried in the background
			done++
			break
		}
	}
	fmt.Printf("%d jobs done; %d refusals, each slept out\n", done, refused)
	// Output: 6 jobs done; 3 refusals, each slept out
}
