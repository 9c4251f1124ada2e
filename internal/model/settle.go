package model

import "github.com/llmpacer/llmpacer/internal/wire"

// Delta is one correction a settle sends (package wire's Correction): to a
// bucket, Us µs, negative to give back, positive for a debt; to a sliding
// window, units, a give-back off sub-window At (where the call was
// counted) or a debt counted now.
type Delta = wire.Correction

// Settle mirrors settle.lua: it ends lease id once, removing it from the
// lease set. us is the script's clock, charged the µs at which the lease was
// charged (as its caller knows it), limit and bslots the concurrency limit
// (0: none) and the slots batch calls may use, and deltas the corrections
// it sends, all of one sign. It returns 1 if the lease ended now, 0 if id
// was not in the lease set, and 2 if its expiry is not after now: then the
// lease stays in the set and its reservation stays charged.
//
// An id that holds no slot (a waiter giving up, a pending lease) leaves
// the slot queue with its request; a slot a lease held goes to the
// queue's head (see give), after the corrections: a give-back may let it
// fit.
//
// Giving back moves each stored TAT back by what the charges since
// charged leave room for (see giveBack), and never for a bucket that is
// full at us. A debt starts from now if the bucket is full, which restarts
// it, and is recorded in the give-back stacks like an admission. A sliding
// window's give-back comes off the sub-window the call was counted in
// unless it rolled out of every window, never below zero; its debt is
// counted in the current sub-window.
func (b *Budget) Settle(us int64, id string, charged, limit, bslots int64, deltas []Delta) int {
	now := us / 1000
	score, ok := b.leases[id]
	expiry := score
	if !ok || score >= pending {
		if limit > 0 {
			b.dequeue(id)
		}
		if !ok {
			return 0
		}
		expiry = score - pending
	}
	live := expiry > now
	if live {
		delete(b.leases, id)
	}
	freed := limit > 0 && score < pending
	if !live || len(deltas) == 0 {
		if freed {
			b.give(now, us, limit, bslots, "", 0)
		}
		if !live {
			return 2
		}
		return 1
	}
	if freed {
		defer b.give(now, us, limit, bslots, "", 0)
	}
	var rest []Delta
	for _, d := range deltas {
		g := sub(d.Field)
		if g == 0 {
			rest = append(rest, d)
			continue
		}
		cur := now * 1000 / g
		j := d.At
		if d.Us > 0 {
			j = cur
		}
		b.slide(d.Field).add(cur, j, d.Us)
	}
	if len(rest) == 0 {
		return 1
	}
	if rest[0].Us < 0 {
		for _, d := range rest {
			b.giveBack(d.Field, us, charged, -d.Us)
		}
		return 1
	}
	// A debt is a charge event whose turn is now.
	for _, d := range rest {
		tat := b.from(d.Field, us)
		b.push(d.Field, us, tat-us)
		bk := b.bucket(d.Field)
		bk.tat, bk.stored = tat+d.Us, true
	}
	return 1
}
