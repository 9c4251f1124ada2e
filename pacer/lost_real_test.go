package pacer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A real redis-server, killed and started again without persistence: it
// comes back empty while the provider still counts the last minute. The
// budget restarts empty, the process reports the loss, and another process
// that connects after the restart finds the budget empty too.
func TestStateLostInARealRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 3, MinRetryBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	var ev kinds
	// 60 an hour: restarted empty, it refills a call a minute, and no
	// stall of a loaded machine lets the next one through.
	cfg := pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 60, Window: time.Hour}}, Observe: ev.observe}
	p, err := pacer.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		l, err := p.TryAcquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatalf("call %d before the restart = %v", i, err)
		}
		_ = l.Settle(ctx, 0)
	}
	srv.Kill()
	srv.Start()
	var got error
	for range 50 { // the client's pool reconnects
		if _, got = p.TryAcquire(ctx, pacer.Request{}); !errors.Is(got, pacer.ErrUnavailable) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(got, pacer.ErrWaitTimeout) {
		t.Fatalf("TryAcquire after the restart = %v; want ErrWaitTimeout: the budget restarts empty", got)
	}
	if n := ev.lost(); n != 1 {
		t.Errorf("%d state-lost Warnings; want 1", n)
	}
	cfg.Observe = nil
	other, err := pacer.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryAcquire(ctx, pacer.Request{}); !errors.Is(err, pacer.ErrWaitTimeout) {
		t.Errorf("a process connecting after the restart = %v; want ErrWaitTimeout: the budget restarted empty", err)
	}
}

// New warns, through Observe, when the server may evict the budget's keys:
// any allkeys-* policy, and volatile-* too (every key of a budget has a
// TTL). The warning names the setting to change. noeviction is quiet.
func TestNewWarnsOfEviction(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "noeviction"} {
		if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		warned := make(chan pacer.Event, 1)
		_, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 60}, Observe: func(e pacer.Event) {
			if e.Kind == pacer.Warning {
				warned <- e
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		wait := 2 * time.Second
		if policy == "noeviction" {
			wait = 300 * time.Millisecond // a warning would come as fast as the others did
		}
		select {
		case e := <-warned:
			if policy == "noeviction" {
				t.Errorf("a warning under noeviction: %v", e.Err)
			} else if !strings.Contains(e.Err.Error(), "Redis may evict the budget's keys") || !strings.Contains(e.Err.Error(), "maxmemory-policy noeviction") || !strings.Contains(e.Err.Error(), policy) {
				t.Errorf("warning under %s = %v; want the eviction warning naming the policy and maxmemory-policy noeviction", policy, e.Err)
			}
		case <-time.After(wait):
			if policy != "noeviction" {
				t.Errorf("no warning under maxmemory-policy %s", policy)
			}
		}
	}
}
