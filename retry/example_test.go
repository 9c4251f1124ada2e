package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/retry"
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

// Run wraps a call: it paces it, settles the real usage, pauses the whole
// fleet on a 429 and retries what can be retried.
func ExampleRun() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	p, _ := pacer.New(rdb, pacer.Config{Name: "anthropic:claude", Limits: pacer.Limits{RPM: 50, TPM: 40_000}})

	r, err := retry.Run(context.Background(), p, pacer.Request{Tokens: 1300},
		callModel,
		func(r reply) int64 { return r.Usage.TotalTokens }, // usage, to settle
		retry.WithRetries(3), retry.WithLatencyBudget(30*time.Second))
	switch {
	case errors.Is(err, pacer.ErrQuotaExhausted):
		fmt.Println("out of credits: tell a human, do not retry")
	case err != nil:
		fmt.Println("failed:", err)
	default:
		fmt.Println(r.Text)
	}
	// Output: hello
}

// WithNoWait suits job queues: a job that does not fit yet goes back to the
// queue with the time until it will, and nothing is charged.
func ExampleWithNoWait() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, _ := pacer.New(rdb, pacer.Config{Name: "batch:gpt-4o", Limits: pacer.Limits{TPD: 3000}})

	queue := []int64{1000, 1500, 1000} // each job's token estimate
	for i, tokens := range queue {
		_, err := retry.Run(context.Background(), p, pacer.Request{Tokens: tokens},
			callModel, func(r reply) int64 { return tokens }, // used all it reserved
			retry.WithNoWait())
		switch {
		case errors.Is(err, pacer.ErrWaitTimeout):
			wait, _ := pacer.RetryAfter(err)
			fmt.Printf("job %d: back to the queue for %v\n", i, wait.Round(time.Hour))
		case err != nil:
			fmt.Printf("job %d: %v\n", i, err)
		default:
			fmt.Printf("job %d: done\n", i)
		}
	}
	// Output:
	// job 0: done
	// job 1: done
	// job 2: back to the queue for 4h0m0s
}

// Route calls among three deployments of one model, each with its own
// quota: the nearest fills first, and the calls it has no room for go to
// the next at once instead of waiting. A deployment that fails (a 5xx, an
// overload) cools down for every process, and the retry goes to another at
// once. Give the budgets one HashTag so a call is routed in one round trip
// on a Redis Cluster too.
func ExampleRunGroup() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: exact output
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	var ds []pacer.Deployment
	names := map[*pacer.Pacer]string{} // or the client (base URL) of each deployment
	for _, d := range []struct {
		name string
		rpm  int64
	}{{"azure:eastus:gpt-4o", 3}, {"azure:westus:gpt-4o", 2}, {"openai:gpt-4o", 100}} {
		p, err := pacer.New(rdb, pacer.Config{Name: d.name, HashTag: "gpt-4o", Limits: pacer.Limits{RPM: d.rpm}})
		if err != nil {
			panic(err)
		}
		ds = append(ds, pacer.Deployment{Pacer: p})
		names[p] = d.name
	}
	g, err := pacer.NewGroup(pacer.GroupConfig{Deployments: ds, Policy: pacer.FillInOrder})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		answer, err := retry.RunGroup(ctx, g, pacer.Request{Tokens: 500}, func(ctx context.Context, d *pacer.Pacer) (string, error) {
			// Send the call with d's client (or base URL).
			return "sent to " + names[d], nil
		}, nil)
		if err != nil {
			panic(err)
		}
		fmt.Println(answer)
	}
	// Output:
	// sent to azure:eastus:gpt-4o
	// sent to azure:eastus:gpt-4o
	// sent to azure:eastus:gpt-4o
	// sent to azure:westus:gpt-4o
	// sent to azure:westus:gpt-4o
	// sent to openai:gpt-4o
}
