package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// Budgets with a Config.HashTag (a Group's deployments) are listed as
// {HASHTAG}NAME, beside a plain budget of the same name, and shown,
// paused, stopped and resumed by that name. One tag begins like the
// prefix's keys, "{prefix:", to catch a parse that takes it for a plain
// budget's; the other does not, to catch a scan that looks only there.
func TestHashTag(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		env := envOf(b)
		prefix := fmt.Sprintf("cmdtest%d", time.Now().UnixNano())
		name := redistest.Name(t)
		tag, tag2 := prefix+":group", "eu-"+prefix
		mk := func(cfg pacer.Config) *pacer.Pacer {
			t.Helper()
			cfg.KeyPrefix = prefix
			p, err := pacer.New(b.Client(t), cfg)
			if err != nil {
				t.Fatal(err)
			}
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 100, Tenant: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Fail(context.Background(), classify.Verdict{Kind: classify.Transient}, nil) })
			return p
		}
		tenants := pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 1_000, Window: time.Hour}}}
		defined := mk(pacer.Config{Name: name + "-a", HashTag: tag, Version: 1, Limits: pacer.Limits{TPM: 10_000}, Tenants: tenants})
		bare := mk(pacer.Config{Name: name + "-b", HashTag: tag2, Limits: pacer.Limits{TPM: 6_000}, Tenants: tenants})
		plain := mk(pacer.Config{Name: name + "-a", Version: 1, Limits: pacer.Limits{TPM: 20_000}, Tenants: tenants})
		tagged := func(p *pacer.Pacer) string {
			if p == bare {
				return "{" + tag2 + "}" + p.Config().Name
			}
			return "{" + tag + "}" + p.Config().Name
		}

		r := runWith(t, env, "-prefix", prefix, "-json")
		if r.code != exitOK {
			t.Fatalf("list: exit %d\n%s", r.code, r.stderr)
		}
		l := decode[listing](t, r.stdout)
		if len(l.Budgets) != 3 {
			t.Fatalf("list found %d budgets; want 3 (two tagged, one plain): %+v", len(l.Budgets), l.Budgets)
		}
		for _, c := range []struct {
			name    string
			version int64
			limit   int64
		}{{tagged(defined), 1, 10_000}, {tagged(bare), 0, 0}, {plain.Config().Name, 1, 20_000}} {
			got := find(t, l, c.name)
			if got.Version != c.version || got.Error != "" || got.Tenants == nil || got.Tenants.Found != 1 {
				t.Errorf("%s = %+v; want version %d, one tenant", c.name, got, c.version)
			}
			if c.limit != 0 && (len(got.Limits) != 1 || got.Limits[0].Limit != c.limit) {
				t.Errorf("%s's limits = %+v; want TPM %d, its own", c.name, got.Limits, c.limit)
			}
		}

		r = runWith(t, env, "show", "-prefix", prefix, "-json", tagged(defined))
		if got := decode[listing](t, r.stdout); r.code != exitOK || len(got.Budgets) != 1 || got.Budgets[0].Tenants.Busiest[0].Hash != hashOf(defined, "acme") {
			t.Errorf("show %s = exit %d, %+v; want the budget with its tenant", tagged(defined), r.code, got)
		}
		for _, p := range []*pacer.Pacer{defined, bare} {
			if r := runWith(t, env, "stop", "-prefix", prefix, "-for", "1m", tagged(p)); r.code != exitOK {
				t.Fatalf("stop %s: exit %d\n%s%s", tagged(p), r.code, r.stdout, r.stderr)
			}
			if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrStopped) {
				t.Errorf("%s: TryAcquire after stop = %v; want ErrStopped", tagged(p), err)
			}
			if r := runWith(t, env, "resume", "-prefix", prefix, tagged(p)); r.code != exitOK || !strings.Contains(r.stdout, "ended the operator's stop") {
				t.Errorf("resume %s: exit %d\n%s%s", tagged(p), r.code, r.stdout, r.stderr)
			}
			if r := runWith(t, env, "pause", "-prefix", prefix, "-for", "20s", tagged(p)); r.code != exitOK {
				t.Fatalf("pause %s: exit %d\n%s%s", tagged(p), r.code, r.stdout, r.stderr)
			}
			if s, err := p.Snapshot(ctx); err != nil || s.Paused < 15*time.Second {
				t.Errorf("%s: Paused after pause -for 20s = %v, %v", tagged(p), s.Paused, err)
			}
		}
		// The plain budget of the same name was left alone.
		if s, err := plain.Snapshot(ctx); err != nil || s.Paused != 0 || s.Stopped != 0 {
			t.Errorf("the plain budget %s: paused %v, stopped %v, %v; want neither", plain.Config().Name, s.Paused, s.Stopped, err)
		}
		for _, bad := range []string{"{" + tag + "}", "{}" + name, "{" + tag + name} {
			if r := runWith(t, env, "show", "-prefix", prefix, bad); r.code != exitUsage || !strings.Contains(r.stderr, "{HASHTAG}NAME") {
				t.Errorf("show %q = exit %d, %s; want usage (2) naming {HASHTAG}NAME", bad, r.code, r.stderr)
			}
		}
	})
}
