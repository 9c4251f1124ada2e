package pacer_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// queuedSignal returns an Observe func that signals on queued each time a
// call waits for a concurrency slot.
func queuedSignal(queued chan<- struct{}) func(pacer.Event) {
	return func(e pacer.Event) {
		if e.Kind == pacer.Waiting && e.Limit == "concurrency" {
			select {
			case queued <- struct{}{}:
			default:
			}
		}
	}
}

// A tenant's waiter keeps a marker in the state hash ('t <ttl> 0
// <deadline>'), not its request: the script that frees a slot cannot reach
// the tenant's hash, so it keeps the slot for the waiter and tells it to
// ask again ('<id>:0:0:0'), and the waiter's next acquire admits it,
// charging the tenant.
func TestTenantWaiterAsksAgain(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		queued := make(chan struct{}, 1)
		p := newPacer(t, b, pacer.Config{
			Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: 1, TPM: 600_000}, MaxWait: 30 * time.Second,
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 100_000, Window: time.Hour}}},
			Observe: queuedSignal(queued),
		})
		rdb := b.Client(t)
		keys := pacer.Keys(p)
		sub := rdb.Subscribe(ctx, keys[2])
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		held, err := p.Acquire(ctx, pacer.Request{Tenant: "a", Tokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *pacer.Lease, 1)
		go func() {
			l, err := p.Acquire(ctx, pacer.Request{Tenant: "b", Tokens: 1000})
			if err != nil {
				t.Errorf("tenant b's Acquire = %v", err)
			}
			got <- l
		}()
		<-queued
		h, err := rdb.HGetAll(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		markers := 0
		for f, v := range h {
			if strings.HasPrefix(f, "w:") {
				if !strings.HasPrefix(v, "t ") || strings.Count(v, " ") != 3 {
					t.Errorf("state hash has %s = %q for a tenant's waiter; want a marker, 't <ttl> 0 <deadline>'", f, v)
				}
				markers++
			}
		}
		if markers != 1 {
			t.Errorf("state hash has %d waiters' requests; want tenant b's marker", markers)
		}
		if err := held.Settle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		msg, err := sub.ReceiveMessage(ctx)
		if err != nil || !strings.HasSuffix(msg.Payload, ":0:0:0") || strings.Contains(msg.Payload, " ") {
			t.Errorf("published %v, %v; want one waiter told to ask again, '<id>:0:0:0'", msg, err)
		}
		var w *pacer.Lease
		select {
		case w = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("tenant b not admitted 10 s after the slot freed")
		}
		if w == nil {
			return
		}
		ts, err := p.TenantSnapshot(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if len(ts.Rates) != 1 || ts.Rates[0].Level > 99_000+100 {
			t.Errorf("tenant b's rates %+v; want its 1,000 tokens charged", ts.Rates)
		}
		if err := w.Settle(ctx, 1000); err != nil {
			t.Errorf("tenant b's Settle = %v", err)
		}
		if s := snap(t, p); s.InFlight != 0 {
			t.Errorf("slots held after its settle = %d; want 0", s.InFlight)
		}
	})
}

