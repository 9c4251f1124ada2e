package main

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// pause, stop and resume change what the application's Pacer does, on a
// defined budget and on one without a definition.
func TestPauseStopResume(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		f := newFixture(t, b)
		env := envOf(b)
		for _, p := range []*pacer.Pacer{f.defined, f.bare} {
			name := p.Config().Name
			before, err := p.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r := runWith(t, env, "stop", "-prefix", f.prefix, "-for", "1m", name)
			if r.code != exitOK || !strings.Contains(r.stdout, "stopped") {
				t.Fatalf("stop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrStopped) {
				t.Errorf("%s: TryAcquire after stop = %v; want ErrStopped", name, err)
			}
			r = runWith(t, env, "resume", "-prefix", f.prefix, name)
			if r.code != exitOK || !strings.Contains(r.stdout, "ended the operator's stop") {
				t.Errorf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1}); err != nil {
				t.Errorf("%s: TryAcquire after resume = %v; want admitted", name, err)
			} else {
				_ = l.Fail(ctx, classify.Verdict{Kind: classify.Transient}, nil)
			}

			// A quota stop, as the application sets it, lifted by resume.
			quota := classify.Verdict{Kind: classify.QuotaExhausted, RetryAfter: time.Hour}
			if l, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1}); err != nil {
				t.Fatal(err)
			} else if err := l.Fail(ctx, quota, nil); err != nil {
				t.Fatal(err)
			}
			r = runWith(t, env, "show", "-json", "-prefix", f.prefix, name)
			if got := decode[listing](t, r.stdout).Budgets[0]; got.StoppedBy != "quota" || got.StoppedS < 3000 {
				t.Errorf("show of a quota-stopped budget: stopped by %q for %vs; want quota, about an hour", got.StoppedBy, got.StoppedS)
			}
			r = runWith(t, env, "resume", "-json", "-prefix", f.prefix, name)
			c := decode[change](t, r.stdout)
			if r.code != exitOK || c.Before.StoppedBy != "quota" || c.After.StoppedBy != "" {
				t.Errorf("resume -json of a quota stop = exit %d, %+v; want before quota, after none", r.code, c)
			}
			if s, err := p.Snapshot(ctx); err != nil || s.Stopped != 0 {
				t.Errorf("%s: Snapshot after resume = %v stopped, %v; want not stopped", name, s.Stopped, err)
			}

			r = runWith(t, env, "pause", "-prefix", f.prefix, "-for", "20s", name)
			if r.code != exitOK {
				t.Fatalf("pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			after, err := p.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.Paused < 15*time.Second {
				t.Errorf("%s: Paused after pause -for 20s = %v", name, after.Paused)
			}
			if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrWaitTimeout) {
				t.Errorf("%s: TryAcquire while paused = %v; want ErrWaitTimeout", name, err)
			}
			// Only the pause and stop changed: the buckets are as they were,
			// but for their refill on the Redis clock since (the call
			// admitted above was released).
			refilled := min(float64(before.Rate("tpm").Capacity), before.Rate("tpm").Level+before.Rate("tpm").PerSecond*after.Time.Sub(before.Time).Seconds())
			if math.Abs(after.Rate("tpm").Level-refilled) > 2 || after.InFlight != before.InFlight {
				t.Errorf("%s: tpm %v, in flight %d after the changes; want %v refilled from %v, %d", name, after.Rate("tpm").Level, after.InFlight, refilled, before.Rate("tpm").Level, before.InFlight)
			}
			r = runWith(t, env, "resume", "-prefix", f.prefix, name)
			if !strings.Contains(r.stdout, "not stopped") || !strings.Contains(r.stdout, "still paused") {
				t.Errorf("resume of a paused budget: %s; want it to say it was not stopped and a pause stays", r.stdout)
			}
		}
	})
}

// A missing budget is refused, unless -force says to stop it before its
// first call.
func TestActOnMissing(t *testing.T) {
	b := redistest.Mini(t)
	env := envOf(b)
	name := redistest.Name(t)
	for _, cmd := range [][]string{{"stop", "-for", "1m"}, {"pause", "-for", "1s"}, {"resume"}} {
		r := runWith(t, env, append(cmd, name)...)
		if r.code != exitNotFound || !strings.Contains(r.stderr, "llmpacer list") {
			t.Errorf("%s of a missing budget: exit %d, %s; want 3 and a hint", cmd[0], r.code, r.stderr)
		}
	}
	if r := runWith(t, env, "stop", "-force", "-for", "1m", name); r.code != exitOK {
		t.Errorf("stop -force of a missing budget: exit %d, %s", r.code, r.stderr)
	}
	p, err := pacer.New(b.Client(t), pacer.Config{Name: name, Limits: pacer.Limits{RPM: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TryAcquire(context.Background(), pacer.Request{}); !errors.Is(err, pacer.ErrStopped) {
		t.Errorf("TryAcquire on a budget stopped before its first call = %v; want ErrStopped", err)
	}
}

// llmpacer pause then llmpacer stop: the stop wins, and the application's
// calls fail at once with ErrStopped rather than wait the pause out.
func TestPauseThenStop(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		f := newFixture(t, b)
		env := envOf(b)
		p := f.defined
		if r := runWith(t, env, "pause", "-prefix", f.prefix, "-for", "20s", p.Config().Name); r.code != exitOK {
			t.Fatalf("pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := runWith(t, env, "stop", "-prefix", f.prefix, "-for", "1m", p.Config().Name); r.code != exitOK {
			t.Fatalf("stop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrStopped) {
			t.Errorf("TryAcquire after pause then stop = %v; want ErrStopped", err)
		}
		if r := runWith(t, env, "resume", "-prefix", f.prefix, p.Config().Name); r.code != exitOK {
			t.Errorf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// The command warns when the server may evict budgets' keys, naming the
// setting to change; a server with noeviction gets no warning.
func TestWarnsOfEviction(t *testing.T) {
	srv := redistest.NewServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	env := map[string]string{envURL: "redis://" + srv.Addr}
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "noeviction"} {
		if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		r := runWith(t, env, "list")
		warned := strings.Contains(r.stderr, "maxmemory-policy "+policy) && strings.Contains(r.stderr, "set maxmemory-policy noeviction")
		if r.code != exitOK || warned != (policy != "noeviction") {
			t.Errorf("list under maxmemory-policy %s: exit %d, stderr %q; want exit 0 and a warning only if it can evict", policy, r.code, r.stderr)
		}
	}
}
