package pacer

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
	"github.com/redis/go-redis/v9"
)

// Waiting for a concurrency slot. A caller that finds none is queued in
// Redis with a ticket (the time of its first denial), so callers in every
// process get slots first come, first served. When a slot frees, the
// script that freed it grants it to the queue's head and publishes the
// head's id; the waiter's process wakes it, and it claims the slot with its
// ticket. So a waiter costs one script call to queue and one to claim, and
// it is woken by the grant, not by polling.

// linger is how long a Pacer keeps its subscription to grants after its
// last waiter left: a steady stream of waiters keeps one connection, and an
// idle process closes it.
const linger = 5 * time.Second

// batchSlots returns the slots a batch call may use.
func (p *Pacer) batchSlots() int64 {
	return wire.Slots(p.s().limits.Concurrency, p.s().keep)
}

// listen subscribes to the budget's grants until ctx is done (see
// concurrency.Grants): the slot queue's key is also the channel.
func (p *Pacer) listen(ctx context.Context, ready func(), deliver func(string)) {
	sub := p.sub.Subscribe(ctx, p.keys[2])
	stop := context.AfterFunc(ctx, func() { _ = sub.Close() })
	defer stop()
	pause := 50 * time.Millisecond
	for {
		msg, err := sub.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// go-redis reconnects and subscribes again on the next
			// Receive; back off while Redis cannot be reached.
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			pause = min(2*pause, 2*time.Second)
			continue
		}
		pause = 50 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				ready()
			}
		case *redis.Message:
			deliver(m.Payload)
		}
	}
}

// granted returns those of ids that hold a grant (member g:<id> of the
// lease set; one that expired is looked at too, at the cost of a script
// call), in one command: the waiters registered before the subscription
// was ready.
func (p *Pacer) granted(ctx context.Context, ids []string) ([]string, error) {
	members := make([]string, len(ids))
	for i, id := range ids {
		members[i] = "g:" + id
	}
	scores, err := p.sub.ZMScore(ctx, p.keys[1], members...).Result()
	if err != nil {
		return nil, err
	}
	var out []string
	for i, s := range scores {
		if s != 0 {
			out = append(out, ids[i])
		}
	}
	return out, nil
}

// waitGrant waits, queued with the reply rep, until the budget grants this
// caller (id) a slot, or until its fallback timer fires, for a grant whose
// message was lost: twice the script's estimate of the wait and a little
// more, so that it rarely fires before a grant that works (each time it
// does costs a script call), but never past the deadline (less a round
// trip). A waiter whose grant expired meanwhile keeps its place by its
// ticket. It returns ctx's error if ctx ends first.
func (p *Pacer) waitGrant(ctx context.Context, id string, r Request, rep wire.AcquireReply, deadline time.Time) error {
	p.emit(Event{Kind: Waiting, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: LimitConcurrency})
	wake, leave := p.grants.Wait(id)
	defer leave()
	d := 2*rep.Wait + fallbackSlack
	d += time.Duration(rand.Int64N(int64(d/10) + 1))
	if limit := time.Until(deadline) - roundTrip; d > limit {
		d = max(limit, 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// fallbackSlack is added to a queued waiter's fallback timer: a grant
// message takes a round trip and a scheduler's delay to arrive.
const fallbackSlack = 100 * time.Millisecond

// leave takes a waiter that gives up out of the slot queue, in the
// background: settle.lua, for an id that is not a lease, removes it and
// gives a slot granted to it to the next waiter. One attempt: if it fails,
// a grant made to the waiter expires after its claim window.
func (p *Pacer) leave(id string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = wire.Run(ctx, lua.Settle, p.rdb, p.keys, wire.SettleArgs(id, 0, p.s().limits.Concurrency, p.batchSlots(), nil), nil)
	}()
}
