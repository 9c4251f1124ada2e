package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// kinds records the events of the kinds asked for, in order.
type kinds struct {
	mu     sync.Mutex
	events []pacer.Event
}

func (k *kinds) observe(e pacer.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events = append(k.events, e)
}

// count returns how many events of kind were seen.
func (k *kinds) count(kind pacer.EventKind) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, e := range k.events {
		if is(e, kind) {
			n++
		}
	}
	return n
}

// redisDown and redisUp stand for a Redis event with Err (Redis lost) and
// one without (found again), for kinds' count and waitFor.
const (
	redisDown pacer.EventKind = -1 - iota
	redisUp
)

// is says whether e is of kind, where kind may be redisDown or redisUp.
func is(e pacer.Event, kind pacer.EventKind) bool {
	switch kind {
	case redisDown:
		return e.Kind == pacer.Redis && e.Err != nil
	case redisUp:
		return e.Kind == pacer.Redis && e.Err == nil
	}
	return e.Kind == kind
}

// lost counts the Warning events that say the state was lost.
func (k *kinds) lost() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, e := range k.events {
		if e.Kind == pacer.Warning && errors.Is(e.Err, pacer.ErrStateLost) {
			n++
		}
	}
	return n
}

// waitFor waits up to d for the n-th event of kind.
func (k *kinds) waitFor(t *testing.T, kind pacer.EventKind, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for k.count(kind) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %s event (number %d) within %v", kind, n, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outagePacer returns a Pacer on miniredis with cfg (its Name set), a
// record of its events, and the miniredis.
func outagePacer(t *testing.T, cfg pacer.Config) (*pacer.Pacer, *kinds, redistest.Backend) {
	t.Helper()
	b := redistest.Mini(t)
	k := &kinds{}
	cfg.Name = redistest.Name(t)
	cfg.Observe = k.observe
	return newPacer(t, b, cfg), k, b
}

func TestOutageConfig(t *testing.T) {
	hourly := pacer.Rate{Unit: pacer.Tokens, Limit: 100_000, Window: time.Hour}
	spend := pacer.Rate{Unit: pacer.Spend, Limit: 1_000_000, Window: 24 * time.Hour, Sliding: true}
	base := pacer.Config{Name: "x", Limits: pacer.Limits{RPM: 600, TPM: 100_000, Concurrency: 8},
		Rates: []pacer.Rate{hourly, spend}, Prices: map[string]pacer.Price{"": {Input: 1, Output: 1}}}
	for _, tc := range []struct {
		name string
		o    pacer.Outage
		want string // in the error; "" for a valid Outage
	}{
		{"zero", pacer.Outage{}, ""},
		{"replicas", pacer.Outage{FailOpen: []string{"rpm", "concurrency", hourly.Name()}, Replicas: 4}, ""},
		{"share", pacer.Outage{FailOpen: []string{"tpm"}, Share: 0.25}, ""},
		{"spend", pacer.Outage{FailOpen: []string{spend.Name()}, Replicas: 2}, "spend can never fail open"},
		{"not a limit", pacer.Outage{FailOpen: []string{"rpd"}, Replicas: 2}, `"rpd", which is not a limit`},
		{"no share", pacer.Outage{FailOpen: []string{"rpm"}}, "neither Replicas nor Share"},
		{"both", pacer.Outage{FailOpen: []string{"rpm"}, Replicas: 2, Share: 0.5}, "set one"},
		{"share above 1", pacer.Outage{FailOpen: []string{"rpm"}, Share: 1.5}, "fraction in (0, 1]"},
		{"negative replicas", pacer.Outage{FailOpen: []string{"rpm"}, Replicas: -1}, "between 1 and"},
		{"nothing open", pacer.Outage{Replicas: 3}, "FailOpen is empty"},
		{"fail fast", pacer.Outage{FailFast: true}, ""},
		{"share too small", pacer.Outage{FailOpen: []string{"rpm"}, Replicas: 1000}, "less than one request"},
		{"no slot", pacer.Outage{FailOpen: []string{"concurrency"}, Replicas: 9}, "no slot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Outage = tc.o
			_, err := pacer.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New(Outage %+v) = %v; want nil", tc.o, err)
			case tc.want != "" && (!errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New(Outage %+v) = %v; want ErrInvalid saying %q", tc.o, err, tc.want)
			}
		})
	}
}

