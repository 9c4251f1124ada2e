package model

import (
	"fmt"
	"strings"
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
// of callers: the script that frees a slot admits the queue's head with it
// and publishes its id, admission and expiry; a new arrival queues behind
// them.
func TestSlotQueue(t *testing.T) {
	var b Budget
	t1 := int64(t0) * 1000 // µs
	steps := []struct {
		name string
		got  func() Reply
		want Reply
	}{
		{"a takes a slot", func() Reply { return b.Acquire(t1, slot("a", 0)) }, Reply{1, 0, "", t0 + 60_000, 0, false}},
		{"b takes the other", func() Reply { return b.Acquire(t1+1, slot("b", 0)) }, Reply{1, 0, "", t0 + 60_000, 0, false}},
		{"c queues first", func() Reply { return b.Acquire(t1+2, slot("c", 0)) }, Reply{0, 10, "concurrency", 0, t1 + 2, false}},
		{"d queues second", func() Reply { return b.Acquire(t1+3, slot("d", 0)) }, Reply{0, 20, "concurrency", 0, t1 + 3, false}},
		{"e will not wait", func() Reply {
			c := slot("e", 0)
			c.MaxWait = 0
			return b.Acquire(t1+4, c)
		}, Reply{0, 30, "concurrency", 0, 0, false}},
		{"a ends: c is admitted", func() Reply { return Reply{Code: b.Settle(t1+1000, "a", t1, 2, 1, nil)} }, Reply{Code: 1}},
		{"d comes back early: still queued", func() Reply { return b.Acquire(t1+1001, slot("d", t1+3)) }, Reply{0, 10, "concurrency", 0, t1 + 3, false}},
		{"f arrives: behind d", func() Reply { return b.Acquire(t1+1002, slot("f", 0)) }, Reply{0, 20, "concurrency", 0, t1 + 1002, false}},
		{"c asks again: admitted already", func() Reply { return b.Acquire(t1+1003, slot("c", t1+2)) }, Reply{2, 0, "", t0 + 60_001, 0, false}},
	}
	for _, s := range steps {
		if diff := cmp.Diff(s.want, s.got()); diff != "" {
			t.Fatalf("%s: mismatch (-want +got):\n%s\n%v", s.name, diff, &b)
		}
	}
	if got, want := b.Published(), []string{fmt.Sprintf("c:1:%d:%d", t0+60_001, t1+1000)}; !cmp.Equal(got, want) {
		t.Errorf("published %q; want %q", got, want)
	}
	// b ends: d is admitted, f stays first in the queue.
	if got := b.Settle(t1+2000, "b", t1, 2, 1, nil); got != 1 {
		t.Fatalf("settle b = %d", got)
	}
	if got, want := b.Published(), []string{fmt.Sprintf("d:1:%d:%d", t0+60_002, t1+2000)}; !cmp.Equal(got, want) {
		t.Errorf("published %q; want %q", got, want)
	}
	if ids, _ := b.Queued(); !cmp.Equal(ids, []string{"f"}) {
		t.Errorf("queue %v; want [f]", ids)
	}
	if got := b.InFlight(t0 + 2); got != 2 {
		t.Errorf("slots held = %d; want 2 (c and d)", got)
	}
}

// A waiter that gives up right as a slot admits it ends the lease it was
// given (a cancel), and the slot goes to the next waiter: none is lost.
func TestLeaveAfterHandOver(t *testing.T) {
	var b Budget
	us := int64(t0) * 1000
	b.Acquire(us, slot("a", 0))
	b.Acquire(us, slot("b", 0))
	b.Acquire(us+1, slot("c", 0))
	b.Acquire(us+2, slot("d", 0))
	b.Settle(us+10, "a", us, 2, 1, nil) // admits c
	b.Published()
	if got := b.Settle(us+20, "c", us+1, 2, 1, nil); got != 1 {
		t.Fatalf("c leaves = %d; want 1 (its lease ended)", got)
	}
	if got := b.Published(); len(got) != 1 || !strings.HasPrefix(got[0], "d:1:") {
		t.Errorf("published %q after c left; want d admitted", got)
	}
	if ids, _ := b.Queued(); len(ids) != 0 {
		t.Errorf("queue %v; want empty", ids)
	}
	if got := b.InFlight(t0); got != 2 {
		t.Errorf("slots held = %d; want 2 (b and d)", got)
	}
	// A waiter that leaves before any slot frees just leaves the queue.
	b.Acquire(us+30, slot("e", 0))
	if got := b.Settle(us+40, "e", 0, 2, 1, nil); got != 0 {
		t.Errorf("e leaves = %d; want 0 (never admitted)", got)
	}
	if ids, _ := b.Queued(); len(ids) != 0 {
		t.Errorf("queue %v; want empty", ids)
	}
}

// A head waiter whose tokens do not fit when a slot frees is admitted as
// acquire would admit it: an interactive one reserves its turn as a
// pending lease holding no slot, and the slot goes on to the next waiter;
// a batch one is told to ask again (code 0) and leaves the queue.
func TestHandOverToTokens(t *testing.T) {
	bs := Config{Rates: []Rate{{Unit: wire.Tokens, Cap: 6000, Refill: 6000, Window: 60_000}}} // tpm: 100 a second
	var b Budget
	us := int64(t0) * 1000
	call := func(id string, cost int64, batch bool) Call {
		return Call{ID: id, Batch: batch, MaxWait: 60_000, TTL: 60_000, Limit: 1, BatchSlots: 1, Spacing: 10, Charges: bs.Charges(tokens(cost), batch, 0)}
	}
	if got := b.Acquire(us, call("a", 1000, false)); got.Code != 1 {
		t.Fatalf("a = %+v", got)
	}
	b.Acquire(us+1, call("big", 3000, false)) // queued: tokens fit now, the slot does not
	b.Acquire(us+2, call("small", 500, false))
	b.Acquire(us+3, call("bat", 10, true))
	if ids, _ := b.Queued(); !cmp.Equal(ids, []string{"big", "small", "bat"}) {
		t.Fatalf("queue %v", ids)
	}
	// a ends having used 4,000 tokens more than it reserved: big no longer
	// fits for 19 s, so it becomes pending; small fits only after big's
	// turn, and is pending too; bat, batch, never reserves ahead: not
	// admitted.
	b.Settle(us+1000_000, "a", us, 1, 1, bs.Deltas(Settled, tokens(1000), 0, Usage{Tokens: 5000}))
	got := b.Published()
	if len(got) != 1 {
		t.Fatalf("published %q", got)
	}
	parts := strings.Fields(got[0])
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "big:2:") || !strings.HasPrefix(parts[1], "small:2:") || parts[2] != "bat:0:0:0" {
		t.Errorf("published %q; want big and small pending, bat told to ask again", got)
	}
	if !b.Pending("big") || !b.Pending("small") {
		t.Errorf("big, small pending = %v, %v; want both", b.Pending("big"), b.Pending("small"))
	}
	if got := b.InFlight(t0 + 1); got != 0 {
		t.Errorf("slots held = %d; want 0: pending leases hold none", got)
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
	if got := b.Published(); len(got) != 1 || !strings.HasPrefix(got[0], "j:1:") {
		t.Errorf("published %q; want j admitted", got)
	}
	// i ends, but j holds the batch share: y waits.
	b.Settle(us+20, "i", us, 2, 1, nil)
	if got := b.Published(); len(got) != 0 {
		t.Errorf("published %q; want nothing while the batch share is held", got)
	}
	b.Settle(us+40, "j", us, 2, 1, nil)
	if got := b.Published(); len(got) != 1 || !strings.HasPrefix(got[0], "y:1:") {
		t.Errorf("published %q; want y admitted", got)
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
	if got := b.Acquire(us+500_000, call("p", 100, r.Ticket)); got != (Reply{2, 500, "", t0 + 61_000, r.Ticket, false}) {
		t.Errorf("p claims before its turn = %+v; want told to wait 500 ms", got)
	}
	if got := b.Acquire(us+1_000_000, call("p", 100, r.Ticket)); got != (Reply{1, 0, "", t0 + 61_000, 0, false}) {
		t.Errorf("p claims at its turn = %+v; want its slot", got)
	}
	if got := b.InFlight(t0 + 1000); got != 1 {
		t.Errorf("slots held once p claimed = %d; want 1", got)
	}
	if got := b.Settle(us+1_100_000, "p", us, 1, 1, bs.Deltas(Settled, tokens(100), 0, Usage{Tokens: 100})); got != 1 {
		t.Errorf("settle p = %d; want 1", got)
	}
}
