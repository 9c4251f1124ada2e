package pacer_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// clock moves a test's Redis clock: miniredis's by SetTime, a real Redis's
// by sleeping.
type clock struct {
	b   redistest.Backend
	now time.Time
}

func newClock(b redistest.Backend) *clock {
	c := &clock{b: b, now: time.Now()}
	if b.Mini != nil {
		b.Mini.SetTime(c.now)
	}
	return c
}

func (c *clock) advance(d time.Duration) {
	if c.b.Mini == nil {
		time.Sleep(d)
		return
	}
	c.now = c.now.Add(d)
	c.b.Mini.SetTime(c.now)
}

// A give-back that reaches Redis after the bucket refilled past its charge
// and was spent again must not add a second burst. RPM 60 with a burst of
// 5: a call at 0, its Cancel held back 1.3 s, while a second process takes
// the burst the refill restored by 1.15 s. Whatever order the give-backs
// arrive in, the calls admitted in any interval [t, t+d] never exceed
// burst + rate·d.
func TestLateGiveBackAddsNoBurst(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		cfg := pacer.Config{Name: redistest.Name(t), Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 60, Window: time.Minute, Burst: 5}}}
		ps := newPacers(t, b, 2, cfg)
		c := newClock(b)
		a, err := ps[0].TryAcquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatalf("TryAcquire = %v; want a lease from a full budget", err)
		}
		c.advance(1150 * time.Millisecond) // full again
		var starts []time.Time
		for range 5 {
			l, err := ps[1].TryAcquire(ctx, pacer.Request{})
			if err != nil {
				t.Fatalf("TryAcquire from a refilled bucket = %v; want a lease", err)
			}
			starts = append(starts, l.Info().Start)
		}
		c.advance(150 * time.Millisecond)
		if err := a.Cancel(ctx); err != nil { // the give-back, late
			t.Fatalf("Cancel = %v", err)
		}
		if l, err := ps[1].TryAcquire(ctx, pacer.Request{}); err == nil {
			starts = append(starts, l.Info().Start)
		} else if !errors.Is(err, pacer.ErrWaitTimeout) {
			t.Fatalf("TryAcquire after the late Cancel = %v; want a lease or ErrWaitTimeout", err)
		}
		d := starts[len(starts)-1].Sub(starts[0])
		if bound := 5 + d.Seconds(); float64(len(starts)) > bound {
			t.Errorf("%d calls admitted in %v; the bound is burst + rate·d = %.2f", len(starts), d, bound)
		}
	})
}

// Settle whose first attempt never reached Redis, retried after the lease
// expired, reports the expiry: ErrLeaseExpired, state Expired, an Ended
// event that says so, and nothing refunded.
func TestSettleRetriedAfterExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		if b.Kind == "cluster" {
			t.Skip("the proxy fronts one node; the standalone lanes cover it")
		}
		redistest.QuietRedisLog(t)
		ctx := context.Background()
		px := redistest.NewProxy(t, b.Addrs[0])
		rdb := redis.NewClient(&redis.Options{Addr: px.Addr()})
		defer rdb.Close()
		var mu sync.Mutex
		var ends []pacer.Event
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1000}, LeaseTTL: 300 * time.Millisecond,
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Ended {
					mu.Lock()
					ends = append(ends, e)
					mu.Unlock()
				}
			}}
		p, err := pacer.New(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		direct := newPacer(t, b, cfg)
		c := newClock(b)
		began := time.Now()
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 600})
		if err != nil {
			t.Fatal(err)
		}
		px.Drop(true)
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err = l.Settle(cctx, 100)
		cancel()
		if err == nil || l.Info().State != pacer.Active {
			t.Fatalf("Settle through a Redis that runs nothing = %v, state %v; want an error, still held", err, l.Info().State)
		}
		c.advance(400 * time.Millisecond) // past the lease's expiry
		px.Drop(false)
		if err := l.Settle(ctx, 100); !errors.Is(err, pacer.ErrLeaseExpired) {
			t.Errorf("Settle retried after expiry = %v; want ErrLeaseExpired", err)
		}
		if got := l.Info().State; got != pacer.Expired {
			t.Errorf("State() = %v; want expired", got)
		}
		mu.Lock()
		if len(ends) != 1 || ends[0].End != pacer.Expired || !errors.Is(ends[0].Err, pacer.ErrLeaseExpired) {
			t.Errorf("Ended events = %+v; want one, expired, with ErrLeaseExpired", ends)
		}
		mu.Unlock()
		// The reservation stays: 600 of 1000 taken, less the refill of
		// 1000 a minute over the time Redis's clock ran: the 400 ms the
		// test moved miniredis's, or the time since began on a real Redis
		// (more than half a second on a loaded machine). A refund would
		// give back 500.
		lvl := snap(t, direct).Rate("tpm").Level
		ran := elapsed(began) // after the read it bounds
		if b.Mini != nil {
			ran = 400 * time.Millisecond
		}
		if most := 400 + 1000/60.0*ran.Seconds() + 0.01; lvl > most {
			t.Errorf("TPM level = %v; want 400 and at most %.2f with the refill: an expired lease refunds nothing", lvl, most)
		}
	})
}

