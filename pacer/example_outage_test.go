package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// While Redis is down, a budget whose limits fail open admits from this
// process's share of them (here a quarter: four replicas), one whose
// token limit fails closed refuses every call with ErrUnavailable. When
// Redis answers again, the shared budget admits within a second.
func ExampleOutage() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	up := make(chan struct{}, 1)
	open, err := pacer.New(rdb, pacer.Config{
		Name:   "openai:gpt-4o-mini:chat",
		Limits: pacer.Limits{RPM: 6000, Concurrency: 20},
		// Requests and calls in flight protect the provider's servers:
		// each of 4 processes may take a quarter of them without Redis
		// (1500 requests a minute, from empty, and 5 slots).
		Outage: pacer.Outage{FailOpen: []string{"rpm", "concurrency"}, Replicas: 4},
		Observe: func(e pacer.Event) {
			if e.Kind == pacer.Redis && e.Err == nil { // Redis found again
				up <- struct{}{}
			}
		},
	})
	if err != nil {
		panic(err)
	}
	closed, err := pacer.New(rdb, pacer.Config{
		Name:   "openai:gpt-4o-mini:agents",
		Limits: pacer.Limits{RPM: 600, TPD: 5_000_000},
		// The daily tokens are money: they stay closed, and so the budget does.
		Outage: pacer.Outage{FailOpen: []string{"rpm"}, Replicas: 4},
	})
	if err != nil {
		panic(err)
	}

	mr.Close() // Redis goes away
	var held []*pacer.Lease
	for range 5 {
		// The first call waits out the client's own retries (about 1.5 s
		// with go-redis's defaults), then trips the circuit.
		l, err := open.Acquire(ctx, pacer.Request{Tokens: 500, MaxWait: 10 * time.Second})
		if err != nil {
			panic(err)
		}
		held = append(held, l)
	}
	_, err = open.TryAcquire(ctx, pacer.Request{Tokens: 500})
	var notYet *pacer.RefusedError
	if errors.As(err, &notYet) {
		fmt.Printf("admitted %d locally (Local: %v), then no room: %s\n", len(held), held[0].Info().Local, notYet.Limit)
	}
	_, err = closed.Acquire(ctx, pacer.Request{Tokens: 500})
	fmt.Println("fail closed:", errors.Is(err, pacer.ErrUnavailable))

	_ = mr.Restart() // Redis answers again
	<-up
	for _, l := range held {
		_ = l.Settle(ctx, 300) // ends locally: Redis never sees it
	}
	l, err := open.Acquire(ctx, pacer.Request{Tokens: 500, MaxWait: time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("back on the shared budget:", !l.Info().Local)
	_ = l.Settle(ctx, 300)
	// Output:
	// admitted 5 locally (Local: true), then no room: concurrency
	// fail closed: true
	// back on the shared budget: true
}
