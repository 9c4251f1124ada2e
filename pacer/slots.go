package pacer

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// Waiting for a concurrency slot. A caller that finds none is queued in
// Redis with a ticket (the time of its first denial) and its request, so
// callers in every process get slots first come, first served. When a
// slot frees, the script that freed it admits the queue's head with it,
// checking and charging every limit as acquire would, and publishes the
// head's id with the outcome; the waiter's process hands it the outcome,
// and its call runs. So a waiter costs one script call (the one that
// queued it), and it is woken by its admission, not by polling.
//
// The price: a waiter whose process dies is admitted all the same, and
// holds its slot until its lease TTL ends. One that gives up ends the
// lease it may have been given (see leave).

// linger is how long a Pacer keeps its subscription to hand-overs after its
// last waiter left: a steady stream of waiters keeps one connection, and an
// idle process closes it.
const linger = 5 * time.Second

// listen subscribes to the budget's hand-overs until ctx is done (see
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

// granted returns those of ids that a freed slot admitted (they are in the
// lease set), in one command: the waiters registered before the
// subscription was ready. Each then asks acquire, which tells it.
func (p *Pacer) granted(ctx context.Context, ids []string) ([]string, error) {
	scores, err := p.sub.ZMScore(ctx, p.keys[1], ids...).Result()
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

// waitGrant waits, queued with the reply rep, until a freed slot admits
// this caller (id), and returns the outcome published for it (see
// handed); or until its fallback timer fires, for a message that was
// lost: twice the script's estimate of the wait and a little more, so that
// it rarely fires before a message (each time it does costs a script
// call), but never past the deadline (less a round trip). Then it returns
// "": the caller asks acquire with its ticket, which keeps its place, or
// tells it it was admitted. It returns ctx's error if ctx ends first.
func (p *Pacer) waitGrant(ctx context.Context, id string, r Request, rep wire.AcquireReply, deadline time.Time) (string, error) {
	p.emit(Event{Kind: Waiting, Tokens: r.Tokens, Priority: r.Priority, Wait: rep.Wait, Limit: nameConcurrency})
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
	case outcome := <-wake:
		return outcome, nil
	case <-t.C:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return "", nil
}

// handed returns the reply acquire would have given this waiter, from the
// outcome a freed slot published for it ('<code>:<expiry ms>:<charged
// µs>', see prelude.lua's give): code 1, admitted holding its slot (for a
// pending lease, its claim); code 2, admitted with a later turn as a
// pending lease (its turn is the expiry less the lease TTL). It returns
// nil for anything else (0: not admitted; a malformed outcome): the
// waiter asks acquire.
func (a *acquisition) handed(outcome string) *wire.AcquireReply {
	f := strings.Split(outcome, ":")
	if len(f) != 3 {
		return nil
	}
	code, err1 := strconv.ParseInt(f[0], 10, 64)
	expiry, err2 := strconv.ParseInt(f[1], 10, 64)
	at, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || expiry <= 0 {
		return nil
	}
	rep := &wire.AcquireReply{Code: wire.Admitted, Now: time.UnixMicro(at), NowUs: at, Expiry: time.UnixMilli(expiry)}
	switch {
	case code == 1 && a.pending != nil:
		return rep // the claim: the lease was charged at its admission
	case at <= 0:
		return nil
	case code == 1:
		return rep
	case code == 2 && a.pending == nil:
		turn := expiry - a.under.s.leaseTTL.Milliseconds()
		rep.Wait = time.Duration(max(turn-at/1000, 0)) * time.Millisecond
		rep.Ticket = turn * 1000
		return rep
	}
	return nil
}

// fallbackSlack is added to a queued waiter's fallback timer: the message
// that admits it takes a round trip and a scheduler's delay to arrive.
const fallbackSlack = 100 * time.Millisecond