// Settle whose reply timed out is resent by go-redis itself (it retries a
// command after a read timeout, MaxRetries times), so the script runs
// twice and only the second reply, "no such lease", reaches the lease.
// That is the lease's own first attempt ending it, not an expiry: Settle
// succeeds, the lease is settled and reported so, and the refund is made
// once. Seen on a loaded CI machine, where a miniredis slower than the
// read timeout made a few settles of every hundred report ErrLeaseExpired.
func TestSettleResentByTheRedisClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		if b.Kind == "cluster" {
			t.Skip("the proxy fronts one node; the standalone lanes cover it")
		}
		redistest.QuietRedisLog(t)
		ctx := context.Background()
		rs := newResender(t, b)
		rdb := rs.rdb
		var mu sync.Mutex
		var ends []pacer.Event
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1000},
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Ended && e.Tokens == 600 {
					mu.Lock()
					ends = append(ends, e)
					mu.Unlock()
				}
			}}
		p, err := pacer.New(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		direct := newPacer(t, b, cfg)
		// A first lease loads settle.lua, so that the one under test runs
		// at its first EVALSHA rather than failing with NOSCRIPT.
		first, err := p.Acquire(ctx, pacer.Request{Tokens: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		l, err := p.Acquire(ctx, pacer.Request{Tokens: 600})
		if err != nil {
			t.Fatal(err)
		}
		rs.hang(nil)
		err = l.Settle(ctx, 100)
		rs.resent(t, "settle")
		if err != nil {
			t.Errorf("Settle resent by go-redis = %v; want nil: the first run ended the lease", err)
		}
		if got := l.Info().State; got != pacer.Settled {
			t.Errorf("State() = %v; want settled", got)
		}
		mu.Lock()
		if len(ends) != 1 || ends[0].End != pacer.Settled || ends[0].Used != 100 {
			t.Errorf("Ended events = %+v; want one, settled, 100 used", ends)
		}
		mu.Unlock()
		// 100 of 1000 used, the 500 refunded once: the level is 900 plus
		// what refilled, never more than the capacity.
		if lvl := snap(t, direct).Rate("tpm").Level; lvl < 899 || lvl > 1000 {
			t.Errorf("TPM level = %v; want 900 (plus the refill): the refund made once", lvl)
		}
	})
}

