package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// The floor of a leased budget: what an acquire and a settle cost with
// nothing but the Redis commands no design that keeps this state can do
// without, run with the exact keys and arguments a Pacer sends (recorded
// by a hook). Acquire: the clock, one HMGET of the fields acquire reads,
// the lease's ZADD, one HSET of each bucket's TAT and give-back stack, the
// reply; with a tenant, one HMGET and one HSET of its hash besides.
// Settle: the clock, the lease's ZSCORE and ZREM, one HMGET of the bucket
// it corrects. No Lua computation at all: set against GCRA, it says how
// far below the scripts any cost goal can go.
//
// A budget in use (see regimes.go) needs more: its give-back stacks hold
// dozens of entries, read and written whole by this state's layout, and
// each settle gives back, so it writes the TATs and stacks it corrects; a
// concurrency limit has acquire count the slots held. use says so; its
// zero value is the buckets-full floor above.
func (b *bench) floorRows(ctx context.Context, measure func(func() error) (float64, error), row func(string, float64), name string, cfg pacer.Config, tenant string, use floorUse) error {
	ak, aa, sk, sa, err := b.recordPair(ctx, cfg, tenant)
	if err != nil {
		return err
	}
	defer b.rdb.Del(ctx, append(append([]string(nil), ak...), sk...)...)
	str := func(a []any) []string {
		s := make([]string, len(a))
		for i, v := range a {
			s[i] = fmt.Sprint(v)
		}
		return s
	}
	as, ss := str(aa), str(sa)
	n := (len(as) - 8) / 3
	var stateF, tenantF []string // acquire's bucket fields, by key
	for _, f := range as[8 : 8+n] {
		if f[0] == '@' || f[0] == '%' {
			tenantF = append(tenantF, f)
		} else {
			stateF = append(stateF, f)
		}
	}
	const tat = "'1764547200000000'"
	entry := "'" + strings.Repeat("A", max(use.stack, 14)) + "'"
	quote := func(s string) string { return "'" + s + "'" }
	var src strings.Builder
	src.WriteString("local t = redis.call('TIME')\n")
	read, write := []string{"'xp'", "'pause'", "'qs'", "'dv'"}, []string{}
	for _, f := range stateF {
		read = append(read, quote(f), quote(f+".h"))
		write = append(write, quote(f), tat, quote(f+".h"), entry)
	}
	fmt.Fprintf(&src, "redis.call('HMGET', KEYS[1], %s)\n", strings.Join(read, ", "))
	if use.slots {
		src.WriteString("redis.call('ZCOUNT', KEYS[2], '(1700000000000', '(1000000000000000')\n")
	}
	src.WriteString("redis.call('ZADD', KEYS[2], 'NX', '1700000000000', ARGV[1])\n")
	fmt.Fprintf(&src, "redis.call('HSET', KEYS[1], %s)\n", strings.Join(write, ", "))
	if len(tenantF) > 0 {
		read, write = []string{"'xp'", "'qb'"}, nil
		for _, f := range tenantF {
			read = append(read, quote(f))
			write = append(write, quote(f), tat)
			if f[0] == '@' {
				read = append(read, quote(f+".h"))
				write = append(write, quote(f+".h"), entry)
			}
		}
		fmt.Fprintf(&src, "redis.call('HMGET', KEYS[5], %s)\n", strings.Join(read, ", "))
		fmt.Fprintf(&src, "redis.call('HSET', KEYS[5], %s)\n", strings.Join(write, ", "))
	}
	src.WriteString("return {1, 0, t[1] * 1000000 + t[2], '', 1700000000000, 0}\n")
	acquire := redis.NewScript(src.String())

	src.Reset()
	src.WriteString("local t = redis.call('TIME')\n")
	src.WriteString("redis.call('ZSCORE', KEYS[2], ARGV[1])\nredis.call('ZREM', KEYS[2], ARGV[1])\n")
	var corrected, tcorrected, written, twritten []string
	for i := 4; i+1 < len(ss); i += 2 {
		f := ss[i]
		if f[0] == '@' || f[0] == '%' {
			tcorrected = append(tcorrected, quote(f))
			twritten = append(twritten, quote(f), tat)
			if f[0] == '@' {
				tcorrected = append(tcorrected, quote(f+".h"))
				twritten = append(twritten, quote(f+".h"), entry)
			}
		} else {
			corrected = append(corrected, quote(f), quote(f+".h"))
			written = append(written, quote(f), tat, quote(f+".h"), entry)
		}
	}
	if len(corrected) > 0 {
		fmt.Fprintf(&src, "redis.call('HMGET', KEYS[1], %s)\n", strings.Join(corrected, ", "))
		if use.give {
			fmt.Fprintf(&src, "redis.call('HSET', KEYS[1], %s)\n", strings.Join(written, ", "))
		}
	}
	if len(tcorrected) > 0 {
		fmt.Fprintf(&src, "redis.call('HMGET', KEYS[5], %s)\n", strings.Join(tcorrected, ", "))
		if use.give {
			fmt.Fprintf(&src, "redis.call('HSET', KEYS[5], %s)\n", strings.Join(twritten, ", "))
		}
	}
	src.WriteString("return {1, t[1] * 1000000 + t[2]}\n")
	settle := redis.NewScript(src.String())

	i, j := 0, 0
	with := func(args []any, id int) []any {
		a := append([]any(nil), args...)
		a[0] = fmt.Sprintf("floor-%d", id)
		return a
	}
	acq, err := measure(func() error {
		i++
		return acquire.Run(ctx, b.rdb, ak, with(aa, i)...).Err()
	})
	if err != nil {
		return err
	}
	set, err := measure(func() error {
		j++
		return settle.Run(ctx, b.rdb, sk, with(sa, j)...).Err()
	})
	if err != nil {
		return err
	}
	row(name+", floor: acquire", acq)
	row(name+", floor: settle", set)
	row(name+", floor: acquire + settle", acq+set)
	return nil
}

// floorUse is what a budget in use adds to the floor: stack, the bytes of
// each give-back stack read and written (0: one entry); give, the settle
// writing what it gives back; slots, acquire counting the slots held.
type floorUse struct {
	stack       int
	give, slots bool
}

// recordPair returns the keys and arguments a Pacer of cfg sends acquire.lua
// and settle.lua for a call of 100 tokens (for tenant, if not ""), settled
// at 60.
func (b *bench) recordPair(ctx context.Context, cfg pacer.Config, tenant string) (ak []string, aa []any, sk []string, sa []any, err error) {
	rdb := redis.NewClient(b.rdb.Options())
	defer rdb.Close()
	ra := &recorder{sha: lua.Acquire.Hash(), src: lua.Source("acquire")}
	rs := &recorder{sha: lua.Settle.Hash(), src: lua.Source("settle")}
	rdb.AddHook(ra)
	rdb.AddHook(rs)
	b.names++
	cfg.Name = fmt.Sprintf("floor-%d", b.names)
	cfg.KeyPrefix = "llmpacer-bench"
	p, err := pacer.New(rdb, cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 100, Tenant: tenant})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := l.Settle(ctx, 60); err != nil {
		return nil, nil, nil, nil, err
	}
	_ = rdb.Del(ctx, keysOf(p)...).Err()
	if tenant != "" {
		_ = rdb.Del(ctx, tenantKeyOf(p, tenant)).Err()
	}
	if ra.args == nil || rs.args == nil {
		return nil, nil, nil, nil, fmt.Errorf("floor: the Pacer's acquire and settle were not recorded")
	}
	return ra.keys, ra.args, rs.keys, rs.args, nil
}