// A budget that fails closed refuses every call while Redis is down with
// an error that is both ErrUnavailable and the Redis error.
func TestFailClosedIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   pacer.Config
		limit string
	}{
		{"no outage config", pacer.Config{Limits: pacer.Limits{RPM: 600}}, ""},
		{"tpm closed", pacer.Config{Limits: pacer.Limits{RPM: 600, TPM: 10_000},
			Outage: pacer.Outage{FailOpen: []string{"rpm"}, Replicas: 2}}, "tpm"},
		{"concurrency closed", pacer.Config{Limits: pacer.Limits{RPM: 600, Concurrency: 4},
			Outage: pacer.Outage{FailOpen: []string{"rpm"}, Replicas: 2}}, "concurrency"},
		{"fail fast", pacer.Config{Limits: pacer.Limits{RPM: 600}, Outage: pacer.Outage{FailFast: true}}, "rpm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// go-redis's own retries would only slow the test down.
			b := redistest.Mini(t)
			rdb := redis.NewClient(&redis.Options{Addr: b.Addrs[0], MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			tc.cfg.Name = redistest.Name(t)
			p, err := pacer.New(rdb, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			b.Mini.Close()
			ctx := context.Background()
			// Twice each: the first call trips the circuit, the second
			// meets it tripped. A call that reserves no tokens is refused too.
			for i, r := range []pacer.Request{{Tokens: 10}, {Tokens: 0}} {
				for _, call := range []func() (*pacer.Lease, error){
					func() (*pacer.Lease, error) { return p.Acquire(ctx, r) },
					func() (*pacer.Lease, error) { return p.TryAcquire(ctx, r) },
				} {
					l, err := call()
					var ue *pacer.RefusedError
					// The error wraps the connection's: a dial's, or EOF from
					// a connection New's background check left in the pool
					// when the server went.
					var op *net.OpError
					if l != nil || !errors.Is(err, pacer.ErrUnavailable) || !errors.As(err, &ue) || !errors.As(err, &op) && !errors.Is(err, io.EOF) {
						t.Fatalf("call %d with Redis down = %v, %v; want an ErrUnavailable *RefusedError wrapping the connection's error", i, l, err)
					}
					if ue.Limit != tc.limit {
						t.Errorf("RefusedError.Limit = %q; want %q", ue.Limit, tc.limit)
					}
				}
			}
		})
	}
}

// While Redis is down, a budget whose limits fail open admits from this
// process's share and no more: RPM 6000 among 4 replicas refills 1500 a
// minute, one call every 40 ms, from empty (the shared budget may have
// been spent when Redis went). The shared budget takes over once Redis
// answers, and a lease admitted locally ends locally, never touching Redis.
func TestFailOpenAdmitsLocalShare(t *testing.T) {
	p, ev, b := outagePacer(t, pacer.Config{Limits: pacer.Limits{RPM: 6000},
		Outage: pacer.Outage{FailOpen: []string{"rpm"}, Replicas: 4}})
	ctx := context.Background()
	shared, err := p.Acquire(ctx, pacer.Request{Tokens: 1})
	if err != nil || shared.Info().Local {
		t.Fatalf("Acquire with Redis up = %v, %v; want a shared lease", shared, err)
	}
	b.Mini.Close()
	start := time.Now()
	// The first call trips the circuit and finds the local share empty.
	if l, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 1}); l != nil || err != nil || wait <= 0 || wait > 40*time.Millisecond {
		t.Fatalf("TryAcquire as Redis is lost = %v, %v, %v; want ErrWaitTimeout for at most 40ms (an empty share)", l, wait, err)
	}
	var held []*pacer.Lease
	// A second from now: the first call waited out go-redis's retries.
	for loop := time.Now(); time.Since(loop) < time.Second; {
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 1, MaxWait: time.Second})
		if err != nil || !l.Info().Local {
			t.Fatalf("Acquire %d with Redis down = %v, %v; want a local lease", len(held), l, err)
		}
		held = append(held, l)
	}
	// One every 40 ms since Redis was lost, and no burst.
	if max := int(time.Since(start)/(40*time.Millisecond)) + 1; len(held) < 5 || len(held) > max {
		t.Errorf("admitted %d in %v with Redis down; want 5 to %d (a quarter of RPM 6000)", len(held), time.Since(start), max)
	}
	if n := ev.count(redisDown); n != 1 {
		t.Errorf("%d Redis-lost events; want 1", n)
	}

	// Redis answers again: the shared budget admits, within a second.
	if err := b.Mini.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	ev.waitFor(t, redisUp, 1, 5*time.Second)
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 1})
	if err != nil || l.Info().Local {
		t.Fatalf("Acquire once Redis answers = %v, %v; want a shared lease", l, err)
	}
	if d := time.Since(back); d > 1500*time.Millisecond {
		t.Errorf("the shared budget took over %v after Redis answered; want within 1s (1.5s with slack for a loaded machine)", d)
	}
	// The budget's keys as Redis holds them: the state hash and the leases.
	rdb := b.Client(t)
	keys := func() string {
		h := rdb.HGetAll(ctx, pacer.Keys(p)[0]).Val()
		z := rdb.ZRangeWithScores(ctx, pacer.Keys(p)[1], 0, -1).Val()
		return fmt.Sprint(h, z)
	}
	before := keys()
	for _, l := range held {
		if err := l.Settle(ctx, 1); err != nil {
			t.Fatalf("Settle of a local lease once Redis is back = %v", err)
		}
	}
	if after := keys(); after != before {
		t.Errorf("settling local leases changed Redis:\n%s\n->\n%s\nwant no change", before, after)
	}
	for _, l := range []*pacer.Lease{shared, l} {
		if err := l.Settle(ctx, 1); err != nil {
			t.Errorf("Settle of a shared lease = %v", err)
		}
	}
	if s := snap(t, p); s.InFlight != 0 {
		t.Errorf("in flight after every lease settled: %d; want 0", s.InFlight)
	}
}

