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

// Errors as go-redis reports them, from a real client against a node that
// answers as a failing cluster would.
func TestUnreachable(t *testing.T) {
	redistest.QuietRedisLog(t) // a refused dial is logged
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name   string
		answer string // "" closes the connection
		addr   string // instead of a node answering answer
		ctx    context.Context
		want   bool
	}{
		{name: "refused", addr: closed, want: true},
		{name: "closed mid-call", answer: "", want: true},
		{name: "read timeout", answer: "hang", want: true},
		{name: "CLUSTERDOWN", answer: "-CLUSTERDOWN Hash slot not served\r\n", want: true},
		{name: "TRYAGAIN", answer: "-TRYAGAIN Multiple keys request during rehashing of slot\r\n", want: true},
		{name: "MOVED, reloaded by go-redis", answer: "-MOVED 3999 127.0.0.1:6381\r\n"},
		{name: "READONLY, reloaded by go-redis", answer: "-READONLY You can't write against a read only replica.\r\n"},
		{name: "NOSCRIPT", answer: "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{name: "script error", answer: "-ERR user_script:1: boom script: 1, on @user_script:1.\r\n"},
		{name: "OOM", answer: "-OOM command not allowed when used memory > 'maxmemory'.\r\n"},
		{name: "nil reply", answer: "$-1\r\n"},
		{name: "reply", answer: ":1\r\n"},
		{name: "caller cancelled", answer: ":1\r\n", ctx: cancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := tt.addr
			if addr == "" {
				addr = newNode(t, func([]string) string { return tt.answer }).Addr()
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			// Only the node that hangs must meet the read timeout. The
			// others get a long one: on a loaded machine a node that
			// answers can take longer than 50 ms, and its answer then
			// reads as a timeout.
			timeout := 10 * time.Second
			if tt.answer == "hang" {
				timeout = 50 * time.Millisecond
			}
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: timeout})
			defer c.Close()
			err := c.Eval(ctx, "return 1", []string{"k"}).Err()
			if got := unreachable(err); got != tt.want {
				t.Errorf("unreachable(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
	// Pacer wraps what it gets; the classification must see through that.
	if err := fmt.Errorf("pacer: redis: %w", context.DeadlineExceeded); unreachable(err) {
		t.Errorf("unreachable(%v) = true, want false: the caller's deadline says nothing of the cluster", err)
	}
}
