package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestScripterWrapsClusterClientsOnly(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if got := Scripter(c); got != redis.Scripter(c) {
		t.Errorf("Scripter(*redis.Client) = %T, want the client itself", got)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	if got, ok := Scripter(cc).(*reloading); !ok || got.c != cc {
		t.Errorf("Scripter(*redis.ClusterClient) = %T, want a *reloading on the client", got)
	}
}

// A slot map that sends a command to a dead node is reloaded, once for
// several failures in a row.
func TestRefusedNodeReloadsSlotMap(t *testing.T) {
	redistest.QuietRedisLog(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().(*net.TCPAddr)
	_ = ln.Close()
	// The seed says a dead node serves every slot, as a node does until it
	// learns of a failover.
	slots := fmt.Sprintf("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%d\r\n$40\r\n%040d\r\n", dead.Port, 1)
	seed := newNode(t, func(cmd []string) string {
		if len(cmd) == 2 && cmd[0] == "cluster" && cmd[1] == "slots" {
			return slots
		}
		return "-ERR unknown command\r\n"
	})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed.Addr()}, MaxRetries: -1, MaxRedirects: -1, DialerRetries: 1})
	defer cc.Close()
	r := &reloading{c: cc, every: time.Hour}
	ctx := context.Background()

	if err := r.Eval(ctx, "return 1", []string{"k"}).Err(); !unreachable(err) {
		t.Fatalf("Eval on a dead node = %v; want a connection error", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for seed.Count("CLUSTER SLOTS") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := seed.Count("CLUSTER SLOTS"); got != 2 {
		t.Fatalf("CLUSTER SLOTS asked %d times after a refused Eval; want 2 (load, reload)", got)
	}
	for range 3 {
		_ = r.EvalSha(ctx, "0000000000000000000000000000000000000000", []string{"k"}).Err()
	}
	time.Sleep(300 * time.Millisecond) // a reload is asynchronous
	if got := seed.Count("CLUSTER SLOTS"); got != 2 {
		t.Errorf("CLUSTER SLOTS asked %d times after three more failures within the interval; want still 2", got)
	}
}

func TestDue(t *testing.T) {
	r := &reloading{every: 500 * time.Millisecond}
	t0 := time.Unix(1_800_000_000, 0)
	for _, tt := range []struct {
		after time.Duration
		want  bool
	}{
		{0, true}, // the first
		{100 * time.Millisecond, false},
		{499 * time.Millisecond, false},
		{500 * time.Millisecond, true},
		{600 * time.Millisecond, false},
		{time.Second, true},
	} {
		if got := r.due(t0.Add(tt.after)); got != tt.want {
			t.Errorf("due(t0+%v) = %v, want %v", tt.after, got, tt.want)
		}
	}
}
