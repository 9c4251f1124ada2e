// Package cluster keeps a Redis Cluster client's slot map fresh through a
// failover. go-redis reloads the map every ClusterStateReloadInterval (60 s
// by default) and on MOVED or ASK replies. A master that died answers
// neither: its connections are refused. So after its replica takes over, a
// client with the defaults keeps dialling the dead master for up to a
// minute.
package cluster

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// reloadEvery bounds how often one Scripter asks for a reload. During an
// outage every call fails, and each reload costs a CLUSTER SLOTS. Recovery
// after a promotion waits at most this long plus one failed call.
const reloadEvery = 500 * time.Millisecond

// Scripter returns what the scripts should run on. For a
// *redis.ClusterClient it is a Scripter that asks the client to reload its
// slot map (ClusterClient.ReloadState) when a command reaches no node or the
// node says its slot is changing hands, at most once every reloadEvery. Any
// other client is returned as it is. The client's options are not changed.
func Scripter(c redis.Scripter) redis.Scripter {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return c
	}
	return &reloading{c: cc, every: reloadEvery}
}

var _ redis.Scripter = (*reloading)(nil)

// reloading is a ClusterClient that reloads its slot map after errors that
// a stale map explains.
type reloading struct {
	c     *redis.ClusterClient
	every time.Duration
	last  atomic.Int64 // UnixNano of the last reload asked; 0 before the first
}

// due reports whether a reload may be asked at now, and if so records it.
func (r *reloading) due(now time.Time) bool {
	last := r.last.Load()
	if last != 0 && now.UnixNano()-last < int64(r.every) {
		return false
	}
	return r.last.CompareAndSwap(last, now.UnixNano())
}

// check asks for a reload if cmd failed for want of the right node, and
// returns cmd.
func check[C redis.Cmder](ctx context.Context, r *reloading, cmd C) C {
	if unreachable(cmd.Err()) && r.due(time.Now()) {
		// Asynchronous: cmd's caller is not held up, its next command uses the
		// new map once it has arrived.
		r.c.ReloadState(ctx)
	}
	return cmd
}

func (r *reloading) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return check(ctx, r, r.c.Eval(ctx, script, keys, args...))
}

func (r *reloading) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return check(ctx, r, r.c.EvalSha(ctx, sha1, keys, args...))
}

func (r *reloading) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return check(ctx, r, r.c.EvalRO(ctx, script, keys, args...))
}

func (r *reloading) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return check(ctx, r, r.c.EvalShaRO(ctx, sha1, keys, args...))
}

// FCall calls a Redis function, routed by its first key as EVALSHA is.
func (r *reloading) FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd {
	return check(ctx, r, r.c.FCall(ctx, function, keys, args...))
}

func (r *reloading) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return check(ctx, r, r.c.ScriptExists(ctx, hashes...))
}

func (r *reloading) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return check(ctx, r, r.c.ScriptLoad(ctx, script))
}
