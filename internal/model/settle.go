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
// it sends, each bucket's of its own sign. It returns 1 if the lease ended now, 0 if id
// was not in the lease set, and 2 if its expiry is not after now: then the
// lease stays in the set and its reservation stays charged.
//
// An id that holds no slot (a waiter giving up, a pending lease) leaves
// the slot queue with its request; a slot a lease held goes to the
// queue's head (see give), after the corrections: a give-back may let it
// fit. So do the slots free when a waiter left: one may have been kept
// for it.
//
// A give-back (negative) moves its stored TAT back by what the charges since
// charged leave room for (see giveBack), and never for a bucket that is
// full at us. A debt starts from now if the bucket is full, which restarts
// it, and is recorded in the give-back stacks like an admission. A sliding
// window's give-back comes off the sub-window the call was counted in
// unless it rolled out of every window, never below zero; its debt is
// counted in the current sub-window.
func (b *Budget) Settle(us int64, id string, charged, limit, bslots int64, deltas []Delta) int {
	return b.SettleTenant(us, id, "", charged, limit, bslots, deltas)
}

// SettleTenant is Settle for a lease charged to tenant key ("": none): the
// corrections to fields marked '@' or '%' go to the tenant's hash, after
// the budget's, and are applied there alike; a share ('%') keeps no
// give-back stack, so a give-back moves it back by the whole amount (never
// before now), and a debt sent with its allowance leaves it at most twice
// that past now (see shared). Without a tenant, those corrections are
// ignored.
func (b *Budget) SettleTenant(us int64, id, key string, charged, limit, bslots int64, deltas []Delta) int {
	now := us / 1000
	score, ok := b.leases[id]
	expiry := score
	left := false // a waiter left the queue: those after it may get a slot
	if !ok || score >= pending {
		if limit > 0 {
			left = b.dequeue(id)
		}
		if !ok {
			if left {
				b.give(now, us, limit, bslots, "", 0)
			}
			return 0
		}
		expiry = score - pending
	}
	live := expiry > now
	if live {
		delete(b.leases, id)
	}
	freed := left || limit > 0 && score < pending
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
	// The budget's corrections, then the tenant's, each in its hash.
	for pass := range 2 {
		var mine []Delta
		for _, d := range deltas {
			if tenantField(d.Field) == (pass == 1) {
				mine = append(mine, d)
			}
		}
		h := &b.hash
		if pass == 1 {
			if key == "" {
				break
			}
			h = b.tenant(key)
		}
		b.correct(h, pass == 1, us, charged, mine)
	}
	return 1
}

// correct applies one hash's corrections, as settle.lua does in one pass:
// the sliding windows' first, then the buckets', each by its own sign (a
// give-back for one bucket and a debt for another may come together).
// tenant says h is a tenant's hash, whose expiry the model keeps.
func (b *Budget) correct(h *hash, tenant bool, us, charged int64, deltas []Delta) {
	now := us / 1000
	var rest []Delta
	ms := 0.0
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
			ms = max(ms, float64((cur+parts+1)*g)/1000)
		}
		h.slide(d.Field).add(cur, j, d.Us)
		if !tenant {
			b.written = true
		}
	}
	if tenant && len(rest) < len(deltas) {
		// A tenant's hash gets its TTL back whenever settle writes a
		// window to it: it may have expired while the lease lived.
		h.tcover(now, max(ms, float64(now)))
	}
	if len(rest) == 0 {
		return
	}
	ms = 0
	debt := false
	for _, d := range rest {
		if d.Us < 0 {
			h.giveBack(d.Field, us, charged, -d.Us)
			continue
		}
		if d.Us == 0 {
			continue // changes nothing (the callers never send one)
		}
		// A debt is a charge event whose turn is now (a share keeps no
		// record).
		debt = true
		tat := h.from(d.Field, us)
		if !isShare(d.Field) {
			h.push(d.Field, us, tat-us)
		}
		bk := h.bucket(d.Field)
		bk.tat, bk.stored = tat+d.Us, true
		if d.Allow > 0 {
			bk.tat = shared(tat, d.Us, us, d.Allow) // a share's, sent with its allowance
		}
		ms = max(ms, float64(bk.tat)/1000)
	}
	if !debt {
		return // a give-back never lengthens the keys' life
	}
	if tenant {
		h.tcover(now, max(ms, float64(now)))
	} else {
		b.written = true
	}
}
