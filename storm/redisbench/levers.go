package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// levers: what each way of cutting a script's cost is worth, in
// instructions per call under callgrind (issue 23): bare scripts that do
// one thing each (take 16 arguments or 3, parse numbers from strings or
// unpack them from one binary string with the struct library, format
// numbers, move an 800-byte string through Lua), then acquire and settle
// run by EVALSHA and, loaded with FUNCTION LOAD as a library around the
// same text, by FCALL. Needs -callgrind-pid, as instr does.
func (b *bench) levers(ctx context.Context) error {
	if b.cgPID == 0 {
		return fmt.Errorf("-callgrind-pid is required: the pid of a redis-server run under valgrind --tool=callgrind")
	}
	const n = 2000
	measure := b.measureN(n)
	tag := fmt.Sprintf("{llmpacer-bench:levers%d}", b.names)
	keys := []string{tag + ":s", tag + ":l", tag + ":q", tag + ":d"}
	own := []string{keys[0], tag + ":stack"} // a stack in a key of its own
	defer b.rdb.Del(ctx, append(keys, own[1])...)
	id := 0
	// acquire's 16 arguments as a Pacer sends them for an RPM + TPM budget
	// (MONITOR), and the same numbers packed: 15 little-endian int64.
	nums := []int64{0, 0, 60000, 0, 0, 1, 0, 1000000, 60000000, 100000, 60000000, 3, 1764633600000, 60000000, 60000000}
	wide := func() []any {
		a := []any{fmt.Sprintf("lease-%d-abcdefabcdef", id), 0, 0, 60000, 0, 0, 1, 0, "rpm", "tpm"}
		for _, v := range nums[7:11] {
			a = append(a, v)
		}
		return append(a, 3, "1764633600000 60000000 60000000")
	}
	packed := func() []any {
		p := make([]byte, 0, 8*len(nums))
		for _, v := range nums {
			p = binary.LittleEndian.AppendUint64(p, uint64(v))
		}
		return []any{fmt.Sprintf("lease-%d-abcdefabcdef", id), "rpm tpm", string(p)}
	}
	long := func(size int) func() []any {
		return func() []any { return []any{fmt.Sprintf("lease-%d", id), strings.Repeat("x", size)} }
	}
	fmt.Fprintf(b.out, "## Levers (issue 23): instructions per call (callgrind, %d calls each)\n", n)
	fmt.Fprintln(b.out, "| script | k instructions |")
	fmt.Fprintln(b.out, "|---|---:|")
	rows := []struct {
		name, src string
		keys      []string
		args      func() []any
	}{
		{"`return 1`, 4 keys, acquire's 16 arguments", "return 1", keys, wide},
		{"`return 1`, 4 keys, 3 arguments (numbers packed)", "return 1", keys, packed},
		{"`return 1`, 2 keys, 3 arguments", "return 1", keys[:2], packed},
		{"16 arguments, 13 numbers parsed (s + 0)", "local s = 0 for i = 2, #ARGV do if i ~= 9 and i ~= 10 and i ~= 16 then s = s + ARGV[i] end end return 1", keys, wide},
		{"3 arguments, 15 numbers by one struct.unpack", "local a = {struct.unpack('<i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8', ARGV[3])} return 1", keys, packed},
		{"3 arguments, 8 × string.format('%d', µs)", "local f = string.format for i = 1, 8 do local s = f('%d', 1764633600000123 + i) end return 1", keys, packed},
		{"3 arguments, 8 × struct.pack('<i8', µs)", "local f = struct.pack for i = 1, 8 do local s = f('<i8', 1764633600000123 + i) end return 1", keys, packed},
		{"3 arguments, TIME", "redis.call('TIME') return 1", keys, packed},
		{"3 arguments, HMGET of 8 fields", "redis.call('HMGET', KEYS[1], 'xp', 'pause', 'rpm', 'tpm', 'rpm.h', 'tpm.h', 'qs', 'dv') return 1", keys, packed},
		{"3 arguments, HMGET of 1 field", "redis.call('HMGET', KEYS[1], 'xp') return 1", keys, packed},
		{"a 14-byte argument", "return 1", keys, long(14)},
		{"an 800-byte argument", "return 1", keys, long(800)},
		{"an 800-byte argument, appended to (s .. c)", "local s = ARGV[2] .. ARGV[1] return 1", keys, long(800)},
		{"an 800-byte argument, appended to, cut and joined (as a give-back)", "local s = ARGV[2] .. ARGV[1] local t = string.sub(s, 20) local u = table.concat({ARGV[1], t}) return 1", keys, long(800)},
		{"HSET of a 14-byte value, HGET of it", "redis.call('HSET', KEYS[1], 'f', ARGV[2]) redis.call('HGET', KEYS[1], 'f') return 1", keys, long(14)},
		{"HSET of an 800-byte value, HGET of it", "redis.call('HSET', KEYS[1], 'f', ARGV[2]) redis.call('HGET', KEYS[1], 'f') return 1", keys, long(800)},
		// A push as the scripts make it (a stack in a hash field: read,
		// appended to, written back whole), beside one on a string key of
		// its own (its last entry read, 14 bytes appended), and a
		// give-back's header and entry rewritten in place: what a layout
		// with the stacks in keys of their own would pay.
		{"push, stack in a hash field (800 bytes): HGET, s .. c, HSET", "local s = redis.call('HGET', KEYS[1], 'g') or ARGV[2] redis.call('HSET', KEYS[1], 'g', string.sub(s .. string.sub(ARGV[1], 1, 14), -800)) return 1", keys, long(800)},
		{"push, stack in a key of its own (800 bytes): GETRANGE -14 -1, APPEND 14", "if redis.call('STRLEN', KEYS[2]) > 2000 then redis.call('SET', KEYS[2], ARGV[2]) end redis.call('GETRANGE', KEYS[2], -14, -1) redis.call('APPEND', KEYS[2], string.sub(ARGV[2], 1, 14)) return 1", own, long(800)},
		{"give-back, stack in a hash field (800 bytes): HGET, cut and joined, HSET", "local s = redis.call('HGET', KEYS[1], 'g') or ARGV[2] redis.call('HSET', KEYS[1], 'g', table.concat({string.sub(s, 1, 14), string.sub(s, 15, 400), string.sub(s, 401, 414), string.sub(s, 415)})) return 1", keys, long(800)},
		{"give-back, stack in a key of its own: GET, SETRANGE of 14 + 14 bytes", "local s = redis.call('GET', KEYS[2]) or ARGV[2] redis.call('SETRANGE', KEYS[2], 0, string.sub(s, 1, 14)) redis.call('SETRANGE', KEYS[2], 400, string.sub(s, 15, 28)) return 1", own, long(800)},
	}
	for _, r := range rows {
		s := redis.NewScript(r.src)
		call := func() error { id++; return s.Run(ctx, b.rdb, r.keys, r.args()...).Err() }
		if err := call(); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		v, err := measure(call)
		if err != nil {
			return err
		}
		fmt.Fprintf(b.out, "| %s | %.1f |\n", r.name, v/1000)
	}
	if err := b.fcall(ctx, keys, measure); err != nil {
		return err
	}
	return b.split(ctx)
}