// A local lease's Settle gives its unused tokens back to the local share,
// as settle.lua does to the shared budget; Cancel gives back the request too.
func TestLocalSettleRefunds(t *testing.T) {
	t.Parallel()
	perSecond := pacer.Rate{Unit: pacer.Tokens, Limit: 1000, Window: time.Second}
	p, _, b := outagePacer(t, pacer.Config{Limits: pacer.Limits{Concurrency: 4}, Rates: []pacer.Rate{perSecond},
		Outage: pacer.Outage{FailOpen: []string{perSecond.Name(), "concurrency"}, Replicas: 2}})
	ctx := context.Background()
	b.Mini.Close()
	// The first call trips the circuit, and waits for the empty local
	// share (500 tokens a second) to refill.
	l, err := p.Acquire(ctx, pacer.Request{Tokens: 500, MaxWait: 10 * time.Second})
	if err != nil || !l.Info().Local {
		t.Fatalf("Acquire(500) with Redis down = %v, %v; want a local lease", l, err)
	}
	if l2, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 400}); l2 != nil || err != nil || wait <= 0 {
		t.Fatalf("TryAcquire(400) with the local share spent = %v, %v, %v; want ErrWaitTimeout", l2, wait, err)
	}
	if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 501}); !errors.Is(err, pacer.ErrUnavailable) {
		t.Errorf("TryAcquire(501) beyond the local share of 500 = %v; want ErrUnavailable", err)
	}
	if err := l.Settle(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if l.Info().State != pacer.Settled || l.Info().Held <= 0 {
		t.Errorf("local lease after Settle: %v, held %v; want settled, held > 0", l.Info().State, l.Info().Held)
	}
	l, _, err = tryAcquire(p, ctx, pacer.Request{Tokens: 400})
	if err != nil || l == nil {
		t.Fatalf("TryAcquire(400) after settling 100 of 500 = %v, %v; want a local lease", l, err)
	}
	if l2, wait, err := tryAcquire(p, ctx, pacer.Request{Tokens: 400}); l2 != nil || err != nil || wait <= 0 {
		t.Fatalf("TryAcquire(400) with the refund spent = %v, %v, %v; want ErrWaitTimeout", l2, wait, err)
	}
	// Two local slots of four: the third waits for one.
	l2, err := p.TryAcquire(ctx, pacer.Request{Tokens: 0})
	if err != nil {
		t.Fatal(err)
	}
	var ny *pacer.RefusedError
	if _, err := p.TryAcquire(ctx, pacer.Request{}); !errors.Is(err, pacer.ErrWaitTimeout) || !errors.As(err, &ny) || ny.Limit != "concurrency" {
		t.Fatalf("a third call with 2 local slots held = %v; want ErrWaitTimeout for concurrency", err)
	}
	if err := l2.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if l3, err := p.TryAcquire(ctx, pacer.Request{}); err != nil || !l3.Info().Local {
		t.Errorf("a call after one local slot was freed = %v, %v; want a local lease", l3, err)
	}
	if err := l.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
}

