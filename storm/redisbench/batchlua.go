package main

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/llmpacer/llmpacer/lua"
)

// Group commit (round 7, issue 23): a prototype of one script call that
// ends k leases, or admits k requests, in order, each as k sequential
// calls would. Two builds of the same text, made here from acquire.lua and
// settle.lua unchanged (a prototype to price the lever, not the design):
//
//   - crude: the script's main block becomes a function run once per
//     argument group; the prelude, the steps' closures, EVALSHA and the
//     keys are paid once, but every call still sends its own TIME, HMGET,
//     HSET, ZADD or ZSCORE and ZREM;
//   - shared: the same, with every redis.call of the text routed through
//     vcall (a textual substitution), which reads the clock once, serves
//     the state hash (KEYS[1]) from one table filled by HMGETs of the
//     fields not yet read (in practice one, by the first call), keeps
//     every HSET and HDEL of it in that table, and, for a budget without
//     a concurrency limit (whose slot count reads the lease set), holds
//     the lease set's ZADD NX and ZREM to one command each, and answers
//     ZSCORE from one ZMSCORE of the batch's ids. At the end: one ZADD
//     with the k members (its count checked: a repeated lease id would
//     need the slow path a design would add, see docs/results.md), one
//     ZREM, one HSET of the fields written, and the hash's PEXPIRE if a
//     cover asked for one.
//
// ARGV: k, then for each call its argument count and its arguments, as
// the script alone takes them. The reply: the k replies, in order.

// batchMarkers are where each script's main block starts: what comes
// before are its step functions, made once per batch.
var batchMarkers = map[string]string{
	"acquire": "local leases = KEYS[2]\nlocal id, batch, ticket",
	"settle":  "local state, leases, queue = KEYS[1], KEYS[2], KEYS[3]\nlocal id, charged",
}

// batchLoop runs one() per argument group, ARGV (a local of the text, an
// upvalue of its steps) set to the group's arguments.
const batchLoop = `
local k, p, out = BARGV[1] + 0, 2, {}
for i = 1, k do
  local len = BARGV[p] + 0
  ARGV = {unpack(BARGV, p + 1, p + len)}
  p = p + len + 1
  out[i] = one()
end
`

// vcallSrc is the shared build's redis.call (see above). ids are the
// batch's lease ids (each group's first argument), for the ZMSCORE.
const vcallSrc = `
local BARGV = ARGV
local rcall = redis.call
local VS, VL = KEYS[1], KEYS[2]
local vtime
local vcache, vdirty, vdn, vorder = {}, {}, 0, {}
local vpexp
local vdefer = %s
local vadd, vaddn, vrem, vremn = {}, 0, {}, 0
local vscore
local function vcall(cmd, key, ...)
  if cmd == 'TIME' then
    if not vtime then vtime = rcall('TIME') end
    return vtime
  end
  if key == VS then
    if cmd == 'HMGET' or cmd == 'HGET' then
      local n = select('#', ...)
      local miss, mn = nil, 0
      for i = 1, n do
        local f = select(i, ...)
        if vcache[f] == nil then
          miss = miss or {}
          mn = mn + 1
          miss[mn] = f
        end
      end
      if mn > 0 then
        local got = rcall('HMGET', VS, unpack(miss, 1, mn))
        for i = 1, mn do vcache[miss[i]] = got[i] end
      end
      if cmd == 'HGET' then return vcache[...] end
      local r = {}
      for i = 1, n do r[i] = vcache[select(i, ...)] end
      return r
    elseif cmd == 'HSET' then
      local n = select('#', ...)
      for i = 1, n, 2 do
        local f, v = select(i, ...)
        if vdirty[f] == nil then vdn = vdn + 1; vorder[vdn] = f end
        vcache[f], vdirty[f] = v, v
      end
      return 0
    elseif cmd == 'HDEL' then
      local f = ...
      local had = vcache[f]
      if had == nil then had = rcall('HEXISTS', VS, f) == 1 end
      if vdirty[f] == nil then vdn = vdn + 1; vorder[vdn] = f end
      vcache[f], vdirty[f] = false, false
      return had and 1 or 0
    elseif cmd == 'PEXPIRE' then
      vpexp = ...
      return 1
    end
    return rcall(cmd, key, ...)
  end
  if vdefer and key == VL then
    if cmd == 'ZADD' and ... == 'NX' then
      local _, s, m = ...
      vadd[vaddn + 1], vadd[vaddn + 2] = s, m
      vaddn = vaddn + 2
      return 1
    elseif cmd == 'ZREM' and select('#', ...) == 1 then
      vremn = vremn + 1
      vrem[vremn] = ...
      return 1
    elseif cmd == 'ZSCORE' then
      if not vscore then
        local ids, n, p = {}, BARGV[1] + 0, 2
        for i = 1, n do ids[i] = BARGV[p + 1]; p = p + BARGV[p] + 1 end
        local got = rcall('ZMSCORE', VL, unpack(ids, 1, n))
        vscore = {}
        for i = 1, n do vscore[ids[i]] = got[i] end
      end
      local id = ...
      local s = vscore[id]
      if s == nil then return rcall('ZSCORE', VL, id) end
      return s
    end
  end
  return rcall(cmd, key, ...)
end
`

