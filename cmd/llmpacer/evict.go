package main

import (
	"context"
	"fmt"
	"io"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// warnEviction tells the operator when a server may evict budgets' keys:
// a budget whose keys are evicted reads empty while the provider still
// counts what was used. A server that refuses CONFIG (many managed ones do)
// says nothing: the check is advice.
func warnEviction(ctx context.Context, o options, rdb redis.UniversalClient, where string, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	check := func(ctx context.Context, c *redis.Client, name string) {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return // refused: nothing to say
		}
		if why := wire.Evicts(v["maxmemory-policy"]); why != "" {
			w := why + ": a budget whose keys are evicted reads empty here while the provider still counts it, and its processes restart it empty; set maxmemory-policy noeviction, or give the budgets a Redis of their own"
			fmt.Fprintf(stderr, "llmpacer: warning: %s: %s\n", name, w)
		}
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			check(ctx, m, where+" (node "+m.Options().Addr+")")
			return nil
		})
	case *redis.Client:
		check(ctx, c, where)
	}
}