// split measures the regimes' acquire and settle apart (see regimes.go):
// in each of three rounds, 100 acquires (a tenant's regime: its tenants in
// turn, as its pairs), then settles of the 100 oldest
// leases in flight (64 to 164 in flight between them), the TATs set back
// ahead of the clock before each round.
func (b *bench) split(ctx context.Context) error {
	const n = 100
	measure := b.measureN(n)
	fmt.Fprintf(b.out, "\n## The regimes' acquire and settle apart (callgrind, 3 rounds of %d acquires, then %d settles)\n", n, n)
	fmt.Fprintln(b.out, "| regime | acquire k | settle k | stack bytes after |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|")
	for _, r := range regimes(20) {
		u, err := b.newRunner(ctx, r)
		if err != nil {
			return err
		}
		var fifo []*pacer.Lease
		for _, l := range u.ring {
			if l != nil {
				fifo = append(fifo, l)
			}
		}
		u.ring = nil
		for round := 0; round < 3; round++ {
			if err := u.push(ctx); err != nil {
				return err
			}
			acq, err := measure(func() error {
				req := pacer.Request{Tokens: 100}
				if u.r.tenants > 0 {
					req.Tenant = tenantID(u.tenant % u.r.tenants)
					u.tenant++
				}
				l, err := u.p.TryAcquire(ctx, req)
				if err == nil && l == nil {
					err = fmt.Errorf("%s: refused a call", r.name)
				}
				fifo = append(fifo, l)
				return err
			})
			if err != nil {
				return err
			}
			set, err := measure(func() error {
				l := fifo[0]
				fifo = fifo[1:]
				return l.Settle(ctx, 60)
			})
			if err != nil {
				return err
			}
			stack, err := u.stackBytes(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(b.out, "| %s | %.1f | %.1f | %d |\n", r.name, acq/1000, set/1000, stack)
		}
		u.ring = fifo
		u.close(ctx)
	}
	return nil
}

// fcall sets acquire and settle run by EVALSHA beside the same text loaded
// as a library (FUNCTION LOAD) and run by FCALL: an RPM + TPM budget with
// its buckets full, each acquire settled after all of them (one lease in
// flight at a time would not change a full bucket's cost).
func (b *bench) fcall(ctx context.Context, keys []string, measure func(func() error) (float64, error)) error {
	body := func(name string) string {
		return "local function " + name + "(KEYS, ARGV)\n" + lua.Source(name) + "\nend\n"
	}
	lib := "#!lua name=llmpacerbench\n" + body("acquire") + body("settle") +
		"redis.register_function('llmpacerbench_acquire', function(k, a) return acquire(k, a) end)\n" +
		"redis.register_function('llmpacerbench_settle', function(k, a) return settle(k, a) end)\n"
	if err := b.rdb.Do(ctx, "FUNCTION", "LOAD", "REPLACE", lib).Err(); err != nil {
		return fmt.Errorf("FUNCTION LOAD: %w", err)
	}
	defer b.rdb.Do(ctx, "FUNCTION", "DELETE", "llmpacerbench")
	id := 0
	for _, fcall := range []bool{false, true, false, true} {
		var ids []string
		var uss []int64
		acq, err := measure(func() error {
			id++
			ids = append(ids, fmt.Sprintf("levers-%d", id))
			args := []any{ids[len(ids)-1], 0, 0, 600000, 0, 0, 1, 0, "rpm", "tpm", 1, 60000000, 1, 60000000, 0}
			var v []any
			var err error
			if fcall {
				v, err = b.rdb.FCall(ctx, "llmpacerbench_acquire", keys, args...).Slice()
			} else {
				v, err = lua.Acquire.Run(ctx, b.rdb, keys, args...).Slice()
			}
			if err != nil {
				return err
			}
			if c, _ := v[0].(int64); c != 1 {
				return fmt.Errorf("acquire refused: %v", v)
			}
			us, _ := v[2].(int64)
			uss = append(uss, us)
			return nil
		})
		if err != nil {
			return err
		}
		i := 0
		set, err := measure(func() error {
			args := []any{ids[i], uss[i], 0, 0, "tpm", -1}
			i++
			if fcall {
				return b.rdb.FCall(ctx, "llmpacerbench_settle", keys, args...).Err()
			}
			return lua.Settle.Run(ctx, b.rdb, keys, args...).Err()
		})
		if err != nil {
			return err
		}
		how := "EVALSHA"
		if fcall {
			how = "FCALL (same text, a library)"
		}
		fmt.Fprintf(b.out, "| RPM + TPM, buckets full, %s: acquire %.1f + settle %.1f | %.1f |\n", how, acq/1000, set/1000, (acq+set)/1000)
	}
	return nil
}
