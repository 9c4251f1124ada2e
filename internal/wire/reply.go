package wire

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrReply reports a script reply of an unexpected shape: a script from
// another version of the library, or something between the client and Redis.
// Replies are checked, never trusted, so a changed reply is an error and not
// a panic.
var ErrReply = errors.New("llmpacer: unexpected script reply")

// Int64s checks that v, a script's reply, is an array of at least n
// integers, and returns them.
func Int64s(v any, n int) ([]int64, error) {
	a, ok := v.([]any)
	if !ok || len(a) < n {
		return nil, fmt.Errorf("%w: %v", ErrReply, v)
	}
	out := make([]int64, len(a))
	for i, x := range a {
		if out[i], ok = x.(int64); !ok {
			return nil, fmt.Errorf("%w: %v", ErrReply, v)
		}
	}
	return out, nil
}

// Unmark returns a field without the mark a sliding window's carries
// (see NewSliding): the limit's name.
func Unmark(field string) string {
	if rest, ok := strings.CutPrefix(field, "@~"); ok {
		return "@" + Unmark("~"+rest)
	}
	if strings.HasPrefix(field, "~") {
		if i := strings.IndexByte(field, ':'); i > 0 {
			return field[i+1:]
		}
	}
	return field
}

// TurnMs returns an admission's turn in ms on the Redis clock, as
// acquire.lua counts it (its now in ms plus the wait), or 0 for a reply
// that does not give it exactly (code Already: admitted before).
func (r AcquireReply) TurnMs() int64 {
	if r.Code != Admitted {
		return 0
	}
	return r.NowUs/1000 + r.Wait.Milliseconds()
}

// Codes of acquire.lua's reply.
const (
	TooLarge = -1 // can never fit: a charge exceeds its allowance
	Denied   = 0  // not admitted; retry after Wait
	Admitted = 1  // admitted; the turn comes after Wait
	Already  = 2  // this id was admitted before; nothing charged again
	Stale    = 3  // the caller runs another definition; Ticket is the stored version
)

// AcquireReply is acquire.lua's answer.
type AcquireReply struct {
	Code   int64
	Wait   time.Duration
	Now    time.Time // the Redis clock when the script ran
	NowUs  int64     // the same, in µs
	Reason string    // the limit that set Wait
	Expiry time.Time // the lease's expiry, for Admitted and Already
	// Ticket, if not 0, is what the caller sends back: for Denied, it waits
	// in the slot queue; for Admitted and Already, its lease is pending,
	// holding no slot until it claims one at its turn.
	Ticket int64
	// Xp is the expiry the budget's keys had when the script read them (ms
	// on the Redis clock; 0: there was no state), or Lost: this call found
	// the state lost and restarted its buckets empty (see acquire.lua).
	Xp int64
}

// Lost is AcquireReply.Xp for a call that found the budget's state lost.
const Lost = -1

// DecodeAcquire checks the reply's shape instead of trusting it: a script
// from another version of the library, or a proxy in between, must give an
// error, never a panic.
func DecodeAcquire(v any) (AcquireReply, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 7 {
		return AcquireReply{}, fmt.Errorf("%w: %v", ErrReply, v)
	}
	code, ok1 := a[0].(int64)
	wait, ok2 := a[1].(int64)
	now, ok3 := a[2].(int64)
	reason, ok4 := a[3].(string)
	expiry, ok5 := a[4].(int64)
	ticket, ok6 := a[5].(int64)
	xp, ok7 := a[6].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || code < TooLarge || code > Stale || wait < 0 || ticket < 0 || xp < Lost {
		return AcquireReply{}, fmt.Errorf("%w: %v", ErrReply, v)
	}
	return AcquireReply{
		Code: code, Wait: time.Duration(wait) * time.Millisecond,
		Now: time.UnixMicro(now), NowUs: now, Reason: Unmark(reason), Expiry: time.UnixMilli(expiry), Ticket: ticket, Xp: xp,
	}, nil
}

// The values of one call's reply in a batch's flat reply (see
// SplitReplies): acquire.lua's seven, settle.lua's two.
const (
	AcquireReplyLen = 7
	SettleReplyLen  = 2
)

// SplitReplies returns the replies of a batch's calls: acquires.lua and
// settles.lua return the calls' replies in one flat array, width values
// each, call after call (one table, not k, for Redis to convert). It
// checks that v holds exactly that.
func SplitReplies(v any, calls, width int) ([]any, error) {
	a, ok := v.([]any)
	if !ok || len(a) != calls*width {
		return nil, fmt.Errorf("%w: %d values for %d calls of %d: %v", ErrReply, len(a), calls, width, v)
	}
	out := make([]any, calls)
	for i := range out {
		out[i] = a[i*width : (i+1)*width : (i+1)*width]
	}
	return out, nil
}
