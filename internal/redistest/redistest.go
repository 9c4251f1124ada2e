// Package redistest gives tests the Redis servers they run against: an
// in-process miniredis always, and the real servers that .ci/run starts.
//
//   - LLMPACER_REDIS_ADDR: one real Redis (host:port). Unset, the real lane
//     is skipped: a test never writes to a Redis it was not given, such as
//     someone's own on 127.0.0.1:6379.
//   - LLMPACER_CLUSTER_ADDRS: comma-separated seed nodes of a Redis Cluster.
//     Unset, the cluster lane is skipped.
//
// With CI=true a missing server fails the test instead: a skipped suite
// would read as green.
//
// A test leaves nothing behind on a real server: Real and Cluster delete,
// when the test ends, every key that carries a budget name Name made for
// the test or its subtests (on every master of a cluster, since each key
// lives on the node that owns its slot).
//
// Every backend also silences go-redis's own logger for the rest of the
// test binary. go-redis logs from its pool and dialer, outside any test
// (for example "Unexpected conn ... state changed by hook to CLOSED" when a
// context ends mid-command, or a failed dial after a test closed its
// server); the tests assert on errors, and the lines only bury the output
// that matters. Set LLMPACER_REDIS_LOG=1 to keep them.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
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
	c := b.client(0)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (b Backend) client(dialTimeout time.Duration) redis.UniversalClient {
	if b.Kind == "cluster" {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: b.Addrs, DialTimeout: dialTimeout})
	}
	return redis.NewClient(&redis.Options{Addr: b.Addrs[0], DialTimeout: dialTimeout})
}

// binary is this test binary's mark in every name Name makes. The packages
// of `go test ./...` run at once against the same servers; the cleanup
// that Real and Cluster register matches it, so it never deletes the keys
// of a test running in another binary. It is set once and never changes.
var binary = randomHex(4)

// maxTestName bounds the test's name inside a budget name: pacer allows
// 200 bytes, and the name also carries "test:", binary and a random suffix.
const maxTestName = 120

// Name returns a budget name unique to this run, so tests sharing a real
// Redis never see each other's budgets. Names made from it by appending
// (Name(t)+"-2") are unique too, and the cleanup of Real and Cluster
// deletes their keys as well.
func Name(t testing.TB) string {
	return "test:" + binary + ":" + testName(t) + ":" + randomHex(6)
}

// testName is t.Name() as it appears in budget names: characters a budget
// name or a key's hash tag cannot hold replaced, cut to maxTestName.
func testName(t testing.TB) string {
	n := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")").Replace(t.Name())
	if len(n) > maxTestName {
		n = n[:maxTestName]
	}
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Mini starts a miniredis for the test.
func Mini(t testing.TB) Backend {
	t.Helper()
	quiet()
	m := miniredis.RunT(t)
	return Backend{Kind: "miniredis", Mini: m, Addrs: []string{m.Addr()}}
}

// Real returns the Redis that LLMPACER_REDIS_ADDR names, or skips (fails
// under CI=true) when it is unset. It never guesses an address. The keys
// of every budget Name made for t or its subtests are deleted when t ends.
func Real(t testing.TB) Backend {
	t.Helper()
	quiet()
	addr := os.Getenv("LLMPACER_REDIS_ADDR")
	if addr == "" {
		missing(t, "Redis (LLMPACER_REDIS_ADDR unset)", nil, false)
	}
	b := Backend{Kind: "redis", Addrs: []string{addr}}
	c := b.client(time.Second)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		missing(t, "Redis at "+addr, err, true)
	}
	t.Cleanup(func() { b.sweep(t) })
	return b
}

// Cluster returns the Redis Cluster that LLMPACER_CLUSTER_ADDRS names, or
// skips (fails under CI=true) when it is unset. The keys of every budget
// Name made for t or its subtests are deleted from every master when t
// ends.
func Cluster(t testing.TB) Backend {
	t.Helper()
	quiet()
	env := os.Getenv("LLMPACER_CLUSTER_ADDRS")
	if env == "" {
		missing(t, "Redis Cluster (LLMPACER_CLUSTER_ADDRS unset)", nil, false)
	}
	b := Backend{Kind: "cluster", Addrs: strings.Split(env, ",")}
	c := b.client(time.Second).(*redis.ClusterClient)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	}); err != nil {
		missing(t, "Redis Cluster at "+env, err, true)
	}
	t.Cleanup(func() { b.sweep(t) })
	return b
}

func missing(t testing.TB, what string, err error, explicit bool) {
	t.Helper()
	why := ""
	if err != nil {
		why = " (" + err.Error() + ")"
	}
	if os.Getenv("CI") == "true" || explicit {
		t.Fatalf("%s is not available%s; .ci/run starts it, see README.md", what, why)
	}
	t.Skipf("%s is not available%s; set CI=true to make this a failure", what, why)
}

// sweep deletes every key whose name holds a budget name that Name made
// for t or one of its subtests, whatever the key prefix. On a cluster it
// scans every master, each key being on the node that owns its slot, and
// deletes key by key: keys of different budgets lie in different slots,
// and one DEL may not span slots.
func (b Backend) sweep(t testing.TB) {
	// Names are "test:<binary>:<test name>:<random>", and a subtest's test
	// name is its parent's, a "." and its own.
	match := "*test:" + binary + ":" + globEscape(testName(t)) + "[:.]*"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := b.client(time.Second)
	defer c.Close()
	del := func(ctx context.Context, c *redis.Client) error {
		var keys []string
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Del(ctx, k)
			}
			return nil
		})
		return err
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, del)
	case *redis.Client:
		err = del(ctx, c)
	}
	if err != nil {
		t.Errorf("deleting the test's keys (%s) from %s: %v", match, b.Kind, err)
	}
}

// globEscape quotes the characters Redis's MATCH patterns treat specially.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}

// Each runs f as a subtest on miniredis, the real Redis and the cluster.
func Each(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { f(t, Mini(t)) })
	t.Run("redis", func(t *testing.T) { f(t, Real(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, Cluster(t)) })
}

var quietOnce sync.Once

// quiet silences go-redis's logger for the rest of the binary (see the
// package doc), unless LLMPACER_REDIS_LOG=1. It is never turned back on:
// go-redis's pool logs from its own goroutines, after the test that
// caused a line has ended.
func quiet() {
	quietOnce.Do(func() {
		if os.Getenv("LLMPACER_REDIS_LOG") != "1" {
			redis.SetLogger(discard{})
		}
	})
}

// QuietRedisLog silences go-redis's own log, for tests that make clients
// without this package. Every backend of this package already does.
func QuietRedisLog(testing.TB) { quiet() }

type discard struct{}

func (discard) Printf(context.Context, string, ...any) {}
