package pacerhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// A waiting room holds a request until the budget has room, within the
// latency budget; a request whose wait would be longer goes to the
// fallback at once, told how long the wait would have been.
func TestHandlerWaitingRoom(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		const room = 3 * time.Second
		var (
			mu        sync.Mutex
			fallbacks []pacerhttp.Refusal
		)
		fallback := func(w http.ResponseWriter, r *http.Request, why pacerhttp.Refusal) {
			mu.Lock()
			fallbacks = append(fallbacks, why)
			mu.Unlock()
			io.WriteString(w, "canned answer")
		}
		// 4 requests a second, 4 at once: 8 concurrent requests all get
		// in within about a second, well inside the room.
		_, srv := inbound(t, b, pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 4, Window: time.Second}}}, ok,
			budgetOnly, pacerhttp.WithWaitingRoom(room), pacerhttp.WithFallback(fallback))
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				began := time.Now()
				resp, body := get(t, ctx, srv.URL, 0, -1)
				if resp.StatusCode != http.StatusOK || body != "ok" {
					errs <- fmt.Sprintf("%d %s", resp.StatusCode, body)
				}
				if d := time.Since(began); d > room+time.Second {
					errs <- fmt.Sprintf("held %v; the room is %v", d, room)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		if len(fallbacks) != 0 {
			t.Errorf("fallback called %d times; every wait fit the room", len(fallbacks))
		}

		// One request a minute: the second request's wait (about a minute)
		// exceeds the room, and the fallback answers it without waiting.
		_, srv = inbound(t, b, pacer.Config{Limits: pacer.Limits{RPM: 1}}, ok,
			budgetOnly, pacerhttp.WithWaitingRoom(room), pacerhttp.WithFallback(fallback))
		if resp, body := get(t, ctx, srv.URL, 7, -1); resp.StatusCode != http.StatusOK {
			t.Fatalf("first = %d %s", resp.StatusCode, body)
		}
		began := time.Now()
		resp, body := get(t, ctx, srv.URL, 7, -1)
		if d := time.Since(began); d >= room {
			t.Errorf("fallback after %v; want it at once, not after the room's %v", d, room)
		}
		if resp.StatusCode != http.StatusOK || body != "canned answer" {
			t.Errorf("second = %d %q; want the fallback's answer", resp.StatusCode, body)
		}
		if len(fallbacks) != 1 || fallbacks[0].Limit != "rpm" || fallbacks[0].Wait < 50*time.Second {
			t.Fatalf("fallbacks %+v; want one for rpm, with a wait of about a minute", fallbacks)
		}
		if !errors.Is(fallbacks[0].Err, pacer.ErrWaitTimeout) {
			t.Errorf("Refusal.Err = %v; want ErrWaitTimeout", fallbacks[0].Err)
		}
	})
}