// vflushSrc writes what vcall held, after the loop.
const vflushSrc = `
if vaddn > 0 and rcall('ZADD', VL, 'NX', unpack(vadd, 1, vaddn)) ~= vaddn / 2 then
  return redis.error_reply('batch: a lease id admitted twice (the design sends such a call alone)')
end
if vremn > 0 then rcall('ZREM', VL, unpack(vrem, 1, vremn)) end
if vdn > 0 then
  local set, sn, del, dn = {}, 0, {}, 0
  for i = 1, vdn do
    local f = vorder[i]
    local v = vdirty[f]
    if v then set[sn + 1], set[sn + 2] = f, v; sn = sn + 2 else dn = dn + 1; del[dn] = f end
  end
  if sn > 0 then rcall('HSET', VS, unpack(set, 1, sn)) end
  if dn > 0 then rcall('HDEL', VS, unpack(del, 1, dn)) end
end
if vpexp then rcall('PEXPIRE', VS, vpexp) end
`

var (
	//go:embed batch_acquire.lua
	batchAcquireSrc string
	//go:embed batch_settle.lua
	batchSettleSrc string
)

// batchHand returns the hand-written shared-read batch script for name
// ("acquire" or "settle"): the prelude (with settle.lua's step functions,
// for settle) and batch_<name>.lua.
func batchHand(name string) string {
	if name == "acquire" {
		src := lua.Source("acquire")
		return src[:strings.Index(src, "-- acquire.lua:")] + batchAcquireSrc
	}
	src := lua.Source("settle")
	return src[:strings.Index(src, batchMarkers["settle"])] + batchSettleSrc
}

// batchSource returns the batch script for name ("acquire" or "settle"):
// crude, or shared (with deferLeases: the lease set's writes held too).
func batchSource(name string, shared, deferLeases bool) string {
	src := lua.Source(name)
	mark := batchMarkers[name]
	i := strings.Index(src, mark)
	if i < 0 || strings.Count(src, mark) != 1 {
		panic("batch: no main block marker in " + name)
	}
	steps, main := src[:i], src[i:]
	var b strings.Builder
	if shared {
		fmt.Fprintf(&b, vcallSrc, map[bool]string{true: "true", false: "false"}[deferLeases])
		steps = strings.ReplaceAll(steps, "redis.call(", "vcall(")
		main = strings.ReplaceAll(main, "redis.call(", "vcall(")
	} else {
		b.WriteString("local BARGV = ARGV\n")
	}
	b.WriteString("local ARGV\n")
	b.WriteString(steps)
	b.WriteString("\nlocal function one()\n")
	b.WriteString(main)
	b.WriteString("\nend\n")
	b.WriteString(batchLoop)
	if shared {
		b.WriteString(vflushSrc)
	}
	b.WriteString("return out\n")
	return b.String()
}
