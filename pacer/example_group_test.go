package pacer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// Route calls among three deployments of one model, each with its own
// quota: the nearest fills first, and the calls it has no room for go to
// the next at once instead of waiting. Give the budgets one HashTag so a
// call is routed in one round trip on a Redis Cluster too.
func ExampleRunGroup() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: exact output
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	var ds []pacer.Deployment
	for _, d := range []struct {
		name string
		rpm  int64
	}{{"azure:eastus:gpt-4o", 3}, {"azure:westus:gpt-4o", 2}, {"openai:gpt-4o", 100}} {
		p, err := pacer.New(rdb, pacer.Config{Name: d.name, HashTag: "gpt-4o", Limits: pacer.Limits{RPM: d.rpm}})
		if err != nil {
			panic(err)
		}
		ds = append(ds, pacer.Deployment{Pacer: p})
	}
	g, err := pacer.NewGroup(pacer.GroupConfig{Deployments: ds, Policy: pacer.FillInOrder})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		answer, err := pacer.RunGroup(ctx, g, pacer.Request{Tokens: 500}, func(ctx context.Context, d *pacer.Pacer) (string, error) {
			// Send the call with the client (or base URL) of d.Name().
			return "sent to " + d.Config().Name, nil
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
