package pacer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// Issue 23: a Pacer sends its batches as the functions of lua.Library
// (FCALL) on a server that has FUNCTION (Redis 7; on a Cluster, loaded on
// every primary), and by EVALSHA on one that has not (miniredis). A
// library lost (a restart, FUNCTION FLUSH; here FUNCTION DELETE) is
// loaded again by the next batch that finds it missing, which then runs:
// no call fails, and each runs once (the budget charged every call
// exactly once).
func TestBatchesGoByFunctions(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const pacers, goroutines, calls = 2, 16, 4
		ps := newPacers(t, b, pacers, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPD: 100_000, TPD: 100_000_000}})
		want := "FCALL"
		if b.Mini != nil {
			want = "EVALSHA"
		}
		burst := func() { pairs(t, ps, goroutines, calls) }
		start := snap(t, ps[0]).Time
		burst()
		for i, p := range ps {
			if got := pacer.BatchesBy(p); got != want {
				t.Fatalf("Pacer %d sends its batches by %q; want %q", i, got, want)
			}
		}
		if b.Mini != nil {
			return
		}

		// The library lost on every primary: the next batches load it again.
		rdb := b.Client(t)
		each := func(f func(ctx context.Context, c *redis.Client) error) error {
			if cc, ok := rdb.(*redis.ClusterClient); ok {
				return cc.ForEachMaster(ctx, f)
			}
			return f(ctx, rdb.(*redis.Client))
		}
		if err := each(func(ctx context.Context, c *redis.Client) error {
			return c.FunctionDelete(ctx, lua.LibraryName).Err()
		}); err != nil {
			t.Fatalf("FUNCTION DELETE: %v", err)
		}
		burst()
		for i, p := range ps {
			if got := pacer.BatchesBy(p); got != want {
				t.Fatalf("after the library was lost, Pacer %d sends its batches by %q; want %q", i, got, want)
			}
		}
		if err := each(func(ctx context.Context, c *redis.Client) error {
			libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lua.LibraryName}).Result()
			if err != nil || len(libs) != 1 {
				return fmt.Errorf("FUNCTION LIST %s on %s = %v, %v; want the library loaded again", lua.LibraryName, c.Options().Addr, libs, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Each call charged once: the day's requests lack the calls made,
		// less what refilled since the first (about one a second).
		s := snap(t, ps[0])
		r := s.Rate("rpd")
		n := float64(2 * pacers * goroutines * calls)
		refilled := s.Time.Sub(start).Seconds() * r.PerSecond
		if d := n - (float64(r.Capacity) - r.Level); d < -0.01 || d > refilled+0.01 {
			t.Errorf("RPD charged %.2f; want %.0f calls, less at most %.2f refilled", float64(r.Capacity)-r.Level, n, refilled)
		}
	})
}

// Issue 23: a user the server will not let call or load functions (an
// ACL without FUNCTION and FCALL) still gets every batch through, by
// EVALSHA.
func TestBatchesWithoutFunctionRights(t *testing.T) {
	ctx := context.Background()
	b := redistest.Real(t)
	admin := b.Client(t)
	user := "llmpacer-test-" + strings.ReplaceAll(redistest.Name(t), ":", "-")
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">secret", "~*", "&*", "+@all", "-function", "-fcall", "-fcall_ro").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	rdb := redis.NewClient(&redis.Options{Addr: b.Addrs[0], Username: user, Password: "secret"})
	t.Cleanup(func() { rdb.Close() })
	name := redistest.Name(t)
	p, err := pacer.New(rdb, pacer.Config{Name: name, Limits: pacer.Limits{RPD: 100_000, TPD: 100_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	pairs(t, []*pacer.Pacer{p}, 16, 4)
	if calls, sent := pacer.AcquireCounts(p); sent >= calls {
		t.Fatalf("%d acquires in %d script calls: nothing was batched, so the test shows nothing", calls, sent)
	}
	if got := pacer.BatchesBy(p); got != "EVALSHA" {
		t.Fatalf("batches went by %q; want EVALSHA, the user may not call functions", got)
	}
}

// The Pacers of a process on one client load the library once between
// them (after a restart, not once a budget); on another client, apart.
func TestPacersOnOneClientShareTheLibrary(t *testing.T) {
	b := redistest.Mini(t)
	one, two := b.Client(t), b.Client(t)
	p1 := newPacerOn(t, one)
	p2 := newPacerOn(t, one)
	p3 := newPacerOn(t, two)
	if !pacer.SameLibrary(p1, p2) || pacer.SameLibrary(p1, p3) {
		t.Fatalf("one client: shared %v; two clients: shared %v; want true, false", pacer.SameLibrary(p1, p2), pacer.SameLibrary(p1, p3))
	}
}

func newPacerOn(t *testing.T, rdb redis.UniversalClient) *pacer.Pacer {
	t.Helper()
	return newPacerOnCfg(t, rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 60}})
}

func newPacerOnCfg(t *testing.T, rdb redis.UniversalClient, cfg pacer.Config) *pacer.Pacer {
	t.Helper()
	p, err := pacer.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pairs runs goroutines goroutines on each of ps, each acquiring 100
// tokens and settling 60 calls times, one after another.
func pairs(t *testing.T, ps []*pacer.Pacer, goroutines, calls int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range len(ps) * goroutines {
		wg.Go(func() {
			for range calls {
				l, err := ps[i%len(ps)].Acquire(ctx, pacer.Request{Tokens: 100})
				if err != nil {
					t.Errorf("Acquire = %v", err)
					return
				}
				if err := l.Settle(ctx, 60); err != nil {
					t.Errorf("Settle = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Issue 23: a Redis restarted without persistence comes back without the
// library (and without the budget's keys); a Pacer's next batches load it
// again and go by FCALL, every call served. A real redis-server process,
// killed and started again. (Per-minute limits: a budget whose state was
// lost starts from empty buckets, see the contract's "A lost state", and
// a day's bucket of 100,000 requests refills about one a second.)
func TestBatchesAfterARestart(t *testing.T) {
	ctx := context.Background()
	s := redistest.NewServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { rdb.Close() })
	ps := []*pacer.Pacer{newPacerOnCfg(t, rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 6_000_000, TPM: 600_000_000}})}
	pairs(t, ps, 16, 4)
	if got := pacer.BatchesBy(ps[0]); got != "FCALL" {
		t.Fatalf("before the restart, batches went by %q; want FCALL", got)
	}
	s.Kill()
	s.Start()
	if n, err := rdb.FunctionList(ctx, redis.FunctionListQuery{}).Result(); err != nil || len(n) != 0 {
		t.Fatalf("the restarted server holds %d libraries (%v); want none", len(n), err)
	}
	pairs(t, ps, 16, 4)
	if calls, sent := pacer.AcquireCounts(ps[0]); sent >= calls {
		t.Fatalf("%d acquires in %d script calls: nothing was batched, so the test shows nothing", calls, sent)
	}
	if got := pacer.BatchesBy(ps[0]); got != "FCALL" {
		t.Fatalf("after the restart, batches went by %q; want FCALL", got)
	}
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lua.LibraryName}).Result()
	if err != nil || len(libs) != 1 {
		t.Fatalf("FUNCTION LIST %s after the restart = %v, %v; want the library loaded again", lua.LibraryName, libs, err)
	}
}
