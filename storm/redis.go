package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// backend is the Redis the shared budgets live in, with a count of the
// commands the storm's client sent to it.
type backend struct {
	rdb  redis.UniversalClient
	mini *miniredis.Miniredis // the in-process server, nil for -redis and -cluster
	desc string
	addr string // the address -procs' children use: the in-process miniredis's, else "" (theirs is in the flags)
	cmds *atomic.Int64
	// keys are the keys the scripts were sent, deleted by cleanup: a
	// real Redis is somebody's, not a scratch pad.
	keys  *sync.Map
	close func()
}

// openRedis connects to the Redis the flags name, or starts an in-process
// miniredis when they name none.
func openRedis(ctx context.Context, o options) (*backend, error) {
	var (
		rdb   redis.UniversalClient
		desc  string
		addr  string
		mini  *miniredis.Miniredis
		close = func() {}
	)
	switch {
	case len(o.cluster) > 0:
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.cluster, PoolSize: 256})
		desc = "Redis Cluster " + strings.Join(o.cluster, ",")
	case o.redisURL != "":
		opt, err := redisOptions(o.redisURL)
		if err != nil {
			return nil, err
		}
		opt.PoolSize = 256
		rdb = redis.NewClient(opt)
		desc = "Redis " + opt.Addr
	default:
		m, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("starting miniredis: %w", err)
		}
		rdb = redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 256})
		desc = "miniredis (in-process)"
		addr, close, mini = m.Addr(), m.Close, m
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		close()
		return nil, fmt.Errorf("%s: %w", desc, err)
	}
	b := &backend{rdb: rdb, desc: desc, addr: addr, mini: mini, cmds: new(atomic.Int64), keys: new(sync.Map)}
	// Count after the ping, so the count is the pacer's alone.
	rdb.AddHook(countHook{b.cmds, b.keys})
	b.close = func() { _ = rdb.Close(); close() }
	return b, nil
}

// cleanup deletes every key the storm's scripts were sent, on a real Redis
// (an in-process miniredis goes with the process). The process that runs
// the rows calls it when they are done; -procs' children do not, as their
// budget is shared until the row ends.
func (b *backend) cleanup(ctx context.Context) error {
	if b.mini != nil {
		return nil
	}
	var keys []string
	b.keys.Range(func(k, _ any) bool {
		keys = append(keys, k.(string))
		return true
	})
	// One DEL a key: on a cluster the keys of different budgets live in
	// different slots.
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		return nil
	})
	return err
}

// quiet waits until no command has been sent for idle, or at most limit.
func (b *backend) quiet(idle, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for n := b.cmds.Load(); time.Now().Before(deadline); {
		time.Sleep(idle)
		m := b.cmds.Load()
		if m == n {
			return
		}
		n = m
	}
}

// countHook counts the commands the pacer sends through the client: every
// command, pipelined or not, except those go-redis sends to set up a new
// connection (HELLO, CLIENT SETINFO, AUTH, SELECT), which also pass through
// hooks but depend on the pool, not on the pacer. A script run is one
// EVALSHA, or two (EVALSHA answered NOSCRIPT, then EVAL) the first time the
// server meets the script.
type countHook struct {
	n    *atomic.Int64
	keys *sync.Map
}

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

func (h countHook) count(cmd redis.Cmder) {
	if name := cmd.Name(); name == "evalsha" || name == "eval" || name == "fcall" {
		// EVAL(SHA) script numkeys key... (FCALL function numkeys key...):
		// remember the keys.
		a := cmd.Args()
		if len(a) > 2 {
			if n, ok := a[2].(int); ok {
				for i := 3; i < 3+n && i < len(a); i++ {
					if k, ok := a[i].(string); ok {
						h.keys.Store(k, struct{}{})
					}
				}
			}
		}
	}
	switch cmd.Name() {
	case "hello", "client", "auth", "select", "readonly":
		return
	case "ping":
		// Sent only by a Pacer's outage probe, to learn whether its
		// client was closed: it never leaves the process.
		return
	}
	h.n.Add(1)
}

// redisOptions parses -redis: a redis:// or rediss:// URL, or a bare
// host:port, on a loopback address.
func redisOptions(s string) (*redis.Options, error) {
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	opt, err := redis.ParseURL(s)
	if err != nil {
		return nil, fmt.Errorf("-redis %q: %v; want redis://127.0.0.1:6379", s, err)
	}
	if opt.Network == "unix" {
		return opt, nil // a socket is on this machine by definition
	}
	if err := checkLoopback("-redis", opt.Addr); err != nil {
		return nil, err
	}
	return opt, nil
}

// checkLoopback refuses any address that is not this machine's loopback.
// The storm floods the server with scripts and writes keys; pointed at a
// shared Redis it would disturb other people's work. Host names other than
// localhost are refused rather than resolved: what a name resolves to can
// change between the check and the connection.
func checkLoopback(flagName, hostport string) error {
	host, port, err := net.SplitHostPort(strings.TrimSpace(hostport))
	if err != nil || port == "" {
		return fmt.Errorf("%s %q: want host:port, e.g. 127.0.0.1:6379", flagName, hostport)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s %s: only loopback addresses (127.0.0.0/8, ::1, localhost) are allowed; "+
		"the storm floods the server with scripts and writes keys, so it will not run against a shared Redis", flagName, hostport)
}
