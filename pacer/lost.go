package pacer

import (
	"context"
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// saw records what an acquire reply says of the budget's state: how long
// its keys live (a lease's expiry is no later), so that a later call can
// tell a lost state from an expired one; and if this call found the state
// lost, a Warning event with Err ErrStateLost.
func (p *Pacer) saw(rep wire.AcquireReply) {
	if rep.Xp == wire.Lost {
		p.emit(Event{Kind: Warning, Wait: p.refill(), Err: ErrStateLost})
	}
	x := rep.Xp
	if rep.Code == wire.Admitted || rep.Code == wire.Already {
		x = max(x, rep.Expiry.UnixMilli())
	}
	for {
		old := p.seen.Load()
		if x <= old || p.seen.CompareAndSwap(old, x) {
			return
		}
	}
}

// refill returns how long the budget's buckets take to refill from empty:
// the longest span.
func (p *Pacer) refill() time.Duration {
	var d time.Duration
	for _, b := range p.s().wireBuckets {
		w := time.Duration(b.Span) * time.Microsecond
		if b.Sub > 0 {
			w = time.Duration(b.Sub*wire.SlidingParts) * time.Microsecond
		}
		d = max(d, w)
	}
	return d
}

// configGetter is what the maxmemory-policy check needs of the client.
type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// checkEviction asks the server holding the budget's keys for its
// maxmemory-policy, once, in the background, and emits a Warning if it may
// evict them. A server that refuses CONFIG (many managed ones do) says
// nothing: the check is advice, not a requirement.
func (p *Pacer) checkEviction(rdb redis.UniversalClient) {
	if p.s().observe == nil {
		return // nobody to tell
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		policy, err := maxmemoryPolicy(ctx, rdb, p.keys[0])
		if err != nil {
			return
		}
		if why := wire.Evicts(policy); why != "" {
			p.emit(Event{Kind: Warning, Err: fmt.Errorf("pacer: Redis may evict the budget's keys: %s, and a budget whose keys are evicted reads empty here while the provider still counts it: set maxmemory-policy noeviction, or give the budgets a Redis of their own", why)})
		}
	}()
}

// maxmemoryPolicy returns the maxmemory-policy of the server that holds
// key (on a Cluster, its master), or an error if the server refuses to
// say.
func maxmemoryPolicy(ctx context.Context, rdb redis.UniversalClient, key string) (string, error) {
	var c configGetter = rdb
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return "", err
		}
		c = m
	}
	v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", err
	}
	p, ok := v["maxmemory-policy"]
	if !ok {
		return "", fmt.Errorf("pacer: CONFIG GET maxmemory-policy: no answer")
	}
	return p, nil
}
