package pacer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// settleHook holds every lone settle (settle.lua), or the first hold of
// them, until release closes, counting them in held, so that the settles
// after them queue and go together; and it makes the first batch
// (settles.lua) lose its reply after it ran, with fail as the error.
type settleHook struct {
	release chan struct{}
	hold    int64 // hold only the first hold lone settles (0: all)
	held    atomic.Int64
	lost    atomic.Bool
	fail    error
	batches atomic.Int64 // settles.lua calls that reached Redis (EVALSHA, EVAL or FCALL)
}

func (h *settleHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *settleHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *settleHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || !strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") && cmd.Name() != "fcall" {
			return next(ctx, cmd)
		}
		sha, _ := args[1].(string)
		switch {
		case sha == lua.Settle.Hash() || strings.EqualFold(cmd.Name(), "eval") && sha == lua.Source("settle"):
			if n := h.held.Add(1); h.hold == 0 || n <= h.hold {
				<-h.release
			}
		case sha == lua.Settles.Hash() || strings.EqualFold(cmd.Name(), "eval") && sha == lua.Source("settles") || sha == lua.SettlesFunction:
			h.batches.Add(1)
			err := next(ctx, cmd)
			if err == nil && h.fail != nil && h.lost.CompareAndSwap(false, true) {
				cmd.SetErr(h.fail)
				return h.fail
			}
			return err
		}
		return next(ctx, cmd)
	}
}

// Group commit, when a batch's reply is lost after it ran: as a timeout
// that reached Redis (every settle in it returns the error and ends in the
// background), and as an error reply (the Pacer sends each settle of the
// batch again alone). Either way every lease ends once: a day's buckets,
// which never fill, charge exactly what the calls used, the rest given
// back once, not twice. A caller whose ctx ends while its settle waits
// behind the one in flight returns at once, and its lease still ends.
func TestSettleBatchLosesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		fail error
	}{
		{"reply lost", errors.New("i/o timeout (injected after the script ran)")},
		{"error reply", errorReply("ERR injected after the script ran")},
	} {
		t.Run(c.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b redistest.Backend) {
				settleBatchLosesNothing(t, b, c.fail)
			})
		})
	}
}

// errorReply is an error Redis replied with (a redis.Error).
type errorReply string

func (e errorReply) Error() string { return string(e) }
func (errorReply) RedisError()     {}

func settleBatchLosesNothing(t *testing.T, b redistest.Backend, fail error) {
	ctx := context.Background()
	const n = 40
	rdb := b.Client(t)
	h := &settleHook{release: make(chan struct{}), fail: fail}
	rdb.AddHook(h)
	p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPD: 10_000, TPD: 8_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	// The settles held stall on purpose: no lane opens beside them.
	pacer.SetGroupStall(p, time.Hour)
	leases := make([]*pacer.Lease, n)
	for i := range leases {
		if leases[i], err = p.Acquire(ctx, pacer.Request{Tokens: 1000}); err != nil {
			t.Fatalf("Acquire = %v", err)
		}
	}
	first := leases[0].Info().Start
	// The first settles go alone, as many as may be in flight, and are
	// held; the rest queue behind them.
	var wg sync.WaitGroup
	errs := make([]error, n)
	settle := func(i int) {
		defer wg.Done()
		errs[i] = leases[i].Settle(ctx, int64(100+i))
	}
	flight := wire.GroupFlight
	deadline := time.Now().Add(10 * time.Second)
	for i := range flight {
		wg.Add(1)
		go settle(n - 1 - i)
		// One at a time: two that come together go together.
		for h.held.Load() < int64(i+1) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	// One caller gives up while it waits behind the settles in flight.
	gone, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := leases[1].Settle(gone, 101); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Settle with a ctx that ends while queued = %v; want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Settle held its caller %v past its ctx's 50 ms", took)
	}
	for i := 0; i < n-flight; i++ {
		if i != 1 {
			wg.Add(1)
			go settle(i)
		}
	}
	for pacer.QueuedSettles(p) < n-flight-1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(h.release)
	wg.Wait()
	if h.batches.Load() == 0 {
		t.Fatal("no settles.lua call reached Redis: nothing was batched, so the test shows nothing")
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, fail) && !strings.Contains(err.Error(), "injected") {
			t.Errorf("lease %d: Settle = %v", i, err)
		}
	}
	// Every lease ends (those whose reply was lost, in the background).
	var used int64
	for i, l := range leases {
		for l.Info().State == pacer.Active && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if s := l.Info().State; s != pacer.Settled {
			t.Errorf("lease %d ended %v; want Settled (its Settle: %v)", i, s, errs[i])
		}
		used += int64(100 + i)
	}
	s := snap(t, p)
	if s.InFlight != 0 {
		t.Errorf("%d leases still held; want 0", s.InFlight)
	}
	refilled := s.Time.Sub(first)
	checkLedger(t, "TPD", s.Rate("tpd"), used, refilled)
	checkLedger(t, "RPD", s.Rate("rpd"), n, refilled)
	settles, calls := pacer.SettleCounts(p)
	t.Logf("%d settles in %d script calls", settles, calls)
}