// A client that disconnects frees what it held: while it waits in the
// room, and while its handler runs.
func TestHandlerClientDisconnect(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		release := make(chan struct{})
		running := make(chan struct{}, 4)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			running <- struct{}{}
			// A runs until released; the others until their client leaves.
			gate := release
			if r.Header.Get("Authorization") != "Bearer token-0" {
				gate = nil
			}
			select {
			case <-gate:
			case <-r.Context().Done():
			}
			io.WriteString(w, "ok")
		})
		// waiting hears that a caller waits for the slot (B, below).
		waiting := make(chan struct{}, 1)
		observe := func(e pacer.Event) {
			if e.Kind == pacer.Waiting {
				select {
				case waiting <- struct{}{}:
				default:
				}
			}
		}
		p, err := pacer.New(b.Client(t), pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{Concurrency: 1}, Observe: observe})
		if err != nil {
			t.Fatal(err)
		}
		// bLeft closes when the handler has answered B: the server sees a
		// client leave some time after the client does.
		bLeft := make(chan struct{})
		inner := authenticate(pacerhttp.NewHandler(h, p, budgetOnly, pacerhttp.WithWaitingRoom(20*time.Second)))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r)
			if r.Header.Get("Authorization") == "Bearer token-1" {
				close(bLeft)
			}
		}))
		defer srv.Close()
		inFlight := func() int64 { return snap(t, p).InFlight }

		// A holds the only slot.
		aDone := make(chan int)
		go func() { resp, _ := get(t, ctx, srv.URL, 0, -1); aDone <- resp.StatusCode }()
		<-running
		// B waits in the room for it, then leaves.
		bctx, leave := context.WithCancel(ctx)
		bDone := make(chan error)
		go func() {
			req, _ := http.NewRequestWithContext(bctx, http.MethodGet, srv.URL, nil)
			req.Header.Set("Authorization", "Bearer token-1")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				err = fmt.Errorf("B answered %d; it should have left first", resp.StatusCode)
			}
			bDone <- err
		}()
		// B leaves once it waits in the room (a sleep stood for this, and
		// on a loaded machine B could leave before it reached the server).
		select {
		case <-waiting:
		case <-time.After(10 * time.Second):
			t.Fatal("B never waited for the slot")
		}
		leave()
		if err := <-bDone; !errors.Is(err, context.Canceled) {
			t.Errorf("B = %v; want its own cancellation", err)
		}
		select {
		case <-bLeft:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler never answered B after it left")
		}
		if len(running) != 0 {
			t.Fatal("B's handler ran: its wait outlived its client")
		}
		if n := inFlight(); n != 1 {
			t.Errorf("in flight after B left = %d; want A's 1", n)
		}
		close(release)
		if code := <-aDone; code != http.StatusOK {
			t.Errorf("A = %d", code)
		}
		waitFor(t, "A's slot back", func() bool { return inFlight() == 0 })

		// C gets the slot at once: B left no claim on it. C's client then
		// disconnects while its handler runs, and the slot comes back.
		cctx, cancelC := context.WithCancel(ctx)
		cDone := make(chan struct{})
		go func() {
			defer close(cDone)
			req, _ := http.NewRequestWithContext(cctx, http.MethodGet, srv.URL, nil)
			req.Header.Set("Authorization", "Bearer token-2")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-running:
		case <-time.After(5 * time.Second):
			t.Fatal("C not admitted within 5 s: B's wait still holds the slot")
		}
		if n := inFlight(); n != 1 {
			t.Errorf("in flight while C runs = %d; want 1", n)
		}
		cancelC()
		<-cDone
		waitFor(t, "C's slot back after its client left", func() bool { return inFlight() == 0 })
	})
}

// A request waiting in the room for a turn it reserved ahead gives the
// turn back when its client leaves: the budget's debt for it is undone.
func TestHandlerDisconnectGivesTurnBack(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		newClock(b)
		p, srv := inbound(t, b, pacer.Config{Limits: pacer.Limits{RPM: 2}}, ok, budgetOnly, pacerhttp.WithWaitingRoom(50*time.Second))
		for i := range 2 {
			if resp, body := get(t, ctx, srv.URL, i, -1); resp.StatusCode != http.StatusOK {
				t.Fatalf("request %d = %d %s", i, resp.StatusCode, body)
			}
		}
		level := func() float64 { return snap(t, p).Rate("rpm").Level }
		cctx, leave := context.WithCancel(ctx)
		done := make(chan error)
		go func() {
			req, _ := http.NewRequestWithContext(cctx, http.MethodGet, srv.URL, nil)
			req.Header.Set("Authorization", "Bearer token-2")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				err = fmt.Errorf("answered %d; the turn is 30 s away", resp.StatusCode)
			}
			done <- err
		}()
		// The third request reserves the turn 30 s ahead: the bucket owes it.
		waitFor(t, "the third request's turn reserved", func() bool { return level() < -0.5 })
		leave()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("client = %v; want its own cancellation", err)
		}
		waitFor(t, "the turn given back", func() bool { return level() > -0.5 })
		if l := level(); l > refillSince(b, 2.0/60) {
			t.Errorf("level %.2f; the two admitted requests stay charged", l)
		}
	})
}
