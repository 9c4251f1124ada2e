package lua

import (
	"errors"
	"fmt"
)

// ErrReply reports a script reply of an unexpected shape: a script from
// another version of the library, or something between the client and Redis.
// Replies are checked, never trusted, so a changed reply is an error and not
// a panic.
var ErrReply = errors.New("lua: unexpected script reply")

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
