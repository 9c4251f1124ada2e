package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"github.com/llmpacer/llmpacer/internal/wire"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// result is one run of the command.
type result struct {
	stdout, stderr string
	code           int
}

// runWith runs the command in-process with env as its environment.
func runWith(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return result{out.String(), errb.String(), code}
}

// envOf is the environment that points the command at b.
func envOf(b redistest.Backend) map[string]string {
	if b.Kind == "cluster" {
		return map[string]string{envCluster: strings.Join(b.Addrs, ",")}
	}
	return map[string]string{envURL: "redis://" + b.Addrs[0]}
}

// fixture is a prefix of the test's own, so that list shows only the
// test's budgets, with two budgets in it: one defined with tenants, in
// use by three of them, and one that has no stored definition.
type fixture struct {
	prefix        string
	defined, bare *pacer.Pacer
	held          []*pacer.Lease
	// bareAt is just before bare's first charge: a real Redis refills
	// its buckets from then on.
	bareAt time.Time
}

func newFixture(t *testing.T, b redistest.Backend) fixture {
	t.Helper()
	ctx := context.Background()
	if b.Mini != nil {
		b.Mini.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	// The names carry redistest.Name, whose keys the backend deletes
	// when the test ends, whatever the prefix.
	f := fixture{prefix: fmt.Sprintf("cmdtest%d", time.Now().UnixNano())}
	name := redistest.Name(t)
	var err error
	f.defined, err = pacer.New(b.Client(t), pacer.Config{Name: name + "-a", KeyPrefix: f.prefix, Version: 1,
		Limits:  pacer.Limits{RPM: 100, TPM: 10_000, Concurrency: 4},
		Rates:   []pacer.Rate{{Unit: pacer.Requests, Limit: 1000, Window: time.Hour, Sliding: true}},
		Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 5_000, Window: time.Hour}}, Share: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	f.bare, err = pacer.New(b.Client(t), pacer.Config{Name: name + "-b", KeyPrefix: f.prefix, Limits: pacer.Limits{RPM: 60, TPM: 6_000},
		Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 1_000, Window: time.Hour}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant string
		tokens int64
	}{{"small", 100}, {"big", 3_000}, {"middle", 1_000}} {
		l, err := f.defined.Acquire(ctx, pacer.Request{Tenant: c.tenant, Tokens: c.tokens})
		if err != nil {
			t.Fatal(err)
		}
		f.held = append(f.held, l)
	}
	f.bareAt = time.Now()
	l, err := f.bare.Acquire(ctx, pacer.Request{Tokens: 500, Tenant: "x"})
	if err != nil {
		t.Fatal(err)
	}
	f.held = append(f.held, l)
	// A lease settled at once: held no more, its tokens still charged.
	l, err = f.bare.Acquire(ctx, pacer.Request{Tokens: 100, Tenant: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, 100); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, l := range f.held {
			_ = l.Fail(context.Background(), classify.Verdict{Kind: classify.Transient}, nil)
		}
	})
	return f
}

// hashOf is the hash that names tenant's key in p.
func hashOf(p *pacer.Pacer, tenant string) string {
	k := tenantKeyOf(p, tenant)
	return k[strings.LastIndexByte(k, ':')+1:]
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not the JSON expected: %v\n%s", err, s)
	}
	return v
}

