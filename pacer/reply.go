package pacer

import (
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/lua"
)

// Codes of acquire.lua's reply.
const (
	codeTooLarge = -1
	codeDenied   = 0
	codeAdmitted = 1
	codeAlready  = 2
)

// reply is acquire.lua's answer.
type reply struct {
	code   int64
	wait   time.Duration
	now    time.Time // Redis clock
	reason string
}

// decodeAcquire checks the reply's shape instead of trusting it: a script
// from another version of the library, or a proxy in between, must give an
// error, never a panic.
func decodeAcquire(v any) (reply, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return reply{}, fmt.Errorf("%w: %v", lua.ErrReply, v)
	}
	code, ok1 := a[0].(int64)
	wait, ok2 := a[1].(int64)
	now, ok3 := a[2].(int64)
	reason, ok4 := a[3].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 || code < codeTooLarge || code > codeAlready || wait < 0 {
		return reply{}, fmt.Errorf("%w: %v", lua.ErrReply, v)
	}
	return reply{code: code, wait: time.Duration(wait) * time.Millisecond, now: time.UnixMicro(now), reason: reason}, nil
}
