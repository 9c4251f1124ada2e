package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// anatomy: where an acquire's instructions go. It records the keys and
// arguments a Pacer with an RPM + TPM budget sends acquire.lua, then runs
// copies of the script cut short (a "do return 1 end" inserted before a
// step) with the same arguments under callgrind, so each row is the cost
// of everything up to that step: the command, the prelude, the arguments,
// and the script's lines before it. The differences between rows are what
// each step costs. Needs -callgrind-pid, as instr does.
//
// A step whose line is no longer in acquire.lua is left out, so the table
// follows the script as it changes.
func (b *bench) anatomy(ctx context.Context) error {
	if b.cgPID == 0 {
		return fmt.Errorf("-callgrind-pid is required: the pid of a redis-server run under valgrind --tool=callgrind")
	}
	keys, args, err := b.acquireCall(ctx)
	if err != nil {
		return err
	}
	const n = 1000
	src := lua.Source("acquire")
	cut := strings.Index(src, "\n-- acquire.lua")
	if cut < 0 {
		return fmt.Errorf("anatomy: acquire.lua's header not found in its source")
	}
	prelude, body := src[:cut+1], strings.Split(src[cut+1:], "\n")
	id := 0
	run := func(text string) (float64, error) {
		s := redis.NewScript(text)
		call := func() error {
			id++
			a := append([]any(nil), args...)
			a[0] = fmt.Sprintf("anatomy-%d", id)
			err := s.Run(ctx, b.rdb, keys, a...).Err()
			if err == redis.Nil {
				err = nil
			}
			return err
		}
		if err := call(); err != nil {
			return 0, err
		}
		if err := exec.Command("callgrind_control", "-z", strconv.Itoa(b.cgPID)).Run(); err != nil {
			return 0, fmt.Errorf("callgrind_control -z: %w", err)
		}
		for i := 0; i < n; i++ {
			if err := call(); err != nil {
				return 0, err
			}
		}
		return b.dumpInstr(n)
	}
	fmt.Fprintf(b.out, "## Where an acquire's instructions go (callgrind; RPM + TPM budget, %d calls a row)\n", n)
	fmt.Fprintln(b.out, "| up to | k instructions | this step |")
	fmt.Fprintln(b.out, "|---|---:|---:|")
	prev := 0.0
	row := func(name string, v float64) {
		fmt.Fprintf(b.out, "| %s | %.1f | %+.1f |\n", name, v/1000, (v-prev)/1000)
		prev = v
	}
	// The same command with no keys or arguments, then with the prelude.
	for _, c := range []struct{ name, text string }{
		{"`return 1`, no arguments", "return 1"},
		{"the prelude (its closures)", prelude + "return 1"},
	} {
		s := redis.NewScript(c.text)
		_ = s.Run(ctx, b.rdb, nil).Err()
		if err := exec.Command("callgrind_control", "-z", strconv.Itoa(b.cgPID)).Run(); err != nil {
			return fmt.Errorf("callgrind_control -z: %w", err)
		}
		for i := 0; i < n; i++ {
			if err := s.Run(ctx, b.rdb, nil).Err(); err != nil {
				return err
			}
		}
		v, err := b.dumpInstr(n)
		if err != nil {
			return err
		}
		row(c.name, v)
	}
	steps := []struct{ name, line string }{
		{"+ its keys and arguments", "local state, leases, queue = KEYS[1], KEYS[2], KEYS[3]"},
		{"+ reading ARGV, the clock", "local names = {'xp', 'pause'}"},
		{"+ HMGET of the state", "local dvw = nil"},
		{"+ the definition's version", "local tkey, th, share, swait = KEYS[5], nil, false, 0"},
		{"+ tenant, sliding and stop pre-passes", "local wait, reason, reply, left = 0, '', nil, false"},
		{"+ the buckets' check", "    local pause = h[2]"},
		{"+ pause, stop and slot checks", "  if redis.call('ZADD', leases, 'NX', fmt('%d', score), id) == 0 then break end"},
		{"+ ZADD of the lease (and reaping)", "  local turn, args, ms, a = us + wait * 1000, {}, expiry, 0"},
		{"+ new TATs and give-back stacks", "  if tkey then tcover(tkey, now, (th[1] or 0) + 0, max(tms, now), targs, ta) end"},
		{"+ HSET of the state (cover)", "  if slot or not conc then"},
	}
	for _, st := range steps {
		i := indexOf(body, st.line)
		if i < 0 {
			continue
		}
		text := prelude + strings.Join(body[:i], "\n") + "\ndo return 1 end\n" + strings.Join(body[i:], "\n")
		v, err := run(text)
		if err != nil {
			return fmt.Errorf("anatomy %q: %w", st.name, err)
		}
		row(st.name, v)
	}
	v, err := run(src)
	if err != nil {
		return err
	}
	row("+ the reply: the whole acquire", v)
	return b.rdb.Del(ctx, keys...).Err()
}

func indexOf(lines []string, line string) int {
	for i, l := range lines {
		if l == line {
			return i
		}
	}
	return -1
}

// acquireCall returns the keys and arguments an RPM + TPM Pacer sends
// acquire.lua, recorded by a hook on a client of its own: the exact call,
// not a copy of how the Pacer builds it.
func (b *bench) acquireCall(ctx context.Context) ([]string, []any, error) {
	rdb := redis.NewClient(b.rdb.Options())
	defer rdb.Close()
	rec := &recorder{sha: lua.Acquire.Hash(), src: lua.Source("acquire")}
	rdb.AddHook(rec)
	b.names++
	p, err := pacer.New(rdb, pacer.Config{
		Name:      fmt.Sprintf("anatomy-%d", b.names),
		KeyPrefix: "llmpacer-bench",
		Limits:    pacer.Limits{RPM: 1 << 40, TPM: 1 << 45},
	})
	if err != nil {
		return nil, nil, err
	}
	l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100})
	if err != nil {
		return nil, nil, err
	}
	_ = l.Settle(ctx, 60)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.args == nil {
		return nil, nil, fmt.Errorf("anatomy: no acquire call recorded")
	}
	return rec.keys, rec.args, nil
}

// recorder keeps the keys and arguments of the first EVALSHA or EVAL of
// one script (hash sha, text src).
type recorder struct {
	sha  string
	src  string
	mu   sync.Mutex
	keys []string
	args []any
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if len(a) >= 3 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			r.mu.Lock()
			if r.args == nil && (a[1] == r.sha || a[1] == r.src) {
				nk, _ := a[2].(int)
				if len(a) >= 3+nk {
					for _, k := range a[3 : 3+nk] {
						r.keys = append(r.keys, fmt.Sprint(k))
					}
					for _, v := range a[3+nk:] {
						r.args = append(r.args, fmt.Sprint(v))
					}
				}
			}
			r.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
