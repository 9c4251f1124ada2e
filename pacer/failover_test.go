package pacer_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// When the master holding a budget dies, admissions resume within 5 s of
// its replica's promotion on a ClusterClient with go-redis's defaults, whose
// own slot map refresh comes only every 60 s.
func TestClusterFailoverResumesAdmissions(t *testing.T) {
	b := redistest.Failover(t)
	redistest.QuietRedisLog(t)
	ctx := context.Background()
	// Defaults only, as a user would build it.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: b.Addrs})
	p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 1_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rdb.Close()
		// A new client reads the slot map as it is now.
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: b.Addrs})
		defer c.Close()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := c.Del(cctx, pacer.Keys(p)...).Err(); err != nil {
			t.Logf("removing the budget's keys: %v", err)
		}
	})
	admit := func() error {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		l, err := p.Acquire(cctx, pacer.Request{Tokens: 1})
		if err != nil {
			return err
		}
		_ = l.Settle(cctx, 1) // may fail: its master can die in between
		return nil
	}
	if err := admit(); err != nil {
		t.Fatalf("Acquire before the failover = %v; want nil", err)
	}
	shard := redistest.ShardOf(t, b.Addrs, pacer.Keys(p)[0])
	if len(shard.Replicas) == 0 {
		t.Fatalf("master %s of the budget's slot has no replica; a failed-over cluster must be restarted (.ci/run starts a fresh one)", shard.Master)
	}

	// Callers keep asking, as a fleet would, through the failover.
	var first atomic.Int64 // UnixNano of the first admission asked after the kill
	stop := make(chan struct{})
	var wg sync.WaitGroup
	killed := time.Now()
	redistest.Kill(t, shard.Master)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if admit() == nil {
					first.CompareAndSwap(0, time.Now().UnixNano())
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	defer wg.Wait()
	defer close(stop)

	_, promoted := redistest.Promoted(t, shard.Replicas, 20*time.Second)
	const bound = 5 * time.Second
	deadline := promoted.Add(2 * bound) // wait past the bound to report how late it was
	for first.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if first.Load() == 0 {
		t.Fatalf("master %s killed, replica promoted %v later; no admission in the %v after the promotion, want one within %v",
			shard.Master, promoted.Sub(killed).Round(time.Millisecond), 2*bound, bound)
	}
	resumed := time.Unix(0, first.Load()).Sub(promoted)
	t.Logf("master %s killed; replica promoted %v later; admissions resumed %v after the promotion",
		shard.Master, promoted.Sub(killed).Round(time.Millisecond), resumed.Round(time.Millisecond))
	if resumed > bound {
		t.Errorf("admissions resumed %v after the promotion; want within %v", resumed.Round(time.Millisecond), bound)
	}
}
