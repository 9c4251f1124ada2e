package pacer_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// Redis loses the budget's state (here the server is flushed; a restart
// without persistence, a failover or an eviction does the same) while the
// provider still counts what was used. The next call of a process that saw
// the state finds it lost: the budget restarts empty and refills at its
// rate, and a Warning event with ErrStateLost says so. Alert on it.
func Example_stateLost() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	p, err := pacer.New(rdb, pacer.Config{
		Name:   "openai:gpt-4o-mini",
		Limits: pacer.Limits{RPM: 60},
		Observe: func(e pacer.Event) {
			if e.Kind == pacer.Warning && errors.Is(e.Err, pacer.ErrStateLost) {
				fmt.Println("state lost - refills in", e.Wait)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100})
		if err != nil {
			panic(err)
		}
		_ = l.Settle(ctx, 100)
	}

	mr.FlushAll() // the state is lost
	_, err = p.TryAcquire(ctx, pacer.Request{Tokens: 100})
	fmt.Println("right after the loss:", errors.Is(err, pacer.ErrWaitTimeout))
	// Output:
	// state lost - refills in 1m0s
	// right after the loss: true
}
