package wire

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A batch's flat reply splits into one reply a call, and any other length
// is ErrReply: a reply cut short by a nil, or from a script of another
// version, must not hand a call another's values.
func TestSplitReplies(t *testing.T) {
	got, err := SplitReplies([]any{int64(1), int64(10), int64(0), int64(11)}, 2, SettleReplyLen)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{[]any{int64(1), int64(10)}, []any{int64(0), int64(11)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("split (-want +got):\n%s", d)
	}
	for _, v := range []any{[]any{int64(1), int64(10), int64(0)}, []any{int64(1)}, "OK", nil} {
		if _, err := SplitReplies(v, 2, SettleReplyLen); !errors.Is(err, ErrReply) {
			t.Errorf("SplitReplies(%v): %v, want ErrReply", v, err)
		}
	}
	// Appending to one call's reply must not reach the next call's.
	a := got[0].([]any)
	_ = append(a, "x")
	if got[1].([]any)[0] != int64(0) {
		t.Errorf("a reply's append reached the next: %v", got)
	}
}