// Acquire waits for room in the local share, and gives up at once when
// its bound is too short, as it does with Redis up.
func TestLocalAcquireWaits(t *testing.T) {
	t.Parallel()
	p, ev, b := outagePacer(t, pacer.Config{Limits: pacer.Limits{Concurrency: 2},
		Outage: pacer.Outage{FailOpen: []string{"concurrency"}, Replicas: 2}})
	ctx := context.Background()
	b.Mini.Close()
	l, err := p.Acquire(ctx, pacer.Request{})
	if err != nil || !l.Info().Local {
		t.Fatalf("Acquire with Redis down = %v, %v; want a local lease", l, err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = l.Fail(ctx, serverError, nil)
	}()
	start := time.Now()
	l2, err := p.Acquire(ctx, pacer.Request{MaxWait: 10 * time.Second})
	if err != nil || !l2.Info().Local {
		t.Fatalf("Acquire waiting for the local slot = %v, %v", l2, err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("Acquire returned after %v; the only local slot was freed after 100ms", d)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Acquire(cctx, pacer.Request{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire with no local slot and a 50ms deadline = %v; want DeadlineExceeded", err)
	}
	if n := ev.count(pacer.Waiting); n < 1 {
		t.Errorf("no Waiting event for the local wait")
	}
	_ = l2.Settle(ctx, 0)
}

// The circuit trips on connection-class errors only: a script's error and
// a caller's deadline leave the budget shared.
func TestCircuitIgnoresScriptErrorsAndDeadlines(t *testing.T) {
	b := redistest.Mini(t)
	k := &kinds{}
	cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 600}, Observe: k.observe,
		Outage: pacer.Outage{FailOpen: []string{"rpm"}, Replicas: 2}}
	ctx := context.Background()

	// The state hash made a string: every script fails with WRONGTYPE.
	p := newPacer(t, b, cfg)
	rdb := b.Client(t)
	if err := rdb.Set(ctx, pacer.Keys(p)[0], "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx, pacer.Request{}); err == nil || errors.Is(err, pacer.ErrUnavailable) {
		t.Errorf("Acquire on a broken state key = %v; want the script's error, not ErrUnavailable", err)
	}
	_ = rdb.Del(ctx, pacer.Keys(p)[0])

	// A hung Redis and callers whose deadline comes first.
	px := redistest.NewProxy(t, b.Addrs[0])
	slow := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: time.Minute})
	t.Cleanup(func() { _ = slow.Close() })
	ph, err := pacer.New(slow, cfg)
	if err != nil {
		t.Fatal(err)
	}
	px.Hang(true)
	for range 3 {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		if _, err := ph.Acquire(cctx, pacer.Request{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire through a hung Redis = %v; want DeadlineExceeded", err)
		}
		cancel()
	}
	px.Hang(false)
	if n := k.count(redisDown); n != 0 {
		t.Errorf("%d Redis-lost events for a script error and deadlines; want 0", n)
	}
	if l, err := ph.Acquire(ctx, pacer.Request{}); err != nil || l.Info().Local {
		t.Errorf("Acquire once the proxy answers = %v, %v; want a shared lease", l, err)
	}
}

// While the circuit is tripped, calls do not dial Redis: only the probe
// does, every 200 ms.
func TestCircuitSparesTheDial(t *testing.T) {
	t.Parallel()
	b := redistest.Mini(t)
	var dials atomic.Int64
	rdb := redis.NewClient(&redis.Options{Addr: b.Addrs[0], Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, tc := range []struct {
		name string
		open []string
	}{{"fail fast", nil}, {"fail closed", []string{"rpm"}}, {"fail open", []string{"rpm", "tpm"}}} {
		t.Run(tc.name, func(t *testing.T) {
			_ = b.Mini.Restart()
			p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 600_000, TPM: 1e9},
				Outage: pacer.Outage{FailOpen: tc.open, Replicas: 2 * min(len(tc.open), 1), FailFast: tc.open == nil}})
			if err != nil {
				t.Fatal(err)
			}
			b.Mini.Close()
			ctx := context.Background()
			_, _ = p.TryAcquire(ctx, pacer.Request{Tokens: 1}) // trips the circuit
			before, start := dials.Load(), time.Now()
			const calls = 2000
			for range calls {
				if _, err := p.TryAcquire(ctx, pacer.Request{Tokens: 1}); err != nil && !errors.Is(err, pacer.ErrUnavailable) && !errors.Is(err, pacer.ErrWaitTimeout) {
					t.Fatalf("TryAcquire with Redis down = %v", err)
				}
			}
			// Each probe may dial a few times (go-redis retries).
			probes := int64(time.Since(start)/(200*time.Millisecond)) + 2
			if n := dials.Load() - before; n > 4*probes {
				t.Errorf("%d calls with the circuit tripped dialled %d times in %v; want only the probe's (at most %d)", calls, n, time.Since(start), 4*probes)
			}
		})
	}
}

