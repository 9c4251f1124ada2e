-- sliding.lua: the strict sliding windows' functions (see prelude.lua,
-- "Strict sliding windows", for the state they read and write). Not a
-- script of its own: lua.Source places this text in the prelude as the
-- body of `local function slib()`, which returns sread, sfit, swrite and
-- slides, so that only a script that meets a sliding rate makes their
-- closures. Nothing here reads the prelude's locals (slib has no
-- upvalues): each function keeps its constants to itself.

-- sring returns the ring's field i (0..3) of state s, read once; zeros,
-- unread, if zero says the ring holds none.
local function sring(s, i, zero)
  local cs = s[7]
  if not cs then cs = {}; s[7] = cs end
  local ch = cs[i + 1]
  if ch then return ch end
  if zero then
    ch = '000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000'
  else
    ch = redis.call('HGET', s[8], s[9] .. (i == 0 and '.r0' or i == 1 and '.r1' or i == 2 and '.r2' or '.r3'))
    if not ch or ch == '' then ch = '000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000' end
  end
  cs[i + 1] = ch
  return ch
end

-- sroll moves the ring's head of state s on to sub-window to (after r),
-- for a script at sub-window cur: the counts that leave it are dropped,
-- or folded into p if still in a window ending at cur or later.
local function sroll(s, to, cur)
  local SK, M = 64, 9007199254740992
  local r, t, c, p, pl = s[1], s[3], s[4], s[5], s[6]
  local t0 = t
  local d = to - r
  for i = 0, math.min(d, SK) - 1 do
    -- Slot (r + i) % SK: sub-window r - SK + i leaves, the old head's
    -- count comes in (i = 0), or none.
    local k = r + i
    local slot = k % SK
    local x = slot % 16
    local q, o = (slot - x) / 16, 9 * x + 1
    local v, ch = 0, nil
    if t0 > 0 then
      ch = sring(s, q)
      local a1, a2, a3, a4, a5, a6, a7, a8, a9 = string.byte(ch, o, o + 8)
      v = (((((((((a1 - 48) * 64 + a2 - 48) * 64 + a3 - 48) * 64 + a4 - 48) * 64 + a5 - 48) * 64
        + a6 - 48) * 64 + a7 - 48) * 64 + a8 - 48) * 64 + a9 - 48)
      if v > 0 then
        t = t - v
        if k - SK >= cur - SK then p, pl = math.min(p + v, M), k - SK end
      end
    end
    local nv = 0
    if i == 0 and d <= SK then nv = c end
    if v ~= nv then
      ch = ch or sring(s, q, true)
      local cv
      local e = nv
      local e9 = e % 64; e = (e - e9) / 64
      local e8 = e % 64; e = (e - e8) / 64
      local e7 = e % 64; e = (e - e7) / 64
      local e6 = e % 64; e = (e - e6) / 64
      local e5 = e % 64; e = (e - e5) / 64
      local e4 = e % 64; e = (e - e4) / 64
      local e3 = e % 64; e = (e - e3) / 64
      local e2 = e % 64
      cv = string.char((e - e2) / 64 + 48, e2 + 48, e3 + 48, e4 + 48, e5 + 48, e6 + 48, e7 + 48, e8 + 48, e9 + 48)
      s[7][q + 1] = string.sub(ch, 1, o - 1) .. cv .. string.sub(ch, o + 9)
      if not s[10] then s[10] = {} end
      s[10][q + 1] = true
    end
  end
  if d > SK then
    if c > 0 and r >= cur - SK then p, pl = math.min(p + c, M), r end
  else
    t = t + c
  end
  s[1], s[3], s[4], s[5], s[6] = to, t, 0, p, pl
end

-- sread returns the state of a sliding rate whose field (in hash key) is
-- f and holds v, at sub-window cur: its head moved on to cur, p dropped
-- once pl rolled out. i and ch, if given, are a ring field already read.
-- A value of the format before ('<base> <count> -<gap> ...', decimal, the
-- counts alone) is read whole into p, the safe side.
local function sread(v, cur, key, f, i, ch)
  local SK = 64
  local r, l, t, c, rest, p, pl
  if v then r, l, t, c, rest = string.match(v, '^(%d+):(%d+):(%d+):(%d+)(.*)$') end
  local s
  if r then
    s = {r + 0, l + 0, t + 0, c + 0, 0, 0, false, key, f, false}
    if rest ~= '' then
      p, pl = string.match(rest, '^:(%d+):(%d+)$')
      s[5], s[6] = p + 0, pl + 0
    end
    if i then
      if ch and ch ~= '' then s[7] = {}; s[7][i + 1] = ch else sring(s, i, true) end
    end
  else
    s = {cur, 0, 0, 0, 0, 0, false, key, f, false}
    if v and v ~= '' then
      local j
      p, pl = 0, 0
      for x in string.gmatch(v, '%-?%d+') do
        x = x + 0
        if not j then
          j = x
        elseif x < 0 then
          j = j - x
        else
          if x > 0 and j >= cur - SK then p, pl = p + x, j end
          j = j + 1
        end
      end
      if p > 0 then s[1], s[2], s[5], s[6] = math.max(cur, pl + SK + 1), pl, p, pl end
    end
  end
  if s[1] < cur then sroll(s, cur, cur) end
  if s[6] < cur - SK then s[5], s[6] = 0, 0 end
  if s[3] == 0 and s[4] == 0 then s[2] = s[6] end
  return s
