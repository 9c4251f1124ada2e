package pacer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llmpacer/llmpacer/internal/cluster"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// fcaller is a client that calls Redis functions (FCALL): go-redis's
// clients, and the wrappers a Pacer puts around them (see watched and
// cluster.Scripter).
type fcaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
}

// errNoFCall says a client cannot call functions: the batch goes by
// EVALSHA.
var errNoFCall = errors.New("llmpacer: the client has no FCall")

// errCmd returns a command that failed with err before it was sent.
func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// How a Pacer sends its batch scripts (see functions).
const (
	fnUnknown int32 = iota // not yet tried
	fnCall                 // by FCALL: the server has the library
	fnEval                 // by EVALSHA: the server cannot take it
)

// functions sends a budget's batch scripts, acquires.lua and settles.lua,
// as the functions of lua.Library (FCALL) where the server has FUNCTION
// (Redis 7 and later), and by EVALSHA where it has not (Redis 6,
// miniredis) or will not load it (an ACL without @scripting's FUNCTION):
// the same text, the same replies and state, without the cost of making
// its helpers on every call (docs/results.md, issue 23, round 13).
//
// The library is loaded when a call finds its function missing: on a
// Pacer's first batch, and after a restart or a FUNCTION FLUSH has lost
// it. A missing function runs nothing, so the call is sent again once
// the library is in. On a Cluster it is loaded on every primary; a
// replica gets it by replication and keeps it when it is promoted.
type functions struct {
	sc   redis.Scripter        // sends FCALL and EVALSHA (it may count errors: see watched)
	rdb  redis.UniversalClient // loads the library
	mode atomic.Int32
	mu   sync.Mutex // one load at a time
}

// run runs script's batch (fn, its function's name) on keys and args and
// returns its reply.
func (f *functions) run(ctx context.Context, fn string, script *redis.Script, keys []string, args []any) (any, error) {
	fc, ok := f.sc.(fcaller)
	if !ok || f.mode.Load() == fnEval {
		return script.Run(ctx, f.sc, keys, args...).Result()
	}
	v, err := fc.FCall(ctx, fn, keys, args...).Result()
	if isMissing(err) {
		lerr := f.load(ctx)
		if lerr == nil {
			v, err = fc.FCall(ctx, fn, keys, args...).Result()
		}
		if lerr != nil || isMissing(err) {
			// Not loaded where the call goes (a primary down while the
			// others took it, a slot map moving): this call goes by
			// EVALSHA, and the next tries FCALL again, unless the server
			// refused FUNCTION LOAD itself.
			if noFunctions(lerr) {
				f.mode.Store(fnEval)
			}
			return script.Run(ctx, f.sc, keys, args...).Result()
		}
	}
	switch {
	case err == nil:
		f.mode.CompareAndSwap(fnUnknown, fnCall)
		return v, nil
	case noFunctions(err):
		// The server cannot call functions: EVALSHA from now on.
		f.mode.Store(fnEval)
		return script.Run(ctx, f.sc, keys, args...).Result()
	}
	return nil, err // the network's, or the script's own
}

// load loads lua.Library on the server, or on every primary of a
// Cluster. A library of that name already there is the same text (the
// name holds its hash).
func (f *functions) load(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	one := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionLoad(ctx, lua.Library).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	each := func(ctx context.Context, c *redis.Client) error { return one(ctx, c) }
	switch c := f.rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, each)
	case *redis.Ring:
		return c.ForEachShard(ctx, each)
	}
	return one(ctx, f.rdb)
}

// isMissing reports whether err says the function called is not loaded.
func isMissing(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.Contains(err.Error(), "Function not found")
}

// noFunctions reports whether err is the server's refusal of FCALL or
// FUNCTION LOAD itself: a command it does not know (Redis 6, miniredis),
// one the user may not run (NOPERM), or a library it cannot compile; or
// a client that cannot call functions. Neither a network error nor one a
// Cluster's topology explains is.
func noFunctions(err error) bool {
	if errors.Is(err, errNoFCall) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) || cluster.Unreachable(err) {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "unknown command") || strings.HasPrefix(s, "NOPERM") || strings.Contains(s, "Error compiling")
}
