// Package lua holds llmpacer's Redis scripts: the only code that reads or
// changes a budget's state. Each script is a .lua file in this folder,
// embedded at build time; the header of each file states its KEYS, ARGV and
// reply, and docs/lua-contract.md restates that contract for workers written
// in other languages, which may share a budget by running the same scripts.
//
// prelude.lua is prepended to every script, so the clock and key expiry
// rules are written once, with sliding.lua and slots.lua placed after it
// as the bodies of two functions that only some calls make (see Source).
// A worker in another language must send the same concatenation, which
// the Source function returns.
//
// A bucket is stored as one time (its GCRA theoretical arrival time, in
// microseconds), and callers send each call's share of every bucket in
// microseconds too, so that the scripts only add and compare integers. The
// Go side of that arithmetic is internal; docs/lua-contract.md gives it
// for other languages.
//
// Most users never import this package: package pacer runs the scripts.
package lua

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed prelude.lua
	preludeSrc string
	//go:embed sliding.lua
	slidingSrc string
	//go:embed slots.lua
	slotsSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed settle.lua
	settleSrc string
	//go:embed settles.lua
	settlesSrc string
	//go:embed acquires.lua
	acquiresSrc string
	//go:embed batch.lua
	batchSrc string
	//go:embed keepalive.lua
	keepAliveSrc string
	//go:embed pause.lua
	pauseSrc string
	//go:embed stop.lua
	stopSrc string
	//go:embed snapshot.lua
	snapshotSrc string
	//go:embed define.lua
	defineSrc string
	//go:embed route.lua
	routeSrc string
)

// The scripts, ready to run with Script.Run, which sends EVALSHA and falls
// back to EVAL (loading the script) when the server does not know it yet.
// They never change after init, so sharing them is safe.
var (
	// Acquire admits a call against every limit, all or nothing (acquire.lua).
	Acquire = redis.NewScript(Source("acquire"))
	// Acquires admits several calls of one budget, each as Acquire would,
	// in one call (acquires.lua, with acquire.lua inside: see Source).
	Acquires = redis.NewScript(Source("acquires"))
	// Settle ends a lease: settle, release or cancel (settle.lua).
	Settle = redis.NewScript(Source("settle"))
	// Settles ends several leases of one budget, each as Settle would,
	// in one call (settles.lua, with settle.lua inside: see Source).
	Settles = redis.NewScript(Source("settles"))
	// KeepAlive pushes a live lease's expiry later (keepalive.lua).
	KeepAlive = redis.NewScript(Source("keepalive"))
	// Pause makes every caller wait at least a given time (pause.lua).
	Pause = redis.NewScript(Source("pause"))
	// Stop stops a budget, letting only probes through, or resumes it
	// (stop.lua).
	Stop = redis.NewScript(Source("stop"))
	// Snapshot reads a budget without changing it (snapshot.lua).
	Snapshot = redis.NewScript(Source("snapshot"))
	// Define stores a budget's definition if it is newer, or reads the
	// one stored (define.lua).
	Define = redis.NewScript(Source("define"))
	// Route admits a call on one of several budgets, in one round trip
	// (route.lua, with acquire.lua inside: see Source).
	Route = redis.NewScript(Source("route"))
)

// settleMain begins settle.lua's main block (see Source).
const settleMain = "-- The main block (settles.lua runs it as the function settle1"

// prelude is the prelude as sent: prelude.lua, then sliding.lua as the
// body of `local function slib()` and slots.lua as the body of `local
// function glib(cover, push, slib, PENDING, LIVE, BATCH, SK)`, each
// followed by "end" and a newline. Their functions are closures made only
// when a call meets a sliding rate or hands slots over; each file keeps
// its functions short, the factory that makes them being only a wrapper.
var prelude = preludeSrc +
	"local function slib()\n" + slidingSrc + "end\n" +
	"local function glib(cover, push, slib, PENDING, LIVE, BATCH, SK)\n" + slotsSrc + "end\n"

// Source returns the full text sent to Redis for the named script
// ("acquire", "acquires", "settle", "settles", "keepalive", "pause",
// "stop", "snapshot", "define" or "route"): the prelude (above), a newline, then the script. It returns
// "" for any other name.
//
// "route" is the exception: acquire runs there once per budget, on each
// budget's KEYS and ARGV, so the prelude and acquire.lua become the body
// of a function of those two, `local function acq(KEYS, ARGV)`, and
// route.lua follows it. Inside it the prelude's helpers see the budget's
// keys, and acquire's text, the one copy of its computation, runs
// unchanged.
//
// "acquires" is the prelude, a newline, then the prelude and acquire.lua
// as the body of `local function acquire1(KEYS, ARGV)` (as route's acq),
// then batch.lua (what the two batch scripts share) and acquires.lua,
// which calls acquire1 for any call it does not admit itself, with the
// prelude's helpers for those it does.
//
// "settles" is built alike: settle.lua's functions, then its main block
// (from the line that begins it) as the body of `local function
// settle1(KEYS, ARGV)`, then batch.lua and settles.lua, which calls
// settle1 for any settle it does not run itself and settle.lua's givetat
// for those it does.
func Source(name string) string {
	var s string
	switch name {
	case "route":
		return "local function acq(KEYS, ARGV)\n" + prelude + "\n" + acquireSrc + "\nend\n" + routeSrc
	case "acquires":
		return prelude + "\n" + "local function acquire1(KEYS, ARGV)\n" + prelude + "\n" + acquireSrc + "\nend\n" + batchSrc + acquiresSrc
	case "settles":
		head, main, _ := strings.Cut(settleSrc, settleMain)
		return prelude + "\n" + head + "local function settle1(KEYS, ARGV)\n" + settleMain + main + "\nend\n" + batchSrc + settlesSrc
	case "acquire":
		s = acquireSrc
	case "settle":
		s = settleSrc
	case "keepalive":
		s = keepAliveSrc
	case "pause":
		s = pauseSrc
	case "stop":
		s = stopSrc
	case "snapshot":
		s = snapshotSrc
	case "define":
		s = defineSrc
	default:
		return ""
	}
	return prelude + "\n" + s
}