end

-- sfit returns the sub-window a call of charge units takes in state s (read
-- at cur): the first at or after cur and l whose window, with the charge,
-- holds at most allow. Past l the window only loses counts: p once past
-- pl + SK, then each ring count in turn and the head's, so at most SK + 1
-- reads.
local function sfit(s, cur, charge, allow)
  local SK = 64
  local r, t, c, p, pl = s[1], s[3], s[4], s[5], s[6]
  local j = math.max(cur, s[2])
  local sum, pin = t + c, false
  if p > 0 and j <= pl + SK then sum, pin = sum + p, true end
  while sum + charge > allow do
    if pin then
      j, sum, pin = pl + SK + 1, t + c, false
    elseif sum <= 0 then
      break
    else
      if j < r then j = r end
      -- The window ending in j + 1 loses sub-window j - SK: a ring
      -- count (slot j % SK), or the head's.
      if j - r == SK then
        sum = sum - c
      elseif t > 0 then
        local x = j % SK % 16
        local ch, o = sring(s, (j % SK - x) / 16), 9 * x + 1
        local a1, a2, a3, a4, a5, a6, a7, a8, a9 = string.byte(ch, o, o + 8)
        sum = sum - (((((((((a1 - 48) * 64 + a2 - 48) * 64 + a3 - 48) * 64 + a4 - 48) * 64 + a5 - 48) * 64
        + a6 - 48) * 64 + a7 - 48) * 64 + a8 - 48) * 64 + a9 - 48)
      end
      j = j + 1
    end
  end
  return j
end

-- slatest returns the latest sub-window before j with a count in state
-- s's ring, from j - 1 down to r - SK; else pl (0 if none).
local function slatest(s, j)
  local SK = 64
  if s[3] > 0 then
    for k = j - 1, s[1] - SK, -1 do
      local x = k % SK % 16
      local ch, o = sring(s, (k % SK - x) / 16), 9 * x + 1
      local b1, b2, b3, b4, b5, b6, b7, b8, b9 = string.byte(ch, o, o + 8)
      if b1 + b2 + b3 + b4 + b5 + b6 + b7 + b8 + b9 > 432 then return k end
    end
  end
  return s[6]
end