// An acquire whose first run queued it for a slot, resent by go-redis
// after its reply timed out, finds its slot free (the holder's lease
// expired meanwhile) and is admitted: its queue entry goes with it. Left
// behind, with its request, the next freed slot would admit it again and
// charge it twice.
func TestAcquireResentAfterItQueued(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		if b.Kind == "cluster" {
			t.Skip("the proxy fronts one node; the standalone lanes cover it")
		}
		redistest.QuietRedisLog(t)
		ctx := context.Background()
		c := newClock(b)
		rs := newResender(t, b)
		rdb := rs.rdb
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: 1}, LeaseTTL: 300 * time.Millisecond}
		p, err := pacer.New(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		holder := newPacer(t, b, cfg)
		// Load acquire.lua through p's client, then hold the only slot.
		if l, err := p.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		} else if err := l.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.TryAcquire(ctx, pacer.Request{}); err != nil {
			t.Fatal(err)
		}
		rs.hang(func() {
			if b.Mini != nil {
				c.advance(time.Second) // past the holder's lease TTL
			}
		})
		l, err := p.Acquire(ctx, pacer.Request{MaxWait: 5 * time.Second})
		rs.resent(t, "acquire")
		if err != nil {
			t.Fatalf("Acquire resent by go-redis = %v; want a lease", err)
		}
		defer l.Cancel(ctx)
		keys := pacer.Keys(p)
		if n, err := b.Client(t).ZCard(ctx, keys[2]).Result(); err != nil || n != 1 {
			t.Errorf("slot queue holds %d members (%v); want only its sentinel: the admitted call's entry must go", n, err)
		}
		if fs, err := b.Client(t).HKeys(ctx, keys[0]).Result(); err == nil {
			for _, f := range fs {
				if len(f) > 2 && f[:2] == "w:" {
					t.Errorf("state hash keeps a waiter's request %s after its admission", f)
				}
			}
		}
	})
}

// resender is a client to b, through a proxy, that makes go-redis resend
// one command the way it does after a read timeout. After hang, replies
// are held; the command's read times out (300 ms); go-redis's retry dials
// a new connection (the client has one), and that dial runs then and lets
// replies through, so the resend runs after then and is answered. A dial
// before the timeout (another of a Pacer's connections) leaves the hang.
type resender struct {
	rdb   *redis.Client
	px    *redistest.Proxy
	armed atomic.Int64 // when the hang began (UnixNano); 0: not armed
	dials atomic.Int32 // retries' dials seen
	then  func()
}

func newResender(t *testing.T, b redistest.Backend) *resender {
	t.Helper()
	r := &resender{px: redistest.NewProxy(t, b.Addrs[0])}
	r.rdb = redis.NewClient(&redis.Options{Addr: r.px.Addr(), PoolSize: 1, ReadTimeout: 300 * time.Millisecond, MaxRetries: 2})
	t.Cleanup(func() { _ = r.rdb.Close() })
	r.rdb.AddHook(dialHook(func() {
		if a := r.armed.Load(); a != 0 && time.Since(time.Unix(0, a)) >= 300*time.Millisecond && r.armed.CompareAndSwap(a, 0) {
			if r.then != nil {
				r.then()
			}
			r.px.Hang(false)
			r.dials.Add(1) // after then: a caller that sees it sees then's effects
		}
	}))
	return r
}

// hang holds replies until the next command's retry dials; then runs
// before they flow again.
func (r *resender) hang(then func()) {
	r.then = then
	r.armed.Store(time.Now().UnixNano())
	r.px.Hang(true)
}

// resent fails t unless go-redis resent the command (what) once.
func (r *resender) resent(t *testing.T, what string) {
	t.Helper()
	if n := r.dials.Load(); n != 1 {
		t.Fatalf("go-redis dialed %d times after the hang; want 1: the test did not make it resend the %s", n, what)
	}
}

// dialHook is a go-redis hook that calls f before each new connection.
type dialHook func()

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h()
		return next(ctx, network, addr)
	}
}

