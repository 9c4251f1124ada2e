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
	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// settleHook holds the first lone settle (settle.lua) until release
// closes, so that the settles after it queue behind it and go together;
// and it makes the first batch (settles.lua) lose its reply after it ran,
// with fail as the error.
type settleHook struct {
	held, release chan struct{}
	holdOnce      sync.Once
	lost          atomic.Bool
	fail          error
	batches       atomic.Int64 // settles.lua calls that reached Redis
}

func (h *settleHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *settleHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *settleHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || !strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") {
			return next(ctx, cmd)
		}
		sha, _ := args[1].(string)
		switch {
		case sha == lua.Settle.Hash() || strings.EqualFold(cmd.Name(), "eval") && sha == lua.Source("settle"):
			first := false
			h.holdOnce.Do(func() { first = true })
			if first {
				close(h.held)
				<-h.release
			}
		case sha == lua.Settles.Hash() || strings.EqualFold(cmd.Name(), "eval") && sha == lua.Source("settles"):
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
	h := &settleHook{held: make(chan struct{}), release: make(chan struct{}), fail: fail}
	rdb.AddHook(h)
	p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPD: 10_000, TPD: 8_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	leases := make([]*pacer.Lease, n)
	for i := range leases {
		if leases[i], err = p.Acquire(ctx, pacer.Request{Tokens: 1000}); err != nil {
			t.Fatalf("Acquire = %v", err)
		}
	}
	first := leases[0].Info().Start
	// The first settle goes alone and is held; the rest queue behind it.
	var wg sync.WaitGroup
	errs := make([]error, n)
	settle := func(i int) {
		defer wg.Done()
		errs[i] = leases[i].Settle(ctx, int64(100+i))
	}
	wg.Add(1)
	go settle(0)
	<-h.held
	// One caller gives up while it waits behind the settle in flight.
	gone, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := leases[1].Settle(gone, 101); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Settle with a ctx that ends while queued = %v; want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Settle held its caller %v past its ctx's 50 ms", took)
	}
	for i := 2; i < n; i++ {
		wg.Add(1)
		go settle(i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pacer.QueuedSettles(p) < n-2 && time.Now().Before(deadline) {
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
			t.Errorf("lease %d ended %v; want Settled", i, s)
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
