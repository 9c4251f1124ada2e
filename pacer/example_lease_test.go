package pacer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A long call keeps its slot with KeepAlive; ending a lease twice
// changes the budget once.
func ExampleLease_KeepAlive() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	p, _ := pacer.New(rdb, pacer.Config{
		Name:   "openai:o3",
		Limits: pacer.Limits{Concurrency: 1, TPD: 1_000_000},
		// Short, to show the renewal. A renewal runs every TTL/3, so one
		// may come a second late on a busy machine before the lease would
		// lapse.
		LeaseTTL: 1500 * time.Millisecond,
	})
	ctx := context.Background()
	l, _ := p.Acquire(ctx, pacer.Request{Tokens: 5000})
	stop := l.KeepAlive(ctx)
	time.Sleep(3100 * time.Millisecond) // a call longer than two TTLs
	stop()
	fmt.Println("still held:", l.Info().State)

	fmt.Println(l.Settle(ctx, 1200), l.Settle(ctx, 1200)) // the second is a no-op
	fmt.Println("ended:", l.Info().State)
	// Output:
	// still held: active
	// <nil> <nil>
	// ended: settled
}

// Fail keeps the reservation of a call that failed (here a timeout);
// Cancel gives back everything for a call that was never sent.
func ExampleLease_Fail() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	p, _ := pacer.New(rdb, pacer.Config{Name: "anthropic:claude", Limits: pacer.Limits{TPM: 10_000}})
	ctx := context.Background()

	failed, _ := p.Acquire(ctx, pacer.Request{Tokens: 3000})
	callErr := context.DeadlineExceeded // timed out: the provider may have counted it
	_ = failed.Fail(ctx, classify.FromError(callErr), callErr)
	neverSent, _ := p.Acquire(ctx, pacer.Request{Tokens: 2000})
	_ = neverSent.Cancel(ctx) // shutting down before the call

	s, _ := p.Snapshot(ctx)
	fmt.Printf("TPM %.0f of %d\n", s.Rate("tpm").Level, s.Rate("tpm").Capacity)
	// Output: TPM 7000 of 10000
}
