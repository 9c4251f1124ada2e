package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// The state hash's fields that are not buckets (see lua/prelude.lua and
// lua/stop.lua): the pause, the batch queue, the keys' expiry, the stop,
// the definition's version. A bucket's give-back stack is its field plus
// ".h".
var notBuckets = map[string]bool{"pause": true, "qb": true, "xp": true, "qs": true, "dv": true}

// readRaw reads a budget without its definition: what the state hash
// says of each bucket (how long until it is full again, which needs no
// limit to know), the slots held, the pause and the stop.
func (r reader) readRaw(ctx context.Context, b *budget) error {
	t := tag(r.o.prefix, b.Name)
	keys := wire.Keys(t)[:3] // the definition is not read
	fields, err := r.bucketFields(ctx, keys[0])
	if err != nil {
		return err
	}
	// The stop is read as one more field, as pacer's Snapshot does.
	now, vals, err := r.snapshot(ctx, keys, append(fields, "qs"))
	if err != nil {
		return err
	}
	b.Time, b.PausedS, b.InFlight = time.UnixMicro(now.us), now.pause.Seconds(), now.slots
	b.Raw = rawFields(now.us, fields, vals)
	if stop := vals[len(vals)-1]; stop != "" {
		var end, next, every int64
		var kind string
		if _, err := fmt.Sscanf(stop, "%d %d %d %s", &end, &next, &every, &kind); err != nil {
			return fmt.Errorf("the stop of %q reads %q, not a stop lua/stop.lua writes", b.Name, stop)
		}
		if left := end - now.us/1000; left > 0 {
			b.StoppedS, b.StoppedBy = float64(left)/1000, kind
		}
	}
	return nil
}

// rawTenant reads a tenant's hash without a definition.
func (r reader) rawTenant(ctx context.Context, name, hash string) ([]field, error) {
	t := tag(r.o.prefix, name)
	keys := wire.Keys(t)[:3]
	keys[0] = wire.TenantKey(t, hash)
	fields, err := r.bucketFields(ctx, keys[0])
	if err != nil || len(fields) == 0 {
		return nil, err
	}
	now, vals, err := r.snapshot(ctx, keys, fields)
	if err != nil {
		return nil, err
	}
	return rawFields(now.us, fields, vals), nil
}

// bucketFields returns the bucket fields of a state or tenant hash.
func (r reader) bucketFields(ctx context.Context, key string) ([]string, error) {
	all, err := r.rdb.HKeys(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the fields of %s: %w", key, err)
	}
	var fields []string
	for _, f := range all {
		if !notBuckets[f] && !strings.HasSuffix(f, ".h") {
			fields = append(fields, f)
		}
	}
	return fields, nil
}

// clock is what snapshot.lua reads besides the fields.
type clock struct {
	us    int64 // now, µs on the Redis clock
	pause time.Duration
	slots int64
}

// snapshot runs snapshot.lua, which reads the fields without changing
// anything, on the Redis clock.
func (r reader) snapshot(ctx context.Context, keys, fields []string) (clock, []string, error) {
	args := make([]any, len(fields))
	for i, f := range fields {
		args[i] = f
	}
	v, err := wire.Run(ctx, lua.Snapshot, r.rdb, keys, args, nil)
	if err != nil {
		return clock{}, nil, fmt.Errorf("reading %s: %w", keys[0], err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3+len(fields) {
		return clock{}, nil, fmt.Errorf("reading %s: %w: %v", keys[0], wire.ErrReply, v)
	}
	ints, err := wire.Int64s(a[:3], 3)
	if err != nil {
		return clock{}, nil, fmt.Errorf("reading %s: %w", keys[0], err)
	}
	vals := make([]string, len(fields))
	for i := range fields {
		vals[i], _ = a[3+i].(string)
	}
	return clock{us: ints[0], pause: time.Duration(ints[1]) * time.Millisecond, slots: ints[2]}, vals, nil
}

// maxValue bounds a raw value printed: a sliding window's counts can be
// long.
const maxValue = 120

// rawFields returns each bucket's time until full: a bucket's field holds
// the µs at which it is full again (see lua/prelude.lua), a sliding
// window's its counts.
func rawFields(nowUs int64, fields, vals []string) []field {
	out := make([]field, 0, len(fields))
	for i, f := range fields {
		x := field{Field: f}
		if tat, err := strconv.ParseInt(vals[i], 10, 64); err == nil {
			x.FullInS = float64(max(0, tat-nowUs)) / 1e6
		} else {
			x.Value = vals[i]
			if len(x.Value) > maxValue {
				x.Value = x.Value[:maxValue] + "…"
			}
		}
		out = append(out, x)
	}
	return out
}
