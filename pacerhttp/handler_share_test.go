package pacerhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// A heavy tenant's first seconds do not starve the light ones. RPM 1,200
// with a burst of 10 (a call refills in 50 ms), Share 0.2, a 1 s waiting
// room: 30 clients of one tenant ask flat out from the start, while five
// light tenants, each within its share (2 requests a second against its
// share's 4), ask at their own phase. Every light request is admitted,
// most within a refill or a few. Held to Share of the limit (240 calls), the heavy
// tenant counted as within its share for its first 15 s and reserved
// turns up to the room's second ahead: every light request met a queue
// longer than the room and was answered 429.
func TestHandlerHeavyNewcomerLeavesLightTenants(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const (
			heavyTokens, lightTokens = 1, 2 // marks the Admitted events
			refill                   = 50 * time.Millisecond
			room                     = time.Second
		)
		var (
			mu     sync.Mutex
			waits  []time.Duration // the light requests' waits in the room
			served atomic.Int64    // heavy requests admitted
		)
		cfg := pacer.Config{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 1200, Window: time.Minute, Burst: 10}}, Tenants: pacer.Tenants{Share: 0.2},
			Observe: func(e pacer.Event) {
				switch {
				case e.Kind != pacer.Admitted:
				case e.Tokens == lightTokens:
					mu.Lock()
					waits = append(waits, e.Wait)
					mu.Unlock()
				case e.Tokens == heavyTokens:
					served.Add(1)
				}
			}}
		_, srv := inbound(t, b, cfg, ok, pacerhttp.WithCost(tokensHeader), pacerhttp.WithWaitingRoom(room))

		var heavy sync.WaitGroup
		for range 30 {
			heavy.Go(func() {
				for ctx.Err() == nil {
					if code := status(ctx, srv.URL, 0, heavyTokens); code == http.StatusTooManyRequests {
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
		// Light tenant i asks at i × 100 ms, and 500 ms later.
		start := time.Now()
		var light sync.WaitGroup
		codes := make([][]int, 5)
		for i := range 5 {
			light.Go(func() {
				for round := range 2 {
					time.Sleep(time.Until(start.Add(time.Duration(i)*100*time.Millisecond + time.Duration(round)*500*time.Millisecond)))
					codes[i] = append(codes[i], status(ctx, srv.URL, 1+i, lightTokens))
				}
			})
		}
		light.Wait()
		cancel()
		heavy.Wait()

		for i, cs := range codes {
			for round, code := range cs {
				if code != http.StatusOK {
					t.Errorf("light tenant %d, request %d: %d; want 200 (admitted beside the heavy tenant)", i+1, round+1, code)
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(waits)
		t.Logf("light waits %v; heavy admitted %d", waits, served.Load())
		// Alone, a light request waits for nothing; beside the heavy
		// tenant, for a refill or a few (a loaded machine's timers add to
		// that). Behind the heavy tenant's reserved turns it waited most
		// of the room, or was refused. miniredis under -race runs each
		// script for milliseconds, thirty clients' worth of them queued:
		// its waits measure that, so only a real Redis's are checked.
		if n := len(waits); b.Mini == nil && n > 0 && waits[n/2] > room/4 {
			t.Errorf("the median light wait was %v; want at most %v (a refill is %v, the room %v)", waits[n/2], room/4, refill, room)
		}
		// The heavy tenant fills what the light ones leave.
		if served.Load() == 0 {
			t.Errorf("the heavy tenant was never admitted; it fills the room the light ones leave")
		}
	})
}

// status sends a GET as account i's token with tokens in X-Tokens and
// returns its status, or 0 if ctx ended first.
func status(ctx context.Context, url string, account int, tokens int64) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", fmt.Sprintf("Bearer token-%d", account))
	req.Header.Set("X-Tokens", strconv.FormatInt(tokens, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