func find(t *testing.T, l listing, name string) budget {
	t.Helper()
	for _, b := range l.Budgets {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("budget %q not in the listing: %+v", name, l)
	return budget{}
}

// The listing shows every budget of the prefix: a defined one's levels as
// pacer's Snapshot reads them and its busiest tenants, least room first;
// an undefined one's raw state; both as text and as JSON.
func TestList(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		f := newFixture(t, b)
		env := envOf(b)
		r := runWith(t, env, "-prefix", f.prefix, "-json")
		if r.code != exitOK {
			t.Fatalf("list -json: exit %d, stderr %s", r.code, r.stderr)
		}
		l := decode[listing](t, r.stdout)
		if len(l.Budgets) != 2 || l.Truncated || l.Prefix != f.prefix {
			t.Fatalf("listing = %d budgets, truncated %v, prefix %q; want the 2 of prefix %q, whole", len(l.Budgets), l.Truncated, l.Prefix, f.prefix)
		}

		a := find(t, l, f.defined.Config().Name)
		s, err := f.defined.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]pacer.RateState{"rpm": s.Rate("rpm"), "tpm": s.Rate("tpm"), "requests/3600s": s.Rate("requests/3600s")}
		if a.Version != 1 || len(a.Limits) != len(want) || a.Error != "" {
			t.Fatalf("defined budget = %+v; want version 1 and limits %v", a, want)
		}
		for _, got := range a.Limits {
			w := want[got.Name]
			// A real Redis refills buckets between the two reads; a
			// sliding window's counts stay (none is an hour old).
			lv := got.Level
			if !got.Sliding {
				lv = min(float64(got.Capacity), lv+got.PerSecond*s.Time.Sub(a.Time).Seconds())
			}
			if got.Capacity != w.Capacity || got.Limit != w.Limit || got.PerSecond != w.PerSecond || math.Abs(lv-w.Level) > 0.5 {
				t.Errorf("limit %s = %+v, %v refilled to the Snapshot's time; pacer's Snapshot says %+v", got.Name, got, lv, w)
			}
		}
		if a.InFlight != 3 || a.Concurrency != 4 || a.Waiting != 0 {
			t.Errorf("defined budget: in flight %d of %d, %d waiting; want 3 of 4, 0", a.InFlight, a.Concurrency, a.Waiting)
		}
		if a.Tenants == nil || a.Tenants.Found != 3 || a.Tenants.Read != 3 || len(a.Tenants.Busiest) != 3 {
			t.Fatalf("tenants = %+v; want 3 found, read and shown", a.Tenants)
		}
		for i, id := range []string{"big", "middle", "small"} {
			got := a.Tenants.Busiest[i]
			ts, err := f.defined.TenantSnapshot(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			// Refilled since the listing read it, at most.
			slack := 1 + ts.Rates[0].PerSecond*ts.Time.Sub(a.Time).Seconds()
			if got.Hash != hashOf(f.defined, id) || len(got.Rates) != 1 || math.Abs(got.Rates[0].Level-ts.Rates[0].Level) > slack {
				t.Errorf("busiest[%d] = %+v; want %q (%s) with %v tokens left", i, got, id, hashOf(f.defined, id), ts.Rates[0].Level)
			}
		}

		bare := find(t, l, f.bare.Config().Name)
		if bare.Version != 0 || len(bare.Limits) != 0 || bare.InFlight != 1 || bare.Error != "" {
			t.Errorf("undefined budget = %+v; want no version, no levels, 1 in flight", bare)
		}
		full := map[string]float64{}
		for _, fl := range bare.Raw {
			full[fl.Field] = fl.FullInS
		}
		// 2 requests of 60 a minute take 2 s to refill; 600 tokens of
		// 6000 a minute, 6 s, less what a real Redis refilled since the
		// first charge (a loaded machine may take a second to list).
		since := time.Since(f.bareAt).Seconds()
		near := func(got, want float64) bool { return got <= want+0.1 && got >= want-since-0.1 }
		if !near(full["rpm"], 2) || !near(full["tpm"], 6) || len(full) != 2 {
			t.Errorf("undefined budget's raw buckets = %+v; want rpm full in ~2s, tpm in ~6s, less %.2fs", bare.Raw, since)
		}
		// Its tenants, by their raw state: the one that used more first,
		// 500 of 1000 tokens an hour taking half an hour to refill.
		if ts := bare.Tenants; ts == nil || len(ts.Busiest) != 2 || ts.Busiest[0].Hash != hashOf(f.bare, "x") ||
			len(ts.Busiest[0].Raw) != 1 || ts.Busiest[0].Raw[0].Field != "@tokens/3600s" || math.Abs(ts.Busiest[0].Raw[0].FullInS-1800) > 5 {
			t.Errorf("undefined budget's tenants = %+v; want x (%s) first, its tokens/3600s full in 1800s", ts, hashOf(f.bare, "x"))
		}

		r = runWith(t, env, "-prefix", f.prefix)
		for _, want := range []string{
			f.defined.Config().Name + "  (definition v1)", "rpm", "requests/3600s", "in flight 3 of 4",
			"tenants: 3 found; least room first", hashOf(f.defined, "big"), f.bare.Config().Name + "  (no stored definition", "Define",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("list's text lacks %q:\n%s", want, r.stdout)
			}
		}
		if r.code != exitOK || strings.Index(r.stdout, hashOf(f.defined, "big")) > strings.Index(r.stdout, hashOf(f.defined, "small")) {
			t.Errorf("list: exit %d, the busiest tenant not first:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// show reads only the budgets named, and says which are missing.
func TestShow(t *testing.T) {
	b := redistest.Real(t)
	f := newFixture(t, b)
	env := envOf(b)
	r := runWith(t, env, "show", "-prefix", f.prefix, "-json", "-tenants", "1", f.defined.Config().Name)
	l := decode[listing](t, r.stdout)
	if r.code != exitOK || len(l.Budgets) != 1 || len(l.Budgets[0].Tenants.Busiest) != 1 || l.Budgets[0].Tenants.Busiest[0].Hash != hashOf(f.defined, "big") {
		t.Errorf("show -tenants 1 = exit %d, %+v; want the budget with its busiest tenant only", r.code, l)
	}
	r = runWith(t, env, "show", "-prefix", f.prefix, f.bare.Config().Name, "nosuch")
	if r.code != exitNotFound || !strings.Contains(r.stderr, `no budget "nosuch"`) || !strings.Contains(r.stdout, f.bare.Config().Name) {
		t.Errorf("show of a budget and a missing one = exit %d\n%s%s; want exit 3 naming it, after the other", r.code, r.stdout, r.stderr)
	}
}

// -scan bounds the keys examined, and the listing says when it cut.
func TestScanLimit(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		prefix := fmt.Sprintf("cmdtest%d", time.Now().UnixNano())
		name := redistest.Name(t)
		const n = 40
		for i := range n {
			p, err := pacer.New(b.Client(t), pacer.Config{Name: fmt.Sprintf("%s-%02d", name, i), KeyPrefix: prefix, Limits: pacer.Limits{RPM: 10}})
			if err != nil {
				t.Fatal(err)
			}
			l, err := p.TryAcquire(ctx, pacer.Request{})
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Settle(ctx, 0)
		}
		env := envOf(b)
		all := decode[listing](t, runWith(t, env, "-prefix", prefix, "-json").stdout)
		if len(all.Budgets) != n || all.Truncated {
			t.Errorf("list: %d budgets, truncated %v; want %d, whole", len(all.Budgets), all.Truncated, n)
		}
		r := runWith(t, env, "-prefix", prefix, "-json", "-scan", "10")
		cut := decode[listing](t, r.stdout)
		// Each budget has three keys: ten keys hold at most ten budgets.
		if !cut.Truncated || len(cut.Budgets) > 10 || cut.KeysMatched > 10 || r.code != exitOK {
			t.Errorf("list -scan 10: %d budgets, %d keys, truncated %v, exit %d; want at most 10 keys, truncated", len(cut.Budgets), cut.KeysMatched, cut.Truncated, r.code)
		}
		if r := runWith(t, env, "-prefix", prefix, "-scan", "10"); !strings.Contains(r.stdout, "note: the scan stopped after -scan 10 keys") {
			t.Errorf("list -scan 10 says nothing of the cut:\n%s", r.stdout)
		}
	})
}

// A definition no process can use is reported, the raw state shown, and
// the exit code says a budget could not be read.
func TestUnusableDefinition(t *testing.T) {
	b := redistest.Mini(t)
	f := newFixture(t, b)
	b.Mini.HSet(keysOf(f.bare)[3], "v", "4", "def", `{"limits":{"RPM":-3}}`)
	r := runWith(t, envOf(b), "-prefix", f.prefix, "-json")
	got := find(t, decode[listing](t, r.stdout), f.bare.Config().Name)
	if r.code != exitFailed || !strings.Contains(got.Error, "version 4") || len(got.Raw) != 2 {
		t.Errorf("list with an unusable definition: exit %d, budget %+v; want exit 1, the error and the raw state", r.code, got)
	}
}

// -watch refreshes until interrupted, a JSON document a line.
func TestWatch(t *testing.T) {
	b := redistest.Mini(t)
	f := newFixture(t, b)
	env := envOf(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lines{n: 3, done: cancel}
	var errb bytes.Buffer
	code := run(ctx, []string{"-watch", "-interval", "100ms", "-json", "-prefix", f.prefix}, func(k string) string { return env[k] }, out, &errb)
	if code != exitOK {
		t.Errorf("watch: exit %d, %s", code, errb.String())
	}
	docs := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(docs) < 3 {
		t.Fatalf("watch printed %d documents before the interrupt; want 3", len(docs))
	}
	for _, d := range docs {
		if l := decode[listing](t, d); len(l.Budgets) != 2 {
			t.Errorf("a refresh lists %d budgets; want 2", len(l.Budgets))
		}
	}
}

// lines is a writer that calls done after n newlines.
type lines struct {
	bytes.Buffer
	n    int
	done func()
}

func (l *lines) Write(p []byte) (int, error) {
	n, err := l.Buffer.Write(p)
	if strings.Count(l.String(), "\n") >= l.n {
		l.done()
	}
	return n, err
}

func TestUsage(t *testing.T) {
	env := map[string]string{envURL: "redis://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"list", "x"}, "show NAME"},
		{[]string{"show"}, "show needs"},
		{[]string{"pause", "x"}, "needs -for"},
		{[]string{"stop", "-for", "8d", "x"}, "-for"},
		{[]string{"stop", "-for", "200h", "x"}, "1ms to 168h"},
		{[]string{"resume", "-for", "1m", "x"}, "-for is for pause and stop"},
		{[]string{"resume", "a", "b"}, "exactly one"},
		{[]string{"stop", "-for", "1m", "-watch", "x"}, "-watch is for list"},
		{[]string{"-interval", "1ms", "-watch"}, "-interval"},
		{[]string{"-scan", "0"}, "-scan"},
		{[]string{"-tenants", "-1"}, "-tenants"},
		{[]string{"-prefix", "a{b"}, "-prefix"},
		{[]string{"show", "a}b"}, "without '{'"},
		{[]string{"-nosuchflag"}, "llmpacer -h"},
		{[]string{"-redis", "127.0.0.1:1", "-cluster", "127.0.0.1:2"}, "both given"},
	} {
		r := runWith(t, env, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("llmpacer %q: exit %d, %q; want exit 2 saying %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if r := runWith(t, env, "-h"); r.code != exitOK || !strings.Contains(r.stderr, "Exit codes") {
		t.Errorf("llmpacer -h: exit %d, %q", r.code, r.stderr)
	}
}

// "--" ends the flags; flags may follow the command and the names.
func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{"stop", "name", "-for", "1m", "-prefix", "p"}, &bytes.Buffer{})
	if err != nil || o.cmd != "stop" || o.names[0] != "name" || o.dur != time.Minute || o.prefix != "p" {
		t.Errorf("parseArgs(stop name -for 1m -prefix p) = %+v, %v", o, err)
	}
	o, err = parseArgs([]string{"-json", "show", "--", "-odd", "x"}, &bytes.Buffer{})
	if err != nil || o.cmd != "show" || len(o.names) != 2 || o.names[0] != "-odd" || !o.json {
		t.Errorf("parseArgs(-json show -- -odd x) = %+v, %v", o, err)
	}
}

// keysOf returns p's Redis keys in the scripts' order (KEYS[1] to KEYS[4]),
// spelled from its Config as internal/wire spells them.
func keysOf(p *pacer.Pacer) []string {
	c := p.Config()
	return wire.Keys(wire.KeyTag(cmp.Or(c.KeyPrefix, wire.DefaultPrefix), c.Name, c.HashTag))
}

// tenantKeyOf returns the key of tenant's hash in p's budget.
func tenantKeyOf(p *pacer.Pacer, tenant string) string {
	return wire.TenantKey(strings.TrimSuffix(keysOf(p)[0], wire.StateSuffix), wire.TenantHash(tenant))
}
