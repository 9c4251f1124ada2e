package pacer

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

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

// How a Pacer's latest batch went (see functions).
const (
	byNone int32 = iota // no batch yet
	byFCall
	byEvalSha
)

// evalFor is how long batches go by EVALSHA after the server refused
// functions, or a load failed, before FCALL is tried again: long enough
// that a server without them costs one failed call a process in that
// time, short enough that one upgraded, or an ACL changed, is soon used.
const evalFor = 30 * time.Second

// functions sends a budget's batch scripts, acquires.lua and settles.lua,
// as the functions of lua.Library (FCALL) where the server has FUNCTION
// (Redis 7 and later), and by EVALSHA where it has not (Redis 6,
// miniredis) or will not load it (an ACL without FUNCTION and FCALL):
// the same text, the same replies and state, without the cost of making
// its helpers on every call (docs/results.md, issue 23, round 13).
//
// The library is loaded when a call finds its function missing: on the
// process's first batch, and after a restart or a FUNCTION FLUSH has lost
// it. A missing function ran nothing, so the call is sent again once the
// library is in. On a Cluster it is loaded on every primary; a replica
// gets it by replication and keeps it when it is promoted.
type functions struct {
	sc   redis.Scripter        // sends FCALL and EVALSHA (it may count errors: see watched)
	rdb  redis.UniversalClient // loads the library
	lib  *library              // shared by the Pacers on rdb
	last atomic.Int32          // how the latest batch went (byFCall, byEvalSha)
}

// library is what a process knows of the library on one client's
// server, shared by every Pacer on that client: so that after a restart
// a process loads it once, not once a budget.
type library struct {
	mu       sync.Mutex   // one load at a time
	evalTill atomic.Int64 // UnixNano before which batches go by EVALSHA (see evalFor)
}

// libraries holds each client's library, keyed by a weak pointer to the
// client and dropped when the client is collected.
var libraries sync.Map

// newFunctions returns the functions of a Pacer sending on sc, with the
// library of rdb, its client.
func newFunctions(sc redis.Scripter, rdb redis.UniversalClient) *functions {
	var lib *library
	switch c := rdb.(type) {
	case *redis.Client:
		lib = libraryOf(c)
	case *redis.ClusterClient:
		lib = libraryOf(c)
	case *redis.Ring:
		lib = libraryOf(c)
	default:
		lib = &library{}
	}
	return &functions{sc: sc, rdb: rdb, lib: lib}
}

func libraryOf[T any](c *T) *library {
	k := weak.Make(c)
	if l, ok := libraries.Load(k); ok {
		return l.(*library)
	}
	l, loaded := libraries.LoadOrStore(k, &library{})
	if !loaded {
		runtime.AddCleanup(c, func(k weak.Pointer[T]) { libraries.Delete(k) }, k)
	}
	return l.(*library)
}

// run runs script's batch (fn, its function's name) on keys and args and
// returns its reply.
func (f *functions) run(ctx context.Context, fn string, script *redis.Script, keys []string, args []any) (any, error) {
	fc, ok := f.sc.(fcaller)
	if !ok || time.Now().UnixNano() < f.lib.evalTill.Load() {
		return f.evalSha(ctx, script, keys, args)
	}
	v, err := fc.FCall(ctx, fn, keys, args...).Result()
	if isMissing(err) {
		lerr := f.load(ctx)
		if lerr == nil {
			v, err = fc.FCall(ctx, fn, keys, args...).Result()
		}
		if lerr != nil || isMissing(err) {
			// Not loaded where the call goes (the server refused the
			// load, a primary was down, the slot map moved): this call
			// goes by EVALSHA; after a failed load, the next ones too
			// for a while.
			if lerr != nil {
				f.lib.evalTill.Store(time.Now().Add(evalFor).UnixNano())
			}
			return f.evalSha(ctx, script, keys, args)
		}
	}
	switch {
	case err == nil:
		f.last.Store(byFCall)
		return v, nil
	case noFunctions(err):
		// The server cannot call functions: EVALSHA for a while.
		f.lib.evalTill.Store(time.Now().Add(evalFor).UnixNano())
		return f.evalSha(ctx, script, keys, args)
	}
	return nil, err // the network's, or the script's own: it may have run
}

// evalSha runs script's batch by EVALSHA.
func (f *functions) evalSha(ctx context.Context, script *redis.Script, keys []string, args []any) (any, error) {
	f.last.Store(byEvalSha)
	return script.Run(ctx, f.sc, keys, args...).Result()
}

// load loads lua.Library on the server, or on every primary of a
// Cluster. A library of that name already there is the same text (the
// name holds its hash).
func (f *functions) load(ctx context.Context) error {
	f.lib.mu.Lock()
	defer f.lib.mu.Unlock()
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

// noFunctions reports whether err is the server's refusal of FCALL itself,
// before any function ran: a command it does not know (Redis 6,
// miniredis) or one the user may not run (NOPERM); or a client that
// cannot call functions. An error from a function that ran reads
// otherwise (Redis rewrites a refusal inside a script), and neither a
// network error nor one a Cluster's topology explains is one.
func noFunctions(err error) bool {
	if errors.Is(err, errNoFCall) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) || cluster.Unreachable(err) {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "unknown command") || strings.HasPrefix(s, "NOPERM")
}
