package lua_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/model"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// A state Redis lost while a caller had seen it (its keys kept until a
// time still ahead) restarts empty, as the provider still counts it: every
// budget bucket's TAT a span ahead, a sliding window full in the current
// sub-window, and the reply's xp -1. A caller that never saw it, or one
// that sends a time the new state already keeps its keys until, finds it
// as it is. The script and internal/model agree byte for byte.
func TestLostStateRestartsEmpty(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		if b.Mini != nil {
			b.Mini.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		}
		rdb := b.Client(t)
		tag := "{llmpacer:" + redistest.Name(t) + "}"
		keys := []string{tag + ":s", tag + ":l", tag + ":q", tag + ":d"}
		cfg := model.Config{Rates: []model.Rate{
			{Unit: wire.Requests, Cap: 60, Refill: 60, Window: 60_000},
			{Unit: wire.Tokens, Cap: 6000, Refill: 6000, Window: 60_000},
			{Unit: wire.Requests, Cap: 5, Window: 10_000, Sliding: true},
		}}
		m := &model.Budget{}
		// acquire runs the script and the model on the script's clock, and
		// returns the reply's code and xp.
		acquire := func(id string, seen int64) (code, xp int64) {
			t.Helper()
			cs := cfg.Charges(model.Request{Tokens: 100}, false, 0)
			a := wire.Acquire{ID: id, TTL: time.Minute, Spacing: 1, Charges: cs, Versioned: true, Seen: seen}
			got, err := rdb.Eval(ctx, lua.Source("acquire"), keys, a.Args()...).Slice()
			if err != nil || len(got) != 7 {
				t.Fatalf("acquire %s = %v, %v", id, got, err)
			}
			us := got[2].(int64)
			want := m.Acquire(us, model.Call{ID: id, TTL: 60_000, Spacing: 1, Charges: cs, Versioned: true, Seen: seen})
			if got[0] != int64(want.Code) || got[1] != want.Wait || got[3] != want.Reason || got[4] != want.Expiry ||
				(got[6] == int64(wire.Lost)) != want.Lost {
				t.Fatalf("acquire %s seen %d = %v; model says %+v", id, seen, got, want)
			}
			for _, f := range cfg.Fields() {
				v, _ := rdb.HGet(ctx, keys[0], f).Result()
				if w := m.Value(f); v != w {
					t.Errorf("after acquire %s: %s = %q; model says %q", id, f, v, w)
				}
			}
			return got[0].(int64), got[6].(int64)
		}
		lose := func() {
			t.Helper()
			for _, k := range keys[:3] {
				if err := rdb.Del(ctx, k).Err(); err != nil {
					t.Fatal(err)
				}
			}
			m = &model.Budget{}
		}

		// A budget used for the first time starts full.
		if code, xp := acquire("a", 0); code != 1 || xp != 0 {
			t.Fatalf("first acquire: code %d, xp %d; want admitted on a new state (xp 0)", code, xp)
		}
		// A second call learns the xp.
		_, seen := acquire("b", 0)
		if seen <= 0 {
			t.Fatalf("acquire on a live state: xp %d; want its expiry", seen)
		}
		lose()
		if code, xp := acquire("c", seen); code != 0 || xp != wire.Lost {
			t.Fatalf("acquire after the state was lost: code %d, xp %d; want refused (the buckets are empty) and xp -1", code, xp)
		}
		// Another process that saw the same state finds it restarted, not
		// lost again: its xp is at least what that process saw.
		if code, xp := acquire("d", seen); code != 0 || xp < seen {
			t.Errorf("a second process after the loss: code %d, xp %d; want refused, and xp at least %d", code, xp, seen)
		}
		// A process that never saw the state starts it full.
		lose()
		if code, xp := acquire("e", 0); code != 1 || xp != 0 {
			t.Errorf("a process that never saw the state: code %d, xp %d; want admitted on a full budget", code, xp)
		}
		// A budget with a concurrency limit alone sends the time seen
		// with no bucket after it.
		lone := wire.Acquire{ID: "g", TTL: time.Minute, Limit: 2, BatchSlots: 2, Spacing: 1, Versioned: true, Seen: seen + 60_000}
		if got, err := rdb.Eval(ctx, lua.Source("acquire"), keys, lone.Args()...).Slice(); err != nil || got[0] != int64(1) {
			t.Errorf("acquire with slots alone and a time seen = %v, %v; want admitted", got, err)
		}
		// A time already past is an expiry, not a loss: full.
		lose()
		if code, xp := acquire("f", 1); code != 1 || xp != 0 {
			t.Errorf("a state past the xp seen: code %d, xp %d; want admitted on a full budget", code, xp)
		}
	})
}
