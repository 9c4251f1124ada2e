#!/bin/bash
# codec.sh PORT PID: the instructions one give-back stack entry (two 7-byte
# big-endian integers) costs to read and to write, in Lua arithmetic (as
# the scripts did before round 8 of issue 23) and with Redis's struct
# library, each 1000 times in one EVAL less an empty loop, on a
# redis-server at 127.0.0.1:PORT run under valgrind --tool=callgrind with
# pid PID. See docs/results.md.
set -euo pipefail
P=$1; PID=$2
run() {
  redis-cli -p $P eval "$1" 0 >/dev/null
  callgrind_control -z $PID >/dev/null 2>&1
  redis-cli -p $P eval "$1" 0 >/dev/null
  callgrind_control -e Ir $PID 2>/dev/null | awk '/^ *Th/ {gsub(",","",$3); s+=$3} END {printf "%.0f", s/1000}'
}
S="local s = string.rep('\6a\163\196\229\180\240\0\0\0\1\49\27\141', 40)"
base=$(run "$S local x = 0 for i = 1, 1000 do x = x + i end return x")
dec=$(run "$S local byte = string.byte local x = 0 for i = 1, 1000 do local p = 14 * (i % 40) + 1 local t1, t2, t3, t4, t5, t6, t7, d1, d2, d3, d4, d5, d6, d7 = byte(s, p, p + 13) local t = (((((t1 * 256 + t2) * 256 + t3) * 256 + t4) * 256 + t5) * 256 + t6) * 256 + t7 local w = (((((d1 * 256 + d2) * 256 + d3) * 256 + d4) * 256 + d5) * 256 + d6) * 256 + d7 x = x + t + w end return tostring(x)")
sdec=$(run "$S local unpack = struct.unpack local x = 0 for i = 1, 1000 do local p = 14 * (i % 40) + 1 local t, w = unpack('>I7I7', s, p) x = x + t + w end return tostring(x)")
enc=$(run "local char = string.char local x = 0 for i = 1, 1000 do local e, x2 = 1796205871216056 + i, 1234567 + i local t7 = e % 256; e = (e - t7) / 256 local t6 = e % 256; e = (e - t6) / 256 local t5 = e % 256; e = (e - t5) / 256 local t4 = e % 256; e = (e - t4) / 256 local t3 = e % 256; e = (e - t3) / 256 local t2 = e % 256 local d7 = x2 % 256; x2 = (x2 - d7) / 256 local d6 = x2 % 256; x2 = (x2 - d6) / 256 local d5 = x2 % 256; x2 = (x2 - d5) / 256 local d4 = x2 % 256; x2 = (x2 - d4) / 256 local d3 = x2 % 256; x2 = (x2 - d3) / 256 local d2 = x2 % 256 local c = char((e - t2) / 256, t2, t3, t4, t5, t6, t7, (x2 - d2) / 256, d2, d3, d4, d5, d6, d7) x = x + #c end return x")
senc=$(run "local pack = struct.pack local x = 0 for i = 1, 1000 do local c = pack('>I7I7', 1796205871216056 + i, 1234567 + i) x = x + #c end return x")
echo "instructions per entry: read in Lua $((dec-base)), with struct.unpack $((sdec-base)); written in Lua $((enc-base)), with struct.pack $((senc-base))"
