package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Failover returns the Redis Cluster kept for failover tests
// (LLMPACER_FAILOVER_ADDRS): three masters with a replica each, on this
// machine, which a test may break by killing a master. Other tests must not
// use it. It skips (fails under CI=true) without one.
func Failover(t testing.TB) Backend {
	t.Helper()
	env := os.Getenv("LLMPACER_FAILOVER_ADDRS")
	if env == "" {
		missing(t, "Redis Cluster for failover tests (LLMPACER_FAILOVER_ADDRS unset)", nil, false)
	}
	addrs := strings.Split(env, ",")
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, DialTimeout: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := c.ClusterInfo(ctx).Result()
		cancel()
		_ = c.Close()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = errors.New("cluster_state is not ok")
		}
		if err != nil {
			missing(t, "Redis Cluster node "+a+" of LLMPACER_FAILOVER_ADDRS", err, true)
		}
	}
	return Backend{Kind: "cluster", Addrs: addrs}
}

// Shard is one master of a Redis Cluster and its replicas.
type Shard struct {
	Master   string
	Replicas []string
}

// ShardOf returns the shard serving key, as the first of addrs that answers
// sees it.
func ShardOf(t testing.TB, addrs []string, key string) Shard {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, DialTimeout: time.Second, MaxRetries: -1})
		var slot int64
		var slots []redis.ClusterSlot
		slot, err = c.ClusterKeySlot(ctx, key).Result()
		if err == nil {
			slots, err = c.ClusterSlots(ctx).Result()
		}
		_ = c.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
				sh := Shard{Master: s.Nodes[0].Addr}
				for _, n := range s.Nodes[1:] {
					sh.Replicas = append(sh.Replicas, n.Addr)
				}
				return sh
			}
		}
		t.Fatalf("no node of %s serves slot %d of %q", a, slot, key)
	}
	t.Fatalf("no node of %v answered CLUSTER SLOTS: %v", addrs, err)
	return Shard{}
}

// Kill kills the Redis at addr with SIGKILL, as a crash would, and returns
// once it refuses connections. The server must run on this machine: its
// pid comes from INFO.
func Kill(t testing.TB, addr string) {
	t.Helper()
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Fatalf("Kill(%s): only a Redis on a loopback address can be killed", addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	info, err := c.Info(ctx, "server").Result()
	_ = c.Close()
	if err != nil {
		t.Fatalf("Kill(%s): INFO server: %v", addr, err)
	}
	pid := 0
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	proc, err := os.FindProcess(pid)
	if pid <= 0 || err != nil {
		t.Fatalf("Kill(%s): no process for pid %d from INFO (%v)", addr, pid, err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatalf("Kill(%s): pid %d: %v", addr, pid, err)
	}
	for ctx.Err() == nil {
		conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return
		}
		_ = conn.Close()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("Kill(%s): pid %d still accepts connections", addr, pid)
}

// Promoted waits until one of replicas reports itself a master (ROLE, asked
// every 10 ms) and returns it and when that was first seen. It fails the
// test if none is promoted within d.
func Promoted(t testing.TB, replicas []string, d time.Duration) (string, time.Time) {
	t.Helper()
	clients := make([]*redis.Client, len(replicas))
	for i, a := range replicas {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
		defer clients[i].Close()
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for i, c := range clients {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			role, err := c.Do(ctx, "ROLE").Slice()
			cancel()
			if err == nil && len(role) > 0 && role[0] == "master" {
				return replicas[i], time.Now()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no replica of %v was promoted within %v", replicas, d)
	return "", time.Time{}
}
