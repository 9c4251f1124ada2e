package concurrency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeListener stands in for a subscription: it hands the test its
// callbacks, and reports when it stops.
type fakeListener struct {
	started chan listenerCalls
}

type listenerCalls struct {
	ready   func()
	deliver func(string)
	stopped <-chan struct{}
}

func newFake() *fakeListener { return &fakeListener{started: make(chan listenerCalls, 4)} }

// check says every waiter whose id starts with "g" holds a grant, and
// fails for "err".
func (f *fakeListener) check(_ context.Context, ids []string) ([]string, error) {
	var out []string
	for _, id := range ids {
		if id == "err" {
			return nil, errors.New("unreachable")
		}
		if strings.HasPrefix(id, "g") {
			out = append(out, id)
		}
	}
	return out, nil
}

func (f *fakeListener) listen(ctx context.Context, ready func(), deliver func(string)) {
	f.started <- listenerCalls{ready, deliver, ctx.Done()}
	<-ctx.Done()
}

func (f *fakeListener) next(t *testing.T) listenerCalls {
	t.Helper()
	select {
	case c := <-f.started:
		return c
	case <-time.After(2 * time.Second):
		t.Fatal("no listener started")
	}
	return listenerCalls{}
}

func woken(ch <-chan string) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestGrantsWakeTheWaiterPublished(t *testing.T) {
	f := newFake()
	g := NewGrants(f.listen, f.check, time.Hour)
	a, leaveA := g.Wait("a")
	defer leaveA()
	ga, leaveGA := g.Wait("ga")
	defer leaveGA()
	l := f.next(t)
	if g.Ready() {
		t.Error("Ready() = true before the subscription was confirmed")
	}
	l.ready() // wakes ga, granted a slot before anyone listened
	if !g.Ready() {
		t.Error("Ready() = false once the subscription was confirmed")
	}
	if !woken(ga) || woken(a) {
		t.Fatalf("ready: ga woken %v, a woken %v; want only ga, which holds a grant", woken(ga), woken(a))
	}
	e, leaveE := g.Wait("err")
	defer leaveE()
	l.ready() // a reconnection, and the budget cannot be asked: wake all
	if !woken(a) || !woken(e) {
		t.Fatal("ready with a failed check did not wake every waiter")
	}
	b, leaveB := g.Wait("b")
	defer leaveB()
	c, leaveC := g.Wait("c")
	defer leaveC()
	l.deliver("x c")
	if !woken(c) || woken(b) {
		t.Errorf("deliver(\"x c\"): c woken %v, b woken %v; want only c", woken(c), woken(b))
	}
	// Each waiter gets its own outcome, the part after its id.
	x, leaveX := g.Wait("x2")
	defer leaveX()
	l.deliver("y:2:7:8 x2:1:5:6")
	if got := <-x; got != "1:5:6" {
		t.Errorf("x2's outcome = %q; want 1:5:6", got)
	}
	// An outcome published a moment before its waiter registers still
	// reaches it.
	l.deliver("d:1:9:10")
	if d, leave := g.Wait("d"); !woken(d) {
		t.Error("a waiter whose outcome came first was not woken")
	} else {
		if got := <-d; got != "" {
			t.Errorf("second receive = %q; want the closed channel's empty string", got)
		}
		leave()
	}
	if d, leave := g.Wait("y"); <-d != "2:7:8" {
		t.Error("y's outcome, published before it registered, was lost")
	} else {
		leave()
	}
	if e, leave := g.Wait("d"); woken(e) {
		t.Error("a grant woke its waiter twice")
	} else {
		leave()
	}
}

func TestGrantsListenOnlyWhileWaited(t *testing.T) {
	f := newFake()
	g := NewGrants(f.listen, f.check, 20*time.Millisecond)
	_, leave := g.Wait("a")
	l := f.next(t)
	_, leave2 := g.Wait("b")
	leave()
	time.Sleep(50 * time.Millisecond)
	if !g.Listening() {
		t.Fatal("stopped listening while b waits")
	}
	leave2()
	select {
	case <-l.stopped:
	case <-time.After(2 * time.Second):
		t.Fatal("still listening long after the last waiter left")
	}
	if g.Listening() {
		t.Error("Listening() = true after the linger")
	}
	// A stale listener's messages are ignored; a new waiter starts another.
	w, leave3 := g.Wait("c")
	defer leave3()
	l.deliver("c")
	if woken(w) {
		t.Error("a stopped listener woke a waiter")
	}
	l2 := f.next(t)
	l2.deliver("c")
	if !woken(w) {
		t.Error("the new listener did not wake its waiter")
	}
}

func TestGrantsConcurrent(t *testing.T) {
	f := newFake()
	g := NewGrants(f.listen, f.check, time.Hour)
	var woke atomic.Int64
	var wg sync.WaitGroup
	var calls listenerCalls
	// The waiters wait until woken or told to stop, not on a timer of
	// their own: on a loaded machine a delivery may come long after a
	// waiter registered.
	stop := make(chan struct{})
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, leave := g.Wait(fmt.Sprint(i))
			defer leave()
			select {
			case <-ch:
				woke.Add(1)
			case <-stop:
			}
		}()
	}
	calls = f.next(t)
	for i := range 60 {
		calls.deliver(fmt.Sprint(i))
	}
	// Every one of the 60 is woken, at its delivery or, registered after
	// it, at once; the other 40 never (a wrong wake-up shows as more than
	// 60 in the 50 ms after the 60th).
	for deadline := time.Now().Add(10 * time.Second); woke.Load() < 60 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if got := woke.Load(); got != 60 {
		t.Errorf("woken = %d; want 60 (one per grant)", got)
	}
}
