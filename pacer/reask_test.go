package pacer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// A waiter that gives up while its second ask (with its ticket) is still
// on its way leaves the slot queue even when its leave lands first: the
// ask then queues it again, and its late reply must take it out again.
// Else a freed slot admits a caller who is gone, and the slot stays taken
// for a lease TTL (seen once in .ci/soak, through pacerhttp's waiting
// room: the leave and the ask go on two connections, in no set order).
func TestWaiterLeavesWhenItsLeaveOvertakesItsAsk(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		cfg := pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: 1}, MaxWait: 20 * time.Second}
		holder := newPacer(t, b, cfg)
		held, err := holder.Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		rdb := b.Client(t)
		hook := &reaskHook{asking: make(chan struct{}), left: make(chan struct{}), go_: make(chan struct{}), asked: make(chan struct{})}
		rdb.AddHook(hook)
		waiter, err := pacer.New(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wctx, giveUp := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Acquire(wctx, pacer.Request{})
			done <- err
		}()
		select {
		case <-hook.asking: // queued, and asking again with its ticket
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter never asked again with its ticket")
		}
		giveUp()
		if err := <-done; err == nil {
			t.Fatal("the waiter's Acquire succeeded after it gave up")
		}
		select {
		case <-hook.left: // its leave has run
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter never left the queue")
		}
		close(hook.go_) // now its second ask runs, and queues it again
		select {
		case <-hook.asked: // it has: its late reply now takes it out
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter's second ask never ran")
		}
		keys := pacer.Keys(holder)
		queued := func() int64 {
			n, err := b.Client(t).ZCard(ctx, keys[2]).Result()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		deadline := time.Now().Add(5 * time.Second)
		for queued() > 1 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := queued(); n > 1 {
			t.Errorf("slot queue holds %d members 5 s after the waiter gave up; want its sentinel alone", n)
		}
		if err := held.Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		for snap(t, holder).InFlight != 0 && time.Now().Before(deadline.Add(5*time.Second)) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := snap(t, holder).InFlight; n != 0 {
			t.Errorf("slots held after the only lease settled = %d; want 0: the slot went to a waiter who had left", n)
		}
	})
}

// reaskHook holds a waiter's first ask with a ticket (ARGV[8] not "0")
// until go_ closes, saying so on asking; and says on left when a settle
// (the waiter's leave) has run.
type reaskHook struct {
	once, leftOnce sync.Once
	asking, left   chan struct{}
	go_            chan struct{}
	asked          chan struct{} // closed once the held ask has run
}

func (h *reaskHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *reaskHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *reaskHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 3 || !strings.EqualFold(cmd.Name(), "evalsha") {
			return next(ctx, cmd)
		}
		switch args[1] {
		case lua.Acquire.Hash():
			nk, _ := args[2].(int)
			if i := 3 + nk + 7; i < len(args) && fmt.Sprint(args[i]) != "0" {
				held := false
				h.once.Do(func() { held = true; close(h.asking) })
				if held {
					<-h.go_
					err := next(ctx, cmd)
					close(h.asked)
					return err
				}
			}
		case lua.Settle.Hash():
			err := next(ctx, cmd)
			h.leftOnce.Do(func() { close(h.left) })
			return err
		}
		return next(ctx, cmd)
	}
}
