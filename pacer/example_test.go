package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// reply stands in for a provider SDK's response.
type reply struct {
	Text  string
	Usage struct{ TotalTokens int64 }
}

func callModel(ctx context.Context) (reply, error) {
	var r reply
	r.Text = "hello"
	r.Usage.TotalTokens = 420
	return r, nil
}

// Acquire before the call, Settle after it: the unused part of the
// reservation goes back at once.
func ExamplePacer_Acquire() {
	mr, _ := miniredis.Run() // any *redis.Client or *redis.ClusterClient works
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: exact output
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	p, err := pacer.New(rdb, pacer.Config{
		Name:   "openai:gpt-4o-mini", // same Name = same budget in every process
		Limits: pacer.Limits{RPM: 500, TPM: 200_000, RPD: 10_000, Concurrency: 20},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 1300}) // prompt estimate + max output tokens
	if err != nil {
		panic(err)
	}
	r, err := callModel(ctx)
	if err != nil {
		_ = l.Fail(ctx, classify.FromError(err), err) // keeps the reservation; a 429 pauses every process
		panic(err)
	}
	if err := l.Settle(ctx, r.Usage.TotalTokens); err != nil {
		panic(err)
	}
	s, _ := p.Snapshot(ctx)
	fmt.Printf("TPM %.0f of %d, in flight %d\n", s.Rate("tpm").Level, s.Rate("tpm").Capacity, s.InFlight)
	// Output: TPM 199580 of 200000, in flight 0
}

// Pause holds back every process sharing the budget, for example for the
// retry delay of a 429 one process received.
func ExamplePacer_Pause() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Now()) // Redis's clock held still, so the wait prints the same on any machine
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	cfg := pacer.Config{Name: "openai:gpt-4o", Limits: pacer.Limits{RPM: 500}}
	worker1, _ := pacer.New(rdb, cfg)
	worker2, _ := pacer.New(rdb, cfg) // in another process, as far as Redis can tell

	ctx := context.Background()
	_ = worker1.Pause(ctx, 20*time.Second)
	_, err := worker2.TryAcquire(ctx, pacer.Request{})
	var notYet *pacer.RefusedError
	if errors.As(err, &notYet) && notYet.Limit == "" { // no limit: the pause held it
		wait, _ := pacer.RetryAfter(err)
		fmt.Println("worker 2 waits", wait.Round(time.Second), "for the pause")
	}
	// Output: worker 2 waits 20s for the pause
}
