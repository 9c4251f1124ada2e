package model

// lost mirrors acquire.lua's lost state: a call that saw the budget's keys
// kept until c.Seen, still ahead, finds them missing. Each budget bucket
// then restarts empty, as the provider still counts it: a bucket's TAT a
// span (its Charge's Empty) from now, a sliding window holding its limit
// in the current sub-window. Tenants' fields restart as they are (Empty 0).
// It reports whether it restarted any.
//
// The model keeps no xp for the state hash: a state it has written is
// taken to keep its keys past any Seen a caller sends, and one it has not
// is missing. The script also restarts buckets missing from a state that
// exists but keeps its keys less long than Seen (written again after the
// loss by pause.lua or stop.lua); the model does not follow that case.
func (b *Budget) lost(us int64, c Call) bool {
	if c.Seen-us/1000 <= 1000 || b.written { // not in Seen's last second, as the script
		return false
	}
	found, now := false, us/1000
	for _, ch := range c.Charges {
		if ch.Empty == 0 {
			continue
		}
		if g := sub(ch.Field); g > 0 {
			cur := now * 1000 / g
			*b.slide(ch.Field) = window{head: cur, last: cur, total: ch.Empty, counts: map[int64]int64{cur: ch.Empty}}
		} else {
			k := b.bucket(ch.Field)
			k.tat, k.stored = us+ch.Empty, true
		}
		found = true
	}
	// The script keeps the keys until Seen at least: the state exists now.
	b.written = true
	return found
}