// A waiter queued under one definition and handed a slot after another is
// stored (here by its own process) was charged by the request it queued
// with: its lease ends against that definition's buckets, so a cancel
// gives its tokens back to the bucket that took them.
func TestHandOverUnderQueuedDefinition(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		queued := make(chan struct{}, 1)
		hour := []pacer.Rate{{Unit: pacer.Tokens, Limit: 100_000, Window: time.Hour}}
		p := newPacer(t, b, pacer.Config{
			Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: 1}, Rates: hour, MaxWait: 30 * time.Second,
			Version: 1, Observe: queuedSignal(queued),
		})
		rdb := b.Client(t)
		state := pacer.Keys(p)[0]
		// One lease held a second: the mean hold, and so the waiter's
		// fallback timer, is a second or more, and the waiter learns of its
		// admission from the message, with the µs it was charged at (asking
		// again, it would know only a lower bound, and get back only what
		// the charges after that bound leave room for).
		first, err := p.Acquire(ctx, pacer.Request{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := first.Settle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		held, err := p.Acquire(ctx, pacer.Request{Tokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		field := hour[0].Name()
		got := make(chan *pacer.Lease, 1)
		go func() {
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 1000})
			if err != nil {
				t.Errorf("waiter's Acquire = %v", err)
			}
			got <- l
		}()
		<-queued
		// The hourly bucket refills the 10 tokens held took (360 ms), so
		// that it is full when the slot frees; and the Pacer's slot-grant
		// subscription is ready, so that the message hands the slot over.
		time.Sleep(500 * time.Millisecond)
		waitFor(t, "the Pacer's slot-grant subscription is not ready", func() bool { return pacer.GrantsReady(p) })
		// Version 2 counts tokens over two hours: another bucket.
		if _, err := p.Define(ctx, pacer.Config{Limits: pacer.Limits{Concurrency: 1},
			Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 100_000, Window: 2 * time.Hour}}, Version: 2}); err != nil {
			t.Fatal(err)
		}
		if err := held.Settle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		var w *pacer.Lease
		select {
		case w = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("waiter not admitted 10 s after the slot freed")
		}
		if w == nil {
			return
		}
		tat := func() int64 {
			v, err := rdb.HGet(ctx, state, field).Int64()
			if err != nil {
				t.Fatalf("HGET %s: %v", field, err)
			}
			return v
		}
		charged := tat()
		then, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		// The hand-over charged this bucket, not version 2's: 1,000 tokens,
		// 36 s of it ahead of the clock.
		if ahead := charged - then.UnixMicro(); ahead < 30_000_000 {
			t.Errorf("%s is %d µs ahead of the clock after the hand-over; want about 36,000,000: the bucket that took the waiter's tokens", field, ahead)
		}
		if err := w.Cancel(ctx); err != nil {
			t.Fatalf("the handed lease's Cancel = %v", err)
		}
		after := tat()
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		// The hand-over charged 1,000 tokens, 36 s of the hourly bucket
		// (full when the slot freed); the cancel takes them all back, down
		// to now at most: the bucket is full again, whatever time passed
		// between the two. A cancel sent to the wrong bucket moves nothing;
		// one bounded by a later charge leaves the TAT ahead of the clock.
		if moved := charged - after; after > now.UnixMicro() {
			t.Errorf("the cancel moved %s back %d µs, to %d µs ahead of the clock; want it full again (back to now, about 36,000,000 µs): the tokens back to the bucket that took them",
				field, moved, after-now.UnixMicro())
		}
	})
}

// Tenants' waiters keep first come, first served order across processes,
// beside waiters of the budget alone: a freed slot is kept for the head
// waiter when it is a tenant's, until it asks again, and nobody behind
// it takes the slot meanwhile. Six waiters in four Pacers (each its own
// client and subscription) queue on one slot, in turn; each holds its
// slot briefly; they are admitted in the order they queued.
func TestTenantWaitersFirstComeFirstServed(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		// Waiter i asks for 10+i tokens; queued says who queued (a waiter
		// whose fallback timer fires queues again: not the next one).
		queued := make(chan int64, 100)
		cfg := pacer.Config{
			Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: 1, TPM: 600_000}, MaxWait: 30 * time.Second,
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 100_000, Window: time.Hour}}},
			Observe: func(e pacer.Event) {
				if e.Kind == pacer.Waiting && e.Limit == "concurrency" {
					select {
					case queued <- e.Tokens:
					default:
					}
				}
			},
		}
		ps := newPacers(t, b, 4, cfg)
		held, err := ps[0].Acquire(ctx, pacer.Request{Tokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		// The waiters in the order they queue: tenants' and the budget's
		// mixed, so that a budget's waiter right behind a tenant's would
		// take its slot if it were not kept.
		tenants := []string{"x", "y", "", "z", "", "x"}
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i, tenant := range tenants {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := ps[i%len(ps)].Acquire(ctx, pacer.Request{Tenant: tenant, Tokens: 10 + int64(i)})
				if err != nil {
					t.Errorf("waiter %d's Acquire = %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				if err := l.Settle(ctx, 10+int64(i)); err != nil {
					t.Errorf("waiter %d's Settle = %v", i, err)
				}
			}()
			for tokens := int64(0); tokens != 10+int64(i); {
				select {
				case tokens = <-queued:
				case <-time.After(10 * time.Second):
					t.Fatalf("waiter %d never queued", i)
				}
			}
		}
		if err := held.Settle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
			t.Errorf("waiters admitted in order %v; want %v, the order they queued (tenants %q)", order, want, tenants)
		}
	})
}