-- swrite counts u units in sub-window j of state s (read at cur), and puts
-- the fields to write in args after its a-th element: the rate's, and the
-- ring's that changed. It returns the new a. A charge (u > 0) at a later
-- sub-window than the head first moves the head on to it; one before the
-- ring is folded. A give-back (u < 0) comes off j's count, or off p if j
-- was folded, never below zero; nothing once j rolled out.
local function swrite(s, cur, j, u, args, a)
  local SK, M = 64, 9007199254740992
  if u > 0 and j > s[1] then sroll(s, j, cur) end
  local r, l, t, c, p, pl = s[1], s[2], s[3], s[4], s[5], s[6]
  if j == r then
    if u > 0 then
      u = math.min(u, M - t - c)
      if u > 0 and j > l then l = j end
    else
      u = -math.min(-u, c)
    end
    c = c + u
    if c == 0 and u ~= 0 and j == l then l = slatest(s, j) end
  elseif j >= r - SK and j < r then
    local x = j % SK % 16
    local q, o = (j % SK - x) / 16, 9 * x + 1
    local ch = sring(s, q, t == 0)
    local a1, a2, a3, a4, a5, a6, a7, a8, a9 = string.byte(ch, o, o + 8)
    local v = (((((((((a1 - 48) * 64 + a2 - 48) * 64 + a3 - 48) * 64 + a4 - 48) * 64 + a5 - 48) * 64
        + a6 - 48) * 64 + a7 - 48) * 64 + a8 - 48) * 64 + a9 - 48)
    if u > 0 then
      u = math.min(u, M - t - c)
      if u > 0 and j > l then l = j end
    else
      u = -math.min(-u, v)
    end
    if u ~= 0 then
      v, t = v + u, t + u
      local cv
      local e = v
      local e9 = e % 64; e = (e - e9) / 64
      local e8 = e % 64; e = (e - e8) / 64
      local e7 = e % 64; e = (e - e7) / 64
      local e6 = e % 64; e = (e - e6) / 64
      local e5 = e % 64; e = (e - e5) / 64
      local e4 = e % 64; e = (e - e4) / 64
      local e3 = e % 64; e = (e - e3) / 64
      local e2 = e % 64
      cv = string.char((e - e2) / 64 + 48, e2 + 48, e3 + 48, e4 + 48, e5 + 48, e6 + 48, e7 + 48, e8 + 48, e9 + 48)
      s[7][q + 1] = string.sub(ch, 1, o - 1) .. cv .. string.sub(ch, o + 9)
      if not s[10] then s[10] = {} end
      s[10][q + 1] = true
      -- The latest count is gone (the head has none): the latest before
      -- it, or p's.
      s[3] = t
      if v == 0 and j == l then l = slatest(s, j) end
    end
  elseif u > 0 and p < M then
    p = math.min(p + u, M)
    if j > pl then pl = j end
    if j > l then l = j end
  elseif u < 0 and p > 0 and j >= cur - SK and j <= pl then
    p = p - math.min(-u, p)
    if p == 0 then
      pl = 0
      if t == 0 and c == 0 then l = 0 end
    end
  end
  a = a + 2
  args[a - 1] = s[9]
  if p > 0 then
    args[a] = string.format('%d:%d:%d:%d:%d:%d', r, l, t, c, p, pl)
  elseif t > 0 or c > 0 then
    args[a] = string.format('%d:%d:%d:%d', r, l, t, c)
  else
    args[a] = ''
  end
  local w = s[10]
  if w then
    for i = 1, 4 do
      if w[i] then
        args[a + 1], args[a + 2] = s[9] .. (i == 1 and '.r0' or i == 2 and '.r1' or i == 3 and '.r2' or '.r3'), s[7][i]
        a = a + 2
      end
    end
  end
  return a
end
-- slides applies settle's corrections to the sliding rates sfields (their
-- values svals, '<units>@<j>') kept in hash st (pass 2: the tenant's),
-- writing through the prelude's cover or tcover. Only settle calls it.
local function slides(st, pass, sfields, svals, now, cover, tcover)
  local SK = 64
  -- Each rate's field, and for a give-back the ring's field that holds
  -- its sub-window (see prelude.lua), read at once.
  local names, us_, js, qs = {'xp'}, {}, {}, {}
  for i = 1, #sfields do
    local u, j = string.match(svals[i], '^(-?%d+)@(-?%d+)$')
    us_[i], js[i] = u + 0, j + 0
    names[2 * i], names[2 * i + 1] = sfields[i], 'xp'
    if us_[i] < 0 then
      -- A number joined to a string is printed with %.14g: dear.
      local q = js[i] % 64
      if q < 16 then q = 0 elseif q < 32 then q = 1 elseif q < 48 then q = 2 else q = 3 end
      qs[i] = q
      names[2 * i + 1] = sfields[i] .. (q == 0 and '.r0' or q == 1 and '.r1' or q == 2 and '.r2' or '.r3')
    end
  end
  local hv = redis.call('HMGET', st, unpack(names))
  local args, ms, a = {}, 0, 0
  for i = 1, #sfields do
    local g = string.match(sfields[i], '^@?~(%d+):') + 0
    local u, j = us_[i], js[i]
    local cur = math.floor(now * 1000 / g)
    if u > 0 then j = cur end
    a = swrite(sread(hv[2 * i], cur, st, sfields[i], qs[i], hv[2 * i + 1]), cur, j, u, args, a)
    if u > 0 and (cur + SK + 1) * g / 1000 > ms then ms = (cur + SK + 1) * g / 1000 end
  end
  if pass == 2 then
    -- A tenant's hash lives as long as its buckets need, not as long as
    -- the leases charged to it: one that expired is written back with
    -- a TTL, never without.
    tcover(st, now, (hv[1] or 0) + 0, math.max(ms, now), args, a)
  elseif ms == 0 then
    redis.call('HSET', st, unpack(args, 1, a))
  else
    cover(now, (hv[1] or 0) + 0, ms, args, a)
  end
end

return sread, sfit, swrite, slides
