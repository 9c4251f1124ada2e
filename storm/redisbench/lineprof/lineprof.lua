-- lineprof.lua: counts the Lua VM instructions each line of acquire and
-- settle executes, as Redis ran them in a MONITOR capture. It replays the
-- capture's client commands (the scripts' EVALSHAs, and the HSETs and DELs
-- a benchmark sends itself) against an in-memory imitation of the few
-- Redis commands the scripts call, in order, each script's clock being the
-- timestamp MONITOR gave its TIME. Run it with the `lua` that Redis builds
-- in deps/lua/src (Redis's own Lua 5.1), so that the instructions are the
-- ones Redis runs; see docs/results.md (issue 23, round 8) for the steps.
--
--   lua lineprof.lua CAPTURE DIR [profile]
--
-- DIR holds acquire.lua and settle.lua as sent and their SHA1s in DIR/shas
-- (`go run ./storm/redisbench -sources DIR` writes them), and the batch
-- scripts' library, library.lua: a capture's FCALLs of its functions run
-- its functions (loaded once, as Redis keeps them), their lines counted as
-- "library", per call they carried (ARGV's groups). Without
-- "profile" it only replays, and checks that the replay's HSETs write as
-- many bytes as the capture's (their times differ by the few µs between
-- MONITOR's timestamp and the script's TIME). TOP=n lines are printed.
--
-- This is a measuring tool, not a model of Redis: it implements only the
-- commands and options these scripts send, and zsets without ordering
-- structures. It replays the capture faithfully, but the capture is not
-- the run it watched: MONITOR makes each call dearer, so the clock moves
-- further between calls, and state shaped by it (where in a give-back
-- stack a settle finds its first event) differs from an unwatched run's.
-- It shows where the VM's work is; callgrind on an unwatched run says
-- what a change is worth (docs/results.md, issue 23, round 8).
local monfile, dir, mode = arg[1], arg[2], arg[3]

local db = {}
local clock = 0 -- µs, set per script call from the capture's timestamp

local function sorted(z)
  local a = {}
  for m, s in pairs(z) do a[#a + 1] = {m, s} end
  table.sort(a, function(x, y) if x[2] ~= y[2] then return x[2] < y[2] end return x[1] < y[1] end)
  return a
end
local function bound(s)
  if s == '-inf' then return -math.huge, false end
  if s == '+inf' then return math.huge, false end
  if s:sub(1, 1) == '(' then return tonumber(s:sub(2)), true end
  return tonumber(s), false
end
local function inrange(v, lo, lox, hi, hix)
  if lox then if not (v > lo) then return false end elseif v < lo then return false end
  if hix then if not (v < hi) then return false end elseif v > hi then return false end
  return true
end
local function hash(k) db[k] = db[k] or {t = 'h', v = {}}; return db[k].v end
local function zset(k) db[k] = db[k] or {t = 'z', v = {}}; return db[k].v end
local function fmtscore(s) return string.format('%.17g', s) end

local cmds = {}
cmds.TIME = function() return {tostring(math.floor(clock / 1e6)), tostring(clock % 1e6)} end
cmds.HSET = function(k, ...)
  local a, h, n = {...}, hash(k), 0
  for i = 1, #a, 2 do if h[a[i]] == nil then n = n + 1 end; h[a[i]] = tostring(a[i + 1]) end
  return n
end
cmds.HMGET = function(k, ...)
  local a, h, r = {...}, db[k] and db[k].v or {}, {}
  for i = 1, #a do r[i] = h[a[i]] or false end
  return r
end
cmds.HGET = function(k, f) local h = db[k] and db[k].v or {}; return h[f] or false end
cmds.HDEL = function(k, ...)
  local h, n = db[k] and db[k].v or {}, 0
  for _, f in ipairs({...}) do if h[f] then h[f] = nil; n = n + 1 end end
  return n
end
cmds.DEL = function(...) local n = 0; for _, k in ipairs({...}) do if db[k] then db[k] = nil; n = n + 1 end end; return n end
cmds.PEXPIRE = function() return 1 end
cmds.PUBLISH = function() return 0 end
cmds.ZADD = function(k, ...)
  local a, z, i, nx, xx, n = {...}, zset(k), 1, false, false, 0
  while a[i] == 'NX' or a[i] == 'XX' do if a[i] == 'NX' then nx = true else xx = true end; i = i + 1 end
  for j = i, #a, 2 do
    local s, m = tonumber(a[j]), a[j + 1]
    if z[m] == nil then
      if not xx then z[m] = s; n = n + 1 end
    elseif not nx then z[m] = s end
  end
  return n
end
cmds.ZREM = function(k, ...)
  local z, n = db[k] and db[k].v or {}, 0
  for _, m in ipairs({...}) do if z[m] then z[m] = nil; n = n + 1 end end
  return n
end
cmds.ZSCORE = function(k, m) local z = db[k] and db[k].v or {}; return z[m] and fmtscore(z[m]) or false end
cmds.ZMSCORE = function(k, ...)
  local z, r = db[k] and db[k].v or {}, {}
  for i, m in ipairs({...}) do r[i] = z[m] and fmtscore(z[m]) or false end
  return r
end
cmds.ZCARD = function(k) local n = 0; for _ in pairs(db[k] and db[k].v or {}) do n = n + 1 end; return n end
cmds.ZCOUNT = function(k, mn, mx)
  local lo, lox = bound(mn); local hi, hix = bound(mx); local n = 0
  for _, s in pairs(db[k] and db[k].v or {}) do if inrange(s, lo, lox, hi, hix) then n = n + 1 end end
  return n
end
cmds.ZRANGEBYSCORE = function(k, mn, mx, _, off, cnt)
  local lo, lox = bound(mn); local hi, hix = bound(mx); local r = {}
  for _, e in ipairs(sorted(db[k] and db[k].v or {})) do if inrange(e[2], lo, lox, hi, hix) then r[#r + 1] = e[1] end end
  if off then local o = {}; for i = off + 1, math.min(#r, off + cnt) do o[#o + 1] = r[i] end; r = o end
  return r
end
cmds.ZRANGE = function(k, a, b, ws)
  local s = sorted(db[k] and db[k].v or {}); local r = {}
  a, b = tonumber(a), tonumber(b); if b < 0 then b = #s + b end
  for i = a + 1, math.min(b + 1, #s) do r[#r + 1] = s[i][1]; if ws then r[#r + 1] = fmtscore(s[i][2]) end end
  return r
end
cmds.ZREMRANGEBYRANK = function(k, a, b)
  local s = sorted(db[k] and db[k].v or {}); local n = 0
  for i = tonumber(a) + 1, math.min(tonumber(b) + 1, #s) do db[k].v[s[i][1]] = nil; n = n + 1 end
  return n
end

redis = {}
local functions = {}
function redis.register_function(name, f) functions[name] = f end
function redis.call(c, ...)
  local f = cmds[string.upper(c)]
  if not f then error('mock: no ' .. c) end
  local args = {...}
  for i = 1, #args do if type(args[i]) == 'number' then args[i] = string.format('%.17g', args[i]) end end
  return f(unpack(args))
end
redis.pcall = redis.call

local function load(file, name)
  local fh = assert(io.open(file)); local src = fh:read('*a'); fh:close()
  src = src:gsub('^#!', '--#!') -- a library's first line
  return assert(loadstring(src, '=' .. name))
end
local scripts, names = {}, {}
for line in io.lines(dir .. '/shas') do
  local name, sha = line:match('^(%a+) (%x+)$')
  scripts[sha], names[sha] = load(dir .. '/' .. name .. '.lua', name), name
end
-- The batch scripts' library (library.lua, as FUNCTION LOAD loads it):
-- its functions go by FCALL, their lines counted as 'library'.
local fh = io.open(dir .. '/library.lua')
if fh then
  fh:close()
  load(dir .. '/library.lua', 'library')()
end

-- MONITOR's quoting: "..." with \\ \" \n \r \t \a \b \xHH.
local esc = {n = '\n', r = '\r', t = '\t', a = '\a', b = '\b', ['\\'] = '\\', ['"'] = '"'}
local function parse(line)
  local ts, who, rest = line:match('^(%d+%.%d+) %[%d+ ([^%]]+)%] (.*)$')
  if not ts then return nil end
  local args, i, n = {}, 1, #rest
  while i <= n do
    if rest:sub(i, i) == '"' then
      local buf, j = {}, i + 1
      while true do
        local c = rest:sub(j, j)
        if c == '\\' then
          local d = rest:sub(j + 1, j + 1)
          if d == 'x' then buf[#buf + 1] = string.char(tonumber(rest:sub(j + 2, j + 3), 16)); j = j + 4
          else buf[#buf + 1] = esc[d] or d; j = j + 2 end
        elseif c == '"' then break
        else buf[#buf + 1] = c; j = j + 1 end
      end
      args[#args + 1] = table.concat(buf)
      i = j + 2
    else
      i = i + 1
    end
  end
  return ts, who, args
end

local counts, calls = {}, {acquire = 0, settle = 0, library = 0}
local batched = {acquires = 0, settles = 0}
local hook = function()
  local info = debug.getinfo(2, 'Sl')
  if info.source == '=acquire' or info.source == '=settle' or info.source == '=library' then
    local key = info.source:sub(2) .. ':' .. info.currentline
    counts[key] = (counts[key] or 0) + 1
  end
end

local n = 0
local want, got, inscript, pending = {}, {}, false, nil
local rawhset = cmds.HSET
cmds.HSET = function(k, ...)
  if inscript then got[#got + 1] = table.concat({k, ...}, '|') end
  return rawhset(k, ...)
end
for line in io.lines(monfile) do
  local ts, who, a = parse(line)
  if ts and who == 'lua' and a[1] == 'HSET' then
    local t = {}; for i = 2, #a do t[#t + 1] = a[i] end
    want[#want + 1] = table.concat(t, '|')
  end
  if ts and who == 'lua' and a[1] == 'TIME' and pending then
    local sec, frac = ts:match('(%d+)%.(%d+)')
    clock = tonumber(sec) * 1000000 + tonumber(frac)
    local p = pending; pending = nil
    local nk = tonumber(p[3])
    KEYS, ARGV = {}, {}
    for i = 1, nk do KEYS[i] = p[3 + i] end
    for i = 4 + nk, #p do ARGV[#ARGV + 1] = p[i] end
    local name, run = names[p[2]], scripts[p[2]]
    if p[1] == 'FCALL' then
      local fk, fa = KEYS, ARGV
      name, run = 'library', function() return functions[p[2]](fk, fa) end
      local b = p[2]:match('^llmpacer_(%a+)_')
      -- Calls in the batch: each group is t, n, then n arguments.
      local i = 1
      while i <= #ARGV do batched[b], i = batched[b] + 1, i + ARGV[i + 1] + 2 end
    end
    calls[name] = calls[name] + 1
    inscript = true
    if mode == 'profile' then debug.sethook(hook, '', 1) end
    local ok, err = pcall(run)
    debug.sethook()
    inscript = false
    if not ok then io.stderr:write('script error: ' .. tostring(err) .. '\n') end
    n = n + 1
  elseif ts and who ~= 'lua' and a[1] then
    local c = string.upper(a[1])
    if c == 'EVALSHA' and scripts[a[2]] or c == 'FCALL' and functions[a[2]] then
      a[1] = c
      pending = a
    elseif c == 'HSET' or c == 'DEL' then
      redis.call(unpack(a))
    end
  end
end
local bad, lw, lg = 0, 0, 0
for i = 1, math.max(#want, #got) do if want[i] ~= got[i] then bad = bad + 1 end end
for i = 1, #want do lw = lw + #want[i] end
for i = 1, #got do lg = lg + #got[i] end
io.write(string.format('HSETs: capture %d, replay %d (%d differ in a byte), bytes written %d vs %d\n',
  #want, #got, bad, lw, lg))

-- Per line: VM instructions per call of its script, and the line's text.
local text = {}
for _, name in pairs(names) do
  text[name] = {}
  for l in io.lines(dir .. '/' .. name .. '.lua') do text[name][#text[name] + 1] = l end
end
if next(functions) then
  text.library = {}
  for l in io.lines(dir .. '/library.lua') do text.library[#text.library + 1] = l end
end
local out, tot = {}, {acquire = 0, settle = 0, library = 0}
for k, v in pairs(counts) do
  out[#out + 1] = {k, v}
  local s = k:match('^(%a+)')
  tot[s] = tot[s] + v
end
table.sort(out, function(x, y) return x[2] > y[2] end)
io.write(string.format('scripts run %d; acquire %d calls, %.0f VM instructions each; settle %d calls, %.0f each\n',
  n, calls.acquire, tot.acquire / math.max(calls.acquire, 1), calls.settle, tot.settle / math.max(calls.settle, 1)))
io.write(string.format('functions: %d FCALLs carrying %d acquires and %d settles, %.0f VM instructions a call carried\n',
  calls.library, batched.acquires, batched.settles, tot.library / math.max(batched.acquires + batched.settles, 1)))
-- The library's lines are counted per call carried.
calls.library = batched.acquires + batched.settles
for i = 1, math.min(#out, tonumber(os.getenv('TOP') or 40)) do
  local s, l = out[i][1]:match('^(%a+):(%d+)$')
  local src = (text[s][tonumber(l)] or ''):gsub('^%s+', ''):sub(1, 90)
  io.write(string.format('%8.1f  %-13s %s\n', out[i][2] / math.max(calls[s], 1), out[i][1], src))
end
