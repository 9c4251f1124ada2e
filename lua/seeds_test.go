package lua_test

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// seedStep encodes one step: ms is the clock step (0 to 70,000; a negative
// one steps back up to 1,999 ms).
func seedStep(op byte, ms int64, a byte, b, c uint16) []byte {
	var clock uint16
	switch {
	case ms < 0:
		op |= 0xf0
		clock = uint16(-ms)
	case ms == 0:
	case ms < 1000:
		clock = 2<<13 | uint16(ms)
	case ms <= 0x1fff:
		clock = 5<<13 | uint16(ms)
	default:
		clock = 7<<13 | uint16((ms*0x1fff+69_999)/70_000)
	}
	s := []byte{op, 0, 0, a, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(s[1:], clock)
	binary.BigEndian.PutUint16(s[4:], b)
	binary.BigEndian.PutUint16(s[6:], c)
	return s
}

// Acquire's a byte: priority, TTL and max-wait selectors.
const (
	interactive = 1 // bits 0-1; 0 is batch
	ttl1ms      = 0 << 2
	ttl1s       = 1 << 2
	ttl5s       = 2 << 2
	ttl60s      = 4 << 2
	waitNone    = 0 << 5
	waitC       = 3 << 5 // max wait = c ms
	waitC10     = 6 << 5 // max wait = 10·c ms
	// settle's a byte: mode in bits 0-1, bit 2 keeps the current expiry.
	modeSettle  = 0 | 1<<2
	modeRelease = 1 | 1<<2
	modeCancel  = 2 | 1<<2
	// settle's b: with bit 15 set, it picks among every open lease.
	// settle's c: how the tokens used compare with those reserved, in
	// bits 0-2; the rest, shifted left 3, is v (see runner.settle).
	usedFewer   = 2 // v mod (reserved+1)
	usedFarMore = 7 // reserved + 50·(v mod 256)
)

// seedHeader encodes a header: the start offset (ms after base), the
// capacity, refill and window selectors of each bucket (see decodeBucket),
// the concurrency and the floor selectors.
func seedHeader(start uint16, rpm, tpm, rpd, tpd [3]byte, conc, floor byte) []byte {
	h := []byte{byte(start >> 8), byte(start)}
	for _, b := range [][3]byte{rpm, tpm, rpd, tpd} {
		h = append(h, b[:]...)
	}
	return append(h, conc, floor)
}

// Rate selectors for seedHeader.
var (
	off     = [3]byte{0, 0, 0}  // not configured
	rpm2    = [3]byte{1, 0, 0}  // 2 per minute
	tpm1000 = [3]byte{19, 0, 0} // 1000 per minute
)

// A rate selector's refill byte: the unit (bits 2-4) and sliding (bit 7);
// its window byte. See decodeRate.
const (
	uReq, uTok, uIn, uOut, uSpend = 1 << 2, 2 << 2, 3 << 2, 4 << 2, 5 << 2
	sliding                       = 0x80
	w60s, w1s, w10s, w1d, w1h     = 0, 1, 2, 3, 4
)

// A step's first byte: op, and in the high nibble the call's model (k mod
// 3: "", mini, big) and its input's share (k / 3, in quarters; 0: not
// split).
func withK(op, k byte) byte { return op | k<<4 }

// The header's floor byte: the batch floor selector, and the weights and
// prices sets (see decode).
func floorByte(floor, weights, prices byte) byte { return floor | weights<<2 | prices<<4 }

// The floor byte's extension bits (see decode): versions sent; tenants
// too; tenants without versions.
const (
	extVersioned   = 1 << 6
	extTenants     = 2 << 6
	extTenantsOnly = 3 << 6
)

// tenantBlock encodes the tenants' 8 bytes (see decodeTenants): n tenants
// (1 to 3), the share selector, each tenant's two own rates.
func tenantBlock(n, share byte, a, b [3]byte) []byte {
	return slices.Concat([]byte{(n-1)&3 | share<<2}, a[:], b[:], []byte{0})
}

func fuzzSeeds() [][]byte {
	seq, header := slices.Concat[[]byte], seedHeader
	return [][]byte{
		// Two tenants with a quarter share each of 1000 tokens a minute
		// (batch floor 20%), 2000 of their own a minute. Tenant 1 takes
		// its share (two large calls: a share has room for 8 of a call
		// however small it is), then goes over it with a small one:
		// admitted now while the budget has room beyond the floor, then
		// held back and spaced along its own qb, never reserving a later
		// turn; tenant 2, within its share, reserves one. Cancels and settles give back to the
		// shares (whole) and the tenant's own rate, a debt moves a share
		// forward; a refusal by the tenant's own rate charges nothing.
		seq(header(0, off, tpm1000, off, off, 0, floorByte(0, 0, 0)|extTenants),
			tenantBlock(2, 2, [3]byte{39, uTok, w60s}, off),
			seedStep(1, 0, interactive|ttl60s|waitNone, 200, 0),
			seedStep(1, 0, interactive|ttl60s|waitNone, 200, 0),
			seedStep(1, 0, interactive|ttl60s|waitNone, 10, 0),
			seedStep(1, 0, interactive|ttl60s|waitC, 500, 30_000),
			seedStep(1, 0, interactive|ttl60s|waitC, 100, 30_000),
			seedStep(2, 0, interactive|ttl60s|waitC, 200, 30_000),
			seedStep(2, 0, interactive|ttl60s|waitC, 200, 30_000),
			seedStep(2, 0, interactive|ttl60s|waitNone, 40, 0),
			seedStep(opSettle, 10, modeCancel, 0x8000|0, 0),
			seedStep(opSettle, 0, modeSettle, 0x8000|0, usedFewer|50<<3),
			seedStep(opSettle, 0, modeSettle, 0x8000|0, usedFarMore|3<<3),
			seedStep(14, 20_000, 0, 0, 0),
			seedStep(1, 0, interactive|ttl60s|waitC, 300, 30_000),
			seedStep(1, 0, ttl60s|waitC, 300, 30_000),
			seedStep(3, 0, interactive|ttl60s|waitC, 300, 30_000),
			seedStep(1, 0, interactive|ttl60s|waitNone, 1000, 0),
			seedStep(opSettle, 10, modeCancel, 0x8000|0, 0)),
		// Batches of acquires and of settles, three tenants of a tenth each
		// with their own tokens and requests a minute (none sliding):
		// their calls take the batches' fast paths.
		seq(header(12, [3]byte{9, 0, 0}, [3]byte{99, 0, 0}, off, off, 0, floorByte(1, 0, 0)|extTenants),
			tenantBlock(3, 1, [3]byte{19, uTok, w60s}, [3]byte{9, uReq, w60s}),
			seedStep(opClock, 0, 0x40|2, 50, 0),
			seedStep(opClock, 10, 0x40|5, 80, 0),
			seedStep(withK(opSettle, 12), 0, modeSettle, 0x8000, usedFewer|50<<3),
			seedStep(opClock, 500, 0x40|7, 30, 1),
			seedStep(withK(opSettle, 13), 0, modeCancel, 0x8000|1, 0),
			seedStep(opClock, 2000, 0x40|3, 20, 0),
			seedStep(withK(opSettle, 15), 0, modeSettle, 0x8000|2, usedFewer|20<<3)),
		// Definitions: one stored while the callers run none; a call is
		// told it is stale, and the next runs the new one; an older
		// version is not stored; a read; a tenant's call told too.
		seq(header(0, off, tpm1000, off, off, 0, floorByte(0, 0, 0)|extTenants),
			tenantBlock(1, 0, [3]byte{39, uTok, w60s}, off),
			seedStep(opClock, 0, 0x80|2, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 10, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 10, 0),
			seedStep(opClock, 0, 0x80|1, 0, 0),
			seedStep(1, 0, interactive|ttl60s|waitNone, 10, 0),
			seedStep(1, 0, interactive|ttl60s|waitNone, 10, 0),
			seedStep(opClock, 0, 0x80|2, 0, 0),
			seedStep(opClock, 0, 0x80, 0, 0),
			seedStep(opClock, 0, 0x80|1|4, 0, 0),
			seedStep(1, 0, interactive|ttl60s|waitNone, 10, 0)),
		// A sliding window of 1000 tokens a second: a call takes 800
		// now, the next reserves a later turn (the first sub-window whose
		// window has room, told exactly when), a third cannot wait. Both
		// are canceled, their sub-windows back to zero: a call then fits
		// now, and is counted.
		seq(header(0, off, [3]byte{19, sliding | uTok, w1s}, [3]byte{9, 0, 0}, off, 0, 1),
			seedStep(0, 0, interactive|ttl60s|waitNone, 800, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 500, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitNone, 300, 0),
			seedStep(opSettle, 10, modeCancel, 0x8000, 0),
			seedStep(opSettle, 0, modeCancel, 0x8000, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 100, 60_000),
			bytes.Repeat(seedStep(0, 0, interactive|ttl60s|waitC, 300, 60_000), 5)),
		// A debt counted now, before a turn reserved ahead: the window's
		// only count is a later turn's; the debt goes in the current
		// sub-window, before it, and holds the next call back.
		seq(header(0, off, [3]byte{19, sliding | uTok, w1s}, off, off, 0, 1),
			seedStep(0, 0, interactive|ttl60s|waitNone, 800, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 500, 60_000),
			seedStep(opSettle, 10, modeCancel, 0x8000, 0),
			seedStep(opSettle, 0, modeSettle, 0x8000, 4|300<<3),
			seedStep(0, 0, interactive|ttl60s|waitNone, 600, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 600, 60_000),
			seedStep(14, 3_000, 0, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 600, 0)),
		// A turn held far ahead by another rate: 500 tokens an hour
		// (refilling 1000) beside 1000 tokens in any second, strictly. The
		// third call waits 6 minutes for the hour: in the second's counts
		// it sits 23,040 sub-windows after the others, one '-<n>' token
		// between (zeros there once made the field grow with the wait); a
		// fourth would wait too long. The third's cancel gives back off
		// that far sub-window, and a call fits now.
		seq(header(0, off, [3]byte{19, sliding | uTok, w1s}, [3]byte{9, uTok | 3, w1h}, off, 0, 1),
			seedStep(0, 0, interactive|ttl60s|waitNone, 200, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 200, 0),
			seedStep(0, 0, interactive|ttl60s|waitC10, 200, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitC10, 900, 60_000),
			seedStep(opSettle, 10, modeCancel, 0x8000|2, 0),
			seedStep(0, 0, interactive|ttl60s|waitC10, 100, 60_000),
			seedStep(0, 1_000, interactive|ttl60s|waitNone, 50, 0)),
		// Several rates on one unit (1000 tokens a minute, 2000 an hour),
		// a spend cap of 10,000 a 10 s sliding window, weights (big 10,
		// mini 0.5) and prices (1, 0.5 and 4 a token): a weighed call, a
		// split one settled by its usage, a later turn behind the
		// minute, the hour holding calls back once the minute refills.
		seq(header(0, [3]byte{9, 0, 0}, tpm1000, [3]byte{39, uTok, w1h}, [3]byte{9, sliding | uSpend, w10s}, 0, floorByte(0, 1, 0)),
			seedStep(withK(0, 2), 0, interactive|ttl60s|waitNone, 50, 0),
			seedStep(withK(0, 1+3*2), 0, interactive|ttl60s|waitNone, 400, 0),
			seedStep(opSettle, 0, modeSettle|0x20, 0x8000|1, usedFewer|100<<3),
			seedStep(0, 0, interactive|ttl60s|waitC, 900, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitNone, 900, 0),
			seedStep(14, 61_000, 0, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 900, 60_000),
			seedStep(14, 61_000, 0, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 900, 60_000),
			seedStep(opSettle, 0, modeSettle, 0, usedFarMore|10<<3)),
		// Input and output apart (1000 each a minute) and a sliding spend
		// cap priced per model (big: 5, 2.5 and 20 a token): a call too
		// dear for the cap ever; two split calls whose spend reserves a
		// later turn; the later one canceled, its spend given back off its
		// sub-window; the first settled with less input and more output,
		// which keeps the debts and drops the give-backs; a debt of spend.
		seq(header(0, off, [3]byte{19, uIn, w60s}, [3]byte{19, uOut, w60s}, [3]byte{9, sliding | uSpend, w10s}, 0, floorByte(0, 0, 1)),
			seedStep(withK(0, 2), 0, interactive|ttl60s|waitNone, 1000, 0),
			seedStep(withK(0, 2+3*1), 0, interactive|ttl60s|waitNone, 400, 0),
			seedStep(withK(0, 2+3*2), 0, interactive|ttl60s|waitC, 400, 60_000),
			seedStep(opSettle, 0, modeCancel, 0x8000|1, 0),
			seedStep(opSettle, 0, modeSettle|0x20, 0x8000, 4|200<<3),
			seedStep(withK(0, 2+3*3), 10, interactive|ttl60s|waitC, 100, 60_000),
			seedStep(opSettle, 0, 0|2<<2|0x20, 0x8000, 6|100<<3),
			seedStep(withK(0, 0), 0, ttl60s|waitC, 200, 60_000),
			seedStep(withK(0, 1+3*4), 0, ttl60s|waitC, 200, 60_000)),
		// Stops: a quota stop with a probe every 100 ms lets one call
		// through per interval; an operator's stop over it lets none, and
		// a quota resume leaves it; a pending lease's claim is refused
		// while stopped and goes through after the resume. Then a
		// provider's headers lower the token bucket without a pause.
		seq(header(0, off, tpm1000, off, off, 1, 0),
			seedStep(opPause, 0, 0x80, 1, 5000),
			seedStep(0, 0, interactive|ttl60s|waitNone, 10, 0),
			seedStep(0, 100, interactive|ttl60s|waitNone, 10, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 10, 0),
			seedStep(opPause, 0, 0x80|0x40, 0, 2000),
			seedStep(0, 200, interactive|ttl60s|waitNone, 10, 0),
			seedStep(opPause, 0, 0x80|0x20, 0, 0),
			seedStep(opPause, 0, 0x80|0x40|0x20, 0, 0),
			seedStep(opPause, 0, 0x80|0x20, 0, 0),
			seedStep(opSettle, 0, modeSettle, 0x8000, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 900, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 300, 60_000),
			seedStep(opPause, 10_000, 0x80, 0, 8_000),
			seedStep(14, 3_000, 0, 0, 0),
			seedStep(opClaim, 0, 0, 0, 0),
			seedStep(opPause, 0, 0x80|0x20, 0, 0),
			seedStep(opSettle, 0, modeSettle, 0x8000, 0),
			seedStep(opClaim, 0, 0, 0, 0),
			seedStep(opPause, 0, 2|4, 100, 0)),
		// Reservations: a turn ahead, a queue behind it, a refund, a retry,
		// a keepalive, an overrun capped at one bucket of debt.
		seq(header(1, rpm2, tpm1000, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 600, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 600, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitNone, 100, 0),
			seedStep(opSettle, 30_000, modeSettle, 0, usedFewer|100<<3),
			seedStep(opRetry, 0, 0, 1, 0),
			seedStep(opKeepAlive, 10, 0, 0, 60_000),
			seedStep(opSettle, 70_000, modeSettle, 0, usedFarMore|200<<3),
			seedStep(0, 5, interactive|ttl5s|waitC10, 900, 6_000),
			seedStep(14, 70_000, 0, 0, 0)),
		// Concurrency 2: the third caller queues along qc, leases expire,
		// a retried id of an expired lease, hold time measured.
		seq(header(3, [3]byte{11, 0, 0}, off, off, [3]byte{3, 0, 0}, 1, 0),
			seedStep(0, 0, interactive|ttl5s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl5s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl5s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl5s|waitC, 10, 1000),
			seedStep(opSettle, 700, modeRelease, 0, 0),
			seedStep(0, 1, interactive|ttl5s|waitC, 10, 1000),
			seedStep(14, 6_000, 0, 0, 0),
			seedStep(opRetry, 0, 0, 1, 0),
			seedStep(opSettle, 0, modeSettle|0x80, 1, 0),
			seedStep(0, 3, interactive|ttl1ms|waitNone, 10, 0)),
		// Batch floor 50%: batch calls stop at half the bucket and space
		// along qb; an interactive call still gets in.
		seq(header(5, off, tpm1000, off, off, 0, 2),
			seedStep(0, 0, ttl5s|waitC, 333, 30_000),
			seedStep(0, 0, ttl5s|waitC, 333, 30_000),
			seedStep(0, 0, ttl5s|waitC, 333, 29_940), // its turn on the bound
			seedStep(0, 0, interactive|ttl5s|waitNone, 333, 0),
			seedStep(0, 200, ttl5s|waitC, 333, 30_000),
			seedStep(0, 0, ttl5s|waitC, 333, 30_000),
			seedStep(opSettle, 10, modeCancel, 0, 0),
			seedStep(0, 7_000, ttl5s|waitC, 333, 30_000)),
		// Batch waits that are not whole ms: qb is stored rounded up.
		seq(header(11, off, [3]byte{6, 2, 0}, off, off, 0, 2),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 0, ttl5s|waitC10, 50, 60_000),
			seedStep(0, 3, ttl5s|waitC10, 50, 60_000)),
		// Calls that end at once (hold 0): concurrency waiters are spaced
		// at least 1 ms apart.
		seq(header(13, off, tpm1000, off, off, 5, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(opSettle, 0, modeSettle, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000)),
		// 104 leases expire together; a minute later one admission reaps
		// 100 of them, in the sorted set's order (expiry, then id as bytes:
		// a0, a1, a10, a100, ...), so a ms later a retry of a0 is admitted
		// anew and one of a99 is still answered 2.
		seq(header(0, off, tpm1000, off, off, 0, 0),
			seedStep(0, 1, interactive|ttl1ms|waitNone, 0, 0),
			bytes.Repeat(seedStep(0, 0, interactive|ttl1ms|waitNone, 0, 0), 103),
			seedStep(14, 60_000, 0, 0, 0),
			seedStep(0, 15, interactive|ttl1ms|waitNone, 0, 0),
			seedStep(opRetry, 1, 0, 0, 0),
			seedStep(opRetry, 0, 0, 99, 0),
			seedStep(opRetry, 0, 0, 96, 0)),
		// Boundaries: a keepalive and a settle on the very ms their lease
		// expires, a slot free on the ms its lease expires.
		seq(header(9, off, tpm1000, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl1s|waitNone, 10, 0),
			seedStep(opKeepAlive, 1_000, 0, 0, 500),
			seedStep(0, 0, interactive|ttl1s|waitNone, 10, 0),
			seedStep(0, 0, interactive|ttl1s|waitNone, 10, 0),
			seedStep(opSettle, 1_000, modeSettle|0xc0, 1, 0),
			seedStep(0, 0, interactive|ttl1s|waitNone, 10, 0)),
		// A give-back that reaches Redis late: RPM 60 with a burst of 5 (1
		// a second); a call at 0 whose cancel lands at 1.3 s, after another
		// caller took the burst refilled by 1.15 s. It must give nothing
		// back, or a sixth call fits in 150 ms (see checkBound).
		seq(header(0, [3]byte{4, 3, 2}, off, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0),
			seedStep(0, 1150, interactive|ttl60s|waitNone, 0, 0),
			bytes.Repeat(seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0), 4),
			seedStep(opSettle, 150, modeCancel, 0x8000, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0)),
		// Issue 8's first counterexample: a turn reserved behind the lease
		// that gives back. One request a second (charge 1 s, allowance
		// 1.000999 s): x now, f's turn 1 s ahead, x canceled, g reserves
		// too. Had the cancel moved the bucket back by x's whole charge,
		// g's turn would be f's: two calls at once in a bucket of one.
		seq(header(0, [3]byte{12, 0, 1}, off, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 0, 60_000),
			seedStep(opSettle, 0, modeCancel, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 0, 60_000)),
		// The second: the bucket would have been full after the charge.
		// RPM 60 with a burst of 10: x at 0, f at 0.5 s, x canceled, ten
		// more willing to wait. Only the half second the bucket had left
		// after x goes back, or eleven turns fall within half a second,
		// where 10.5 fit.
		seq(header(0, [3]byte{9, 0, 2}, off, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0),
			seedStep(0, 500, interactive|ttl60s|waitNone, 0, 0),
			seedStep(opSettle, 0, modeCancel, 0, 0),
			bytes.Repeat(seedStep(0, 0, interactive|ttl60s|waitC, 0, 60_000), 10)),
		// The give-back stacks: 70 calls in one ms, each finding the
		// bucket further from full, push 70 entries; past 64 the oldest
		// 17 merge. Refunds from a lease among the merged ones and from a
		// recent one; two seconds on, a call finds the bucket nearer full
		// and removes the entries above its headroom, several reads'
		// worth; cancels, one behind it.
		seq(header(3, off, [3]byte{199, 0, 0}, off, off, 0, 0),
			bytes.Repeat(seedStep(0, 0, interactive|ttl60s|waitNone, 10, 0), 70),
			seedStep(opSettle, 0, modeSettle, 0x8000|5, usedFewer|3<<3),
			seedStep(opSettle, 0, modeSettle, 0, usedFewer|3<<3),
			seedStep(0, 2000, interactive|ttl60s|waitNone, 10, 0),
			seedStep(opSettle, 0, modeCancel, 0x8000|40, 0),
			seedStep(opSettle, 0, modeCancel, 0x8000|0, 0),
			seedStep(opSettle, 0, modeCancel, 0, 0)),
		// A 429 lowers the token bucket while a lease is out; the lease's
		// cancel then gives back nothing below what the pause set.
		seq(header(6, rpm2, tpm1000, off, off, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 300, 0),
			seedStep(opPause, 10, 2, 100, 1000),
			seedStep(opSettle, 0, modeCancel, 0, 0),
			seedStep(0, 1500, interactive|ttl60s|waitC, 800, 60_000),
			seedStep(opPause, 10, 3, 900, 10),
			seedStep(opSettle, 0, modeCancel, 0, 0)),
		// Pauses, reaping on ms divisible by 16, a clock stepping back.
		seq(header(0, rpm2, tpm1000, [3]byte{7, 1, 2}, [3]byte{4, 3, 1}, 2, 3),
			seedStep(0, 0, interactive|ttl1ms|waitNone, 1, 0),
			seedStep(0, 16, interactive|ttl1ms|waitNone, 1, 0),
			seedStep(opRetry, 0, 0, 0, 0),
			seedStep(opPause, 1, 0, 0, 2000),
			seedStep(0, 5, interactive|ttl60s|waitC, 1, 60_000),
			seedStep(opPause, 0, 0, 0, 100),
			seedStep(0, 2_500, interactive|ttl60s|waitC, 1, 60_000),
			seedStep(0, -1_000, interactive|ttl60s|waitC, 1, 60_000),
			seedStep(opSettle, 0, modeSettle, 0, 3),
			seedStep(opKeepAlive, 0, 0x80, 0, 1)),
		// The slot queue, 2 slots: two callers queue; a slot freed admits
		// the first, which comes back and is told so; the second is
		// admitted by the next, a new arrival queues, waiters leave,
		// admitted or not; batch waiters queue behind interactive ones.
		seq(header(2, off, tpm1000, off, off, 1, 2),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 1000),
			seedStep(opSettle, 5, modeSettle, 0x8000, 0),
			seedStep(opClaim, 1, 0, 0, 0),
			seedStep(opSettle, 5, modeSettle, 0x8000, 0),
			seedStep(14, 1500, 0, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(opClaim, 0, 0, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 1000),
			seedStep(opLeave, 0, 0, 0, 0),
			seedStep(opSettle, 0, modeSettle, 0x8000, 0),
			seedStep(opLeave, 0, 0, 0, 0),
			seedStep(0, 1, ttl60s|waitC, 10, 1000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 1000),
			seedStep(0, 1, ttl60s|waitC, 10, 1000),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0),
			seedStep(opClaim+1, 1, 0, 0, 0),
			seedStep(opClaim+1, 1, 0, 0, 0),
			seedStep(opSettle, 1, modeRelease, 0x8000, 0),
			seedStep(opClaim, 1, 0, 0, 0)),
		// Calls waiting for tokens hold no slot (2 slots, 1000 tokens a
		// minute): two reserve later turns; one claims before its turn;
		// at their turns the first takes the free slot, the second queues
		// for it and claims it when the first settles; a pending lease
		// is canceled.
		// A slot freed admits the head waiter as acquire would: two hold
		// the slots, three queue; one ends with a debt, so the first
		// waiter's tokens no longer fit: it and those after it become
		// pending leases (a later turn, no slot); one claims before its
		// turn, another gives up (a cancel).
		seq(header(6, off, tpm1000, off, off, 1, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 100, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitC, 100, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 300, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 300, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(opSettle, 1, modeSettle, 0x8000, 14<<3|usedFarMore),
			seedStep(opClaim, 1, 0, 0, 0),
			seedStep(opLeave, 1, 0, 1, 0)),
		// A slot freed admits the head waiter outright; the waiter, having
		// missed the message, comes back with its ticket and is told it
		// was admitted; another, admitted, gives up (its lease is
		// canceled, and its slot goes to the next waiter).
		seq(header(8, off, tpm1000, off, off, 1, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0),
			seedStep(opClaim, 1, 0, 0, 0),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0),
			seedStep(opLeave, 1, 0, 0, 0),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0)),
		// Tenants' waiters, 2 slots: a tenant's waiter keeps a marker in
		// the queue; a slot freed is owed to it (told 0 once, never
		// again), and nobody behind it takes it: a new call queues; the
		// tenant comes back with its ticket and takes the slot; the next
		// slot goes to the budget's waiter behind it, the one after to
		// the second tenant's marker.
		seq(header(10, off, tpm1000, off, off, 1, floorByte(0, 0, 0)|extTenants),
			tenantBlock(2, 0, [3]byte{39, uTok, w60s}, off),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(1, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(2, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0),
			seedStep(opClaim, 1, 0, 0, 0),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0),
			seedStep(opClaim, 1, 0, 2, 0),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0),
			seedStep(opClaim, 1, 0, 1, 0),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0)),
		// Slots freed without a settle of theirs go to the waiters: a
		// lease expires (1 s TTL) while a waiter queues, and the next
		// keepalive of another lease admits it; a tenant's waiter, kept
		// a slot, gives up, and its leaving hands that slot on.
		seq(header(12, off, tpm1000, off, off, 1, floorByte(0, 0, 0)|extTenants),
			tenantBlock(1, 0, [3]byte{39, uTok, w60s}, off),
			seedStep(0, 0, interactive|ttl1s|waitC, 10, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(opKeepAlive, 1_001, 0, 0x8000|1, 30_000),
			seedStep(1, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 10, 60_000),
			seedStep(opSettle, 1, modeSettle, 0x8000|1, 0),
			seedStep(opLeave, 1, 0, 0, 0),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0)),
		// A tenant's waiter kept a slot comes back, but a debt now holds
		// its tokens back: it reserves a later turn and leaves the queue,
		// and the slot kept for it goes on to the waiter behind it (here
		// a later turn too).
		seq(header(14, off, tpm1000, off, off, 1, floorByte(0, 0, 0)|extTenants),
			tenantBlock(1, 0, [3]byte{39, uTok, w60s}, off),
			seedStep(0, 0, interactive|ttl60s|waitC, 100, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitC, 100, 60_000),
			seedStep(1, 1, interactive|ttl60s|waitC, 100, 60_000),
			seedStep(0, 1, interactive|ttl60s|waitC, 100, 60_000),
			seedStep(opSettle, 1, modeSettle, 0x8000, 30<<3|usedFarMore),
			seedStep(opClaim, 1, 0, 0, 0)),
		seq(header(4, off, tpm1000, off, off, 1, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 900, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 300, 60_000),
			seedStep(0, 0, interactive|ttl60s|waitC, 300, 60_000),
			seedStep(opClaim, 1, 0, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitNone, 0, 0),
			seedStep(14, 31_000, 0, 0, 0),
			seedStep(opClaim, 0, 0, 0, 0),
			seedStep(opClaim, 0, 0, 0, 0),
			seedStep(opRetry, 0, 0, 3, 0),
			seedStep(opSettle, 1, modeSettle, 0x8000, 0),
			seedStep(opClaim, 0, 0, 0, 0),
			seedStep(0, 0, interactive|ttl60s|waitC, 300, 60_000),
			seedStep(opSettle, 0, modeCancel, 0, 0),
			seedStep(opKeepAlive, 0, 0, 0, 1000)),
	}
}
