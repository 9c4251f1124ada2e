package main

import (
	"context"
	"fmt"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// argsLibrary holds three functions that take a batch of acquires'
// arguments and do no other work: none returns at once; split makes a
// table of each call's arguments and reads its counts and one number,
// as batch.lua's begin does; packed takes one binary string a call and
// unpacks it with struct.unpack into a table.
const argsLibrary = `#!lua name=llmpacer_bench_args
redis.register_function('llmpacer_args_none', function(keys, args) return 1 end)
redis.register_function('llmpacer_args_split', function(keys, args)
  local c, i, n = {}, 1, 0
  while i <= #args do
    local t, m = args[i] + 0, args[i + 1] + 0
    n = n + 1
    c[n] = {unpack(args, i + 2, i + 1 + m)}
    local x = c[n][4] + 0
    i = i + m + 2
  end
  return 1
end)
redis.register_function('llmpacer_args_packed', function(keys, args)
  local c, upk = {}, struct.unpack
  for i = 1, #args do
    c[i] = {upk('>Bc0BBI8BBBBBc0Bc0I8I8I8I8B', args[i])}
    local x = c[i][4] + 0
  end
  return 1
end)
`

// args measures what a batch's arguments cost Redis before a script
// looks at them, a call (issue 23, round 14): FCALL of a function that
// returns at once with k acquires' arguments (17 a call, as a Pacer
// sends them: the tenant's index, the count, acquire.lua's 15), of one
// that splits them into a table a call as batch.lua's begin does, and
// of one that takes a packed string a call instead, under callgrind at
// k = 2 and 16, and the cost a call fitted from the two.
func (b *bench) args(ctx context.Context) error {
	if b.cgPID == 0 {
		return fmt.Errorf("-callgrind-pid is required: the pid of a redis-server run under valgrind --tool=callgrind")
	}
	if err := b.rdb.FunctionLoadReplace(ctx, argsLibrary).Err(); err != nil {
		return fmt.Errorf("FUNCTION LOAD: %w", err)
	}
	defer b.rdb.FunctionDelete(ctx, "llmpacer_bench_args")
	keys := wire.Keys("{llmpacer-bench:args}")
	call := func(fn string, k, seq int) []any {
		var a []any
		for x := 0; x < k; x++ {
			id := fmt.Sprintf("okPdbkQiYg4FBlQ--%d-%d", seq, x)
			if fn == "llmpacer_args_packed" {
				p := append([]byte{byte(len(id))}, id...)
				p = append(p, 0, 0, 0, 0, 0, 0, 0, 0x09, 0x27, 0xc0, 0, 0, 1, 0, 3, 'r', 'p', 'm', 3, 't', 'p', 'm')
				for j := 0; j < 4; j++ {
					p = append(p, 0, 0, 0, 0, 3, 0x93, 0x87, 0x00)
				}
				a = append(a, string(append(p, 0)))
				continue
			}
			a = append(a, 0, 15, id, 0, 0, 600000, 0, 0, 1, 0, "rpm", "tpm", 20000, 60000999, 20000, 60000099, 0)
		}
		return a
	}
	fmt.Fprintln(b.out, "## A batch's arguments (round 14): instructions a call (callgrind), FCALL of k acquires' arguments")
	fmt.Fprintln(b.out, "| function | k = 2 | k = 16 | a call, fitted |")
	fmt.Fprintln(b.out, "|---|---:|---:|---:|")
	const calls = 200
	for _, fn := range []string{"llmpacer_args_none", "llmpacer_args_split", "llmpacer_args_packed"} {
		var per [2]float64
		for i, k := range []int{2, 16} {
			seq := 0
			v, err := b.measureN(calls)(func() error {
				seq++
				return b.rdb.FCall(ctx, fn, keys, call(fn, k, seq)...).Err()
			})
			if err != nil {
				return fmt.Errorf("%s, k = %d: %w", fn, k, err)
			}
			per[i] = v / float64(k)
		}
		// per[i] = P + B/k: P from k = 2 and 16.
		p := (16*per[1] - 2*per[0]) / 14
		fmt.Fprintf(b.out, "| %s | %.1fk | %.1fk | %.1fk |\n", fn, per[0]/1000, per[1]/1000, p/1000)
	}
	return nil
}