func (h dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Acquire canceled while it sleeps towards a reserved turn and Redis hangs
// returns when its context ends, not after a give-back's own timeout; the
// turn comes back once Redis answers again.
func TestAcquireCanceledWhileRedisHangs(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		if b.Kind == "cluster" {
			t.Skip("the proxy fronts one node; the standalone lanes cover it")
		}
		redistest.QuietRedisLog(t)
		ctx := context.Background()
		px := redistest.NewProxy(t, b.Addrs[0])
		rdb := redis.NewClient(&redis.Options{Addr: px.Addr()})
		defer rdb.Close()
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1000}}
		p, err := pacer.New(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		direct := newPacer(t, b, cfg)
		if _, err := p.Acquire(ctx, pacer.Request{Tokens: 1000}); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := p.Acquire(cctx, pacer.Request{Tokens: 500}) // a turn about 30 s ahead
			done <- err
		}()
		// Wait for the reservation, then hang Redis and cancel.
		for deadline := time.Now().Add(5 * time.Second); snap(t, direct).InFlight < 2; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the second Acquire did not reserve its turn")
			}
		}
		px.Drop(true)
		cancel()
		canceled := time.Now()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire = %v; want context.Canceled", err)
		}
		// At once, not after the give-back's own 2 s timeout (1.8 s leaves
		// a loaded machine room, and still tells the two apart).
		if d := time.Since(canceled); d > 1800*time.Millisecond {
			t.Errorf("Acquire returned %v after its context ended; want at once, not after the give-back's 2 s", d)
		}
		px.Drop(false)
		for deadline := time.Now().Add(15 * time.Second); snap(t, direct).InFlight != 1; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the canceled turn was never given back")
			}
		}
	})
}

// An Acquire whose wait fits its deadline with little to spare either gets
// its lease or a ErrWaitTimeout refusal: the jitter on its sleep never carries it past
// the deadline into a bare context error.
//
// The pause is 1 s so that every call's first answer arrives before its
// deadline, also on a loaded machine: a call with no answer yet has only
// ctx's error to give. (With a 200 ms pause, 40 first calls queued on
// miniredis, slow under -race, and some missed a 215 ms deadline.) The
// deadline, 60 ms after the pause ends, is within the up to 100 ms of
// jitter on a 1 s wait.
func TestJitterNeverPassesTheDeadline(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 100_000}})
		if err := p.Pause(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, 1060*time.Millisecond)
				defer cancel()
				_, err := p.Acquire(cctx, pacer.Request{})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			var we *pacer.RefusedError
			if err != nil && (!errors.As(err, &we) || !errors.Is(err, pacer.ErrWaitTimeout)) {
				t.Errorf("Acquire = %v; want a lease or a ErrWaitTimeout refusal", err)
			}
		}
	})
}

// Names that look like other names, or cannot be typed, are refused.
func TestNamesMustBePrintable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, name := range []string{"a\u0085b", "a\u2028b", "gpt\u202e4o", "a\xffb", "a b", "a{b}"} {
		if _, err := pacer.New(rdb, pacer.Config{Name: name, Limits: pacer.Limits{RPM: 1}}); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("New(Name: %q) = %v; want ErrInvalid", name, err)
		}
	}
	if _, err := pacer.New(rdb, pacer.Config{Name: "azure:eastus:gpt-4o·mini", Limits: pacer.Limits{RPM: 1}}); err != nil {
		t.Errorf("New with a printable non-ASCII name = %v; want nil", err)
	}
}

// A typed nil client is refused in the caller's goroutine.
func TestTypedNilClient(t *testing.T) {
	for _, c := range []redis.UniversalClient{(*redis.Client)(nil), (*redis.ClusterClient)(nil)} {
		if _, err := pacer.New(c, pacer.Config{Name: "x", Limits: pacer.Limits{RPM: 1}}); !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("New(%T(nil)) = %v; want ErrInvalid", c, err)
		}
	}
}

// A lease's bad argument is pacer.ErrInvalid too: there is one.
func TestOneErrInvalid(t *testing.T) {
	b := redistest.Mini(t)
	p := newPacer(t, b, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1000}})
	l, err := p.Acquire(context.Background(), pacer.Request{Tokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(context.Background(), -1); !errors.Is(err, pacer.ErrInvalid) {
		t.Errorf("Settle(-1) = %v; want pacer.ErrInvalid", err)
	}
}