// A client closed while Redis is down ends the probe: the circuit closes
// (a Redis event without Err) and calls meet the closed client's error, rather than a
// goroutine probing for ever.
func TestProbeEndsWithClosedClient(t *testing.T) {
	t.Parallel()
	b := redistest.Mini(t)
	k := &kinds{}
	rdb := redis.NewClient(&redis.Options{Addr: b.Addrs[0], MaxRetries: -1})
	p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 600}, Observe: k.observe,
		Outage: pacer.Outage{FailFast: true}})
	if err != nil {
		t.Fatal(err)
	}
	b.Mini.Close()
	ctx := context.Background()
	if _, err := p.TryAcquire(ctx, pacer.Request{}); !errors.Is(err, pacer.ErrUnavailable) {
		t.Fatalf("TryAcquire with Redis down = %v; want ErrUnavailable", err)
	}
	k.waitFor(t, redisDown, 1, time.Second)
	_ = rdb.Close()
	k.waitFor(t, redisUp, 1, 2*time.Second)
	if _, err := p.TryAcquire(ctx, pacer.Request{}); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("TryAcquire on a closed client = %v; want redis.ErrClosed", err)
	}
}

// While the circuit is tripped, Pause, Throttled and Sync fail at once with
// ErrUnavailable instead of dialling.
func TestWritesFailFastWhileDown(t *testing.T) {
	t.Parallel()
	p, ev, b := outagePacer(t, pacer.Config{Limits: pacer.Limits{RPM: 600, TPM: 60_000}, Outage: pacer.Outage{FailFast: true}})
	b.Mini.Close()
	ctx := context.Background()
	_, _ = p.TryAcquire(ctx, pacer.Request{})
	ev.waitFor(t, redisDown, 1, time.Second)
	start := time.Now()
	for name, err := range map[string]error{
		"Pause":     p.Pause(ctx, time.Second),
		"Throttled": pacer.Throttle(ctx, p, time.Second, classify.LimitTokens, pacer.Request{Tokens: 10}),
		"Sync":      p.Sync(ctx, classify.RateLimits{Tokens: classify.Window{Limit: 60_000, Remaining: 100, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true}}),
	} {
		if !errors.Is(err, pacer.ErrUnavailable) {
			t.Errorf("%s with Redis down = %v; want ErrUnavailable", name, err)
		}
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Pause, Throttled and Sync took %v with the circuit tripped; want no dial (go-redis's retries take over a second)", d)
	}
}
