package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/llmpacer/llmpacer/internal/wire"
)

// slot is a call on a budget with only a concurrency limit of 2: it waits
// up to 1 s, and slots free every 10 ms.
func slot(id string, ticket int64) Call {
	return Call{ID: id, MaxWait: 1000, TTL: 60_000, Limit: 2, BatchSlots: 1, Spacing: 10, Ticket: ticket}
}

// Waiters get slots in the order they were first denied, across any number
// of callers: a slot freed goes to the queue's head as a grant, which only
// that waiter can claim; a new arrival queues behind them.
func TestSlotQueue(t *testing.T) {
	var b Budget
	t1 := int64(t0) * 1000 // µs
	steps := []struct {
		name string
		got  func() Reply
		want Reply
	}{
		{"a takes a slot", func() Reply { return b.Acquire(t1, slot("a", 0)) }, Reply{1, 0, "", t0 + 60_000, 0}},
		{"b takes the other", func() Reply { return b.Acquire(t1+1, slot("b", 0)) }, Reply{1, 0, "", t0 + 60_000, 0}},
		{"c queues first", func() Reply { return b.Acquire(t1+2, slot("c", 0)) }, Reply{0, 10, "concurrency", 0, t1 + 2}},
		{"d queues second", func() Reply { return b.Acquire(t1+3, slot("d", 0)) }, Reply{0, 20, "concurrency", 0, t1 + 3}},
		{"e will not wait", func() Reply {
			c := slot("e", 0)
			c.MaxWait = 0
			return b.Acquire(t1+4, c)
		}, Reply{0, 30, "concurrency", 0, 0}},
		{"a ends: c gets a grant", func() Reply { return Reply{Code: b.Settle(t1+1000, "a", t1, 2, 1, nil)} }, Reply{Code: 1}},
		{"d comes back early: still queued", func() Reply { return b.Acquire(t1+1001, slot("d", t1+3)) }, Reply{0, 10, "concurrency", 0, t1 + 3}},
		{"f arrives: behind d", func() Reply { return b.Acquire(t1+1002, slot("f", 0)) }, Reply{0, 20, "concurrency", 0, t1 + 1002}},
		{"c claims its grant", func() Reply { return b.Acquire(t1+1003, slot("c", t1+2)) }, Reply{1, 0, "", t0 + 60_001, 0}},
	}
	for _, s := range steps {
		if diff := cmp.Diff(s.want, s.got()); diff != "" {
			t.Fatalf("%s: mismatch (-want +got):\n%s\n%v", s.name, diff, &b)
		}
	}
	if got := b.Published(); !cmp.Equal(got, []string{"c"}) {
		t.Errorf("published %q; want [c]", got)
	}
	// b ends: d's grant. d does not claim it; its grant expires after a
	// second, and f, coming back then, takes the slot: d lost it once.
	if got := b.Settle(t1+2000, "b", t1, 2, 1, nil); got != 1 {
		t.Fatalf("settle b = %d", got)
	}
	if got := b.Published(); !cmp.Equal(got, []string{"d"}) {
		t.Errorf("published %q; want [d]", got)
	}
	late := t1 + 2000 + claimMs*1000
	if got := b.Acquire(late, slot("f", t1+1002)); got.Code != 1 {
		t.Fatalf("f after d's grant expired = %+v; want admitted\n%v", got, &b)
	}
	// d comes back with its ticket: first in the queue again.
	if got := b.Acquire(late+1, slot("d", t1+3)); got != (Reply{0, 10, "concurrency", 0, t1 + 3}) {
		t.Errorf("d after its grant expired = %+v; want queued first, wait 10", got)
	}
	if ids, _ := b.Queued(); !cmp.Equal(ids, []string{"d"}) {
		t.Errorf("queue %v; want [d]", ids)
	}
}

// A waiter that gives up leaves the queue, and a grant it held goes to the
// next waiter.
func TestLeaveGivesTheGrantOn(t *testing.T) {
	var b Budget
	us := int64(t0) * 1000
	b.Acquire(us, slot("a", 0))
	b.Acquire(us, slot("b", 0))
	b.Acquire(us+1, slot("c", 0))
	b.Acquire(us+2, slot("d", 0))
	b.Settle(us+10, "a", us, 2, 1, nil) // c's grant
	b.Published()
	if got := b.Settle(us+20, "c", 0, 2, 1, nil); got != 0 {
		t.Fatalf("c leaves = %d; want 0 (not a lease)", got)
	}
	if got := b.Published(); !cmp.Equal(got, []string{"d"}) {
		t.Errorf("published %q after c left; want [d]", got)
	}
	if ids, _ := b.Queued(); len(ids) != 0 {
		t.Errorf("queue %v; want empty", ids)
	}
}

