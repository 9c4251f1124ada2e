// Package redistest gives tests the Redis servers they run against: an
// in-process miniredis always, and the real servers that .ci/run starts.
//
//   - LLMPACER_REDIS_ADDR: one real Redis (host:port). Unset, tests try
//     127.0.0.1:6379 and skip the real lane if nothing answers there.
//   - LLMPACER_CLUSTER_ADDRS: comma-separated seed nodes of a Redis Cluster.
//     Unset, the cluster lane is skipped.
//
// With CI=true a missing server fails the test instead: a skipped suite
// would read as green.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Backend is one Redis a test runs against.
type Backend struct {
	Kind string // "miniredis", "redis" or "cluster"
	// Mini is the in-process server for Kind "miniredis", nil otherwise.
	Mini *miniredis.Miniredis
	// Addrs of the server or cluster seed nodes.
	Addrs []string
}

// Client returns a new client on the backend, closed when the test ends.
// Several clients on one backend act as several processes.
func (b Backend) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	if b.Kind == "cluster" {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: b.Addrs})
	} else {
		c = redis.NewClient(&redis.Options{Addr: b.Addrs[0]})
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Name returns a budget name unique to this run, so tests sharing a real
// Redis never see each other's budgets.
func Name(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	n := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")").Replace(t.Name())
	if len(n) > 120 {
		n = n[:120]
	}
	return "test:" + n + ":" + hex.EncodeToString(b[:])
}

// Mini starts a miniredis for the test.
func Mini(t testing.TB) Backend {
	t.Helper()
	m := miniredis.RunT(t)
	return Backend{Kind: "miniredis", Mini: m, Addrs: []string{m.Addr()}}
}

// Real returns the real Redis, or skips (fails under CI=true) without one.
func Real(t testing.TB) Backend {
	t.Helper()
	addr := os.Getenv("LLMPACER_REDIS_ADDR")
	explicit := addr != ""
	if !explicit {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		missing(t, "Redis at "+addr, err, explicit)
	}
	return Backend{Kind: "redis", Addrs: []string{addr}}
}

// Cluster returns the Redis Cluster, or skips (fails under CI=true)
// without one.
func Cluster(t testing.TB) Backend {
	t.Helper()
	env := os.Getenv("LLMPACER_CLUSTER_ADDRS")
	if env == "" {
		missing(t, "Redis Cluster (LLMPACER_CLUSTER_ADDRS unset)", nil, false)
	}
	addrs := strings.Split(env, ",")
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	}); err != nil {
		missing(t, "Redis Cluster at "+env, err, true)
	}
	return Backend{Kind: "cluster", Addrs: addrs}
}

func missing(t testing.TB, what string, err error, explicit bool) {
	t.Helper()
	if os.Getenv("CI") == "true" || explicit {
		t.Fatalf("%s is not available (%v); .ci/run starts it, see README.md", what, err)
	}
	t.Skipf("%s is not available (%v); set CI=true to make this a failure", what, err)
}

// Each runs f as a subtest on miniredis, the real Redis and the cluster.
func Each(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { f(t, Mini(t)) })
	t.Run("redis", func(t *testing.T) { f(t, Real(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, Cluster(t)) })
}

// QuietRedisLog silences go-redis's own log for the rest of the test, for
// tests that make it fail on purpose.
func QuietRedisLog(t testing.TB) {
	redis.SetLogger(quiet{})
	t.Cleanup(func() { redis.SetLogger(loud{}) })
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// loud restores logging to the standard logger, as go-redis does by default.
type loud struct{}

func (loud) Printf(_ context.Context, format string, v ...any) { log.Printf(format, v...) }