// A script call stuck in flight (a dead connection that go-redis waits on)
// holds the Pacer's other settles back for no longer than the stall (300
// ms here): a queued settle then opens a lane of its own, and the stuck
// call counts no more against the one in flight, so later settles go at
// once, not each after a stall of its own.
func TestSettleStuckInFlightHoldsNoOther(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client(t)
		h := &settleHook{release: make(chan struct{}), hold: 1}
		rdb.AddHook(h)
		p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{TPM: 1_000_000}})
		if err != nil {
			t.Fatal(err)
		}
		// A second: five settles one by one at once fit in two even on a
		// loaded machine, and five stalls would take five.
		const stall = time.Second
		pacer.SetGroupStall(p, stall)
		var leases []*pacer.Lease
		for range 11 {
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 100})
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
		}
		stuck := make(chan error, 1)
		go func() { stuck <- leases[0].Settle(ctx, 10) }()
		deadline := time.Now().Add(10 * time.Second)
		for h.held.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		// Let the rest through, but for the one stuck: the hook holds lone
		// settles only, and these go in batches, or alone once held ones
		// are counted.
		var wg sync.WaitGroup
		start := time.Now()
		for _, l := range leases[1:6] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := l.Settle(c, 10); err != nil {
					t.Errorf("Settle behind a stuck one = %v", err)
				}
			}()
		}
		wg.Wait()
		// A lane opens after the stall; a loaded machine adds its delays,
		// well under the 10 s each settle allowed.
		if took := time.Since(start); took < stall || took > stall+4*time.Second {
			t.Errorf("the settles behind a stuck one took %v; want the stall, %v, and not much more", took, stall)
		}
		// One by one now: each goes at once.
		start = time.Now()
		for _, l := range leases[6:] {
			if err := l.Settle(ctx, 10); err != nil {
				t.Errorf("Settle after a stuck one = %v", err)
			}
		}
		if took := time.Since(start); took > 2*stall {
			t.Errorf("five settles one by one beside a stuck one took %v; want each at once, not after a stall", took)
		}
		close(h.release)
		if err := <-stuck; err != nil {
			t.Errorf("the stuck Settle = %v", err)
		}
	})
}

// At a light load a lane's yield for the calls about to arrive (see
// wire.GroupYields) changes nothing: one caller's calls, one after
// another, each go alone, by the single script, and the budget charges
// each once.
func TestLoneCallsGoAloneDespiteTheYield(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ps := newPacers(t, b, 1, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPD: 100_000, TPD: 100_000_000}})
		start := snap(t, ps[0]).Time
		const n = 20
		pairs(t, ps, 1, n)
		if calls, sent := pacer.AcquireCounts(ps[0]); calls != n || sent != n {
			t.Errorf("%d acquires went in %d script calls; want %d, each alone", calls, sent, n)
		}
		if calls, sent := pacer.SettleCounts(ps[0]); calls != n || sent != n {
			t.Errorf("%d settles went in %d script calls; want %d, each alone", calls, sent, n)
		}
		s := snap(t, ps[0])
		r := s.Rate("rpd")
		refilled := s.Time.Sub(start).Seconds() * r.PerSecond
		if d := n - (float64(r.Capacity) - r.Level); d < -0.01 || d > refilled+0.01 {
			t.Errorf("RPD charged %.2f; want %d calls, less at most %.2f refilled", float64(r.Capacity)-r.Level, n, refilled)
		}
	})
}