// Batch waiters come after every interactive one, and get a slot only
// within the batch share.
func TestBatchWaitersComeLast(t *testing.T) {
	var b Budget
	us := int64(t0) * 1000
	batch := func(id string) Call {
		c := slot(id, 0)
		c.Batch = true
		return c
	}
	if got := b.Acquire(us, batch("x")); got.Code != 1 {
		t.Fatalf("batch x = %+v; want admitted (1 of its 1 slot)", got)
	}
	if got := b.Acquire(us+1, batch("y")); got.Code != 0 || got.Ticket == 0 {
		t.Fatalf("batch y = %+v; want queued: the batch share is used", got)
	}
	if got := b.Acquire(us+2, slot("i", 0)); got.Code != 1 {
		t.Fatalf("interactive i = %+v; want the slot a batch waiter may not take", got)
	}
	if got := b.Acquire(us+3, slot("j", 0)); got.Code != 0 {
		t.Fatalf("interactive j = %+v; want queued", got)
	}
	if ids, _ := b.Queued(); !cmp.Equal(ids, []string{"j", "y"}) {
		t.Errorf("queue %v; want [j y]: interactive first", ids)
	}
	// x ends: its slot goes to j, the first waiter, though x was batch.
	b.Settle(us+10, "x", us, 2, 1, nil)
	if got := b.Published(); !cmp.Equal(got, []string{"j"}) {
		t.Errorf("published %q; want [j]", got)
	}
	// i ends, but j's grant holds the batch share: y waits.
	b.Settle(us+20, "i", us, 2, 1, nil)
	if got := b.Published(); len(got) != 0 {
		t.Errorf("published %q; want nothing while the batch share is held", got)
	}
	b.Acquire(us+30, slot("j", us+3))
	b.Settle(us+40, "j", us, 2, 1, nil)
	if got := b.Published(); !cmp.Equal(got, []string{"y"}) {
		t.Errorf("published %q; want [y]", got)
	}
}

// An interactive call that reserves a later turn for its tokens holds no
// slot until its turn, and claims one then.
func TestPendingHoldsNoSlot(t *testing.T) {
	bs := Config{Rates: []Rate{{Unit: wire.Tokens, Cap: 6000, Refill: 6000, Window: 60_000}}} // tpm: 100 a second
	var b Budget
	us := int64(t0) * 1000
	call := func(id string, cost, ticket int64) Call {
		return Call{ID: id, MaxWait: 60_000, TTL: 60_000, Limit: 1, BatchSlots: 1, Spacing: 10, Ticket: ticket, Charges: bs.Charges(tokens(cost), false, 0)}
	}
	if got := b.Acquire(us, call("a", 6000, 0)); got.Code != 1 || got.Ticket != 0 {
		t.Fatalf("a = %+v; want admitted with its slot", got)
	}
	b.Settle(us, "a", us, 1, 1, nil)
	r := b.Acquire(us, call("p", 100, 0))
	if r.Code != 1 || r.Wait != 1000 || r.Ticket != (t0+1000)*1000 {
		t.Fatalf("p = %+v; want admitted, turn in 1000 ms, pending", r)
	}
	if got := b.InFlight(t0); got != 0 {
		t.Errorf("slots held while p waits for its turn = %d; want 0", got)
	}
	if got := b.Acquire(us+500_000, call("p", 100, r.Ticket)); got != (Reply{2, 500, "", t0 + 61_000, r.Ticket}) {
		t.Errorf("p claims before its turn = %+v; want told to wait 500 ms", got)
	}
	if got := b.Acquire(us+1_000_000, call("p", 100, r.Ticket)); got != (Reply{1, 0, "", t0 + 61_000, 0}) {
		t.Errorf("p claims at its turn = %+v; want its slot", got)
	}
	if got := b.InFlight(t0 + 1000); got != 1 {
		t.Errorf("slots held once p claimed = %d; want 1", got)
	}
	if got := b.Settle(us+1_100_000, "p", us, 1, 1, bs.Deltas(Settled, tokens(100), 0, Usage{Tokens: 100})); got != 1 {
		t.Errorf("settle p = %d; want 1", got)
	}
}
