package pacerhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/redis/go-redis/v9"
)

// chatBudget returns a Pacer on an in-process miniredis whose clock stands
// still, so that the examples print exact waits. In production, pass your
// Redis client.
func chatBudget(cfg pacer.Config) (*pacer.Pacer, func()) {
	mr, _ := miniredis.Run()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	p, err := pacer.New(rdb, cfg)
	if err != nil {
		panic(err)
	}
	return p, func() { rdb.Close(); mr.Close() }
}

// withAccount stands for your authentication middleware: it verifies the
// caller (here, naively, a bearer token that is the account's name) and
// names the tenant in the context, where NewHandler's default reads it.
func withAccount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		next.ServeHTTP(w, r.WithContext(pacerhttp.ContextWithTenant(r.Context(), account)))
	})
}

// send sends a request as account and returns the answer.
func send(url, account string) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("Authorization", "Bearer "+account)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// A service puts its chat feature in front of its customers: each account
// may send 2 requests a minute, within the service's 100. The third
// request of an account is answered 429, with the wait and the limit that
// binds; another account is served as usual.
func ExampleNewHandler() {
	p, done := chatBudget(pacer.Config{
		Name: "chat", Limits: pacer.Limits{RPM: 100},
		Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: 2, Window: time.Minute}}},
	})
	defer done()
	chat := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Hello!") })
	srv := httptest.NewServer(withAccount(pacerhttp.NewHandler(chat, p)))
	defer srv.Close()

	for _, account := range []string{"acme", "acme", "acme", "globex"} {
		resp := send(srv.URL, account)
		fmt.Println(account, resp.Status)
		if resp.StatusCode == http.StatusTooManyRequests {
			fmt.Println("  Retry-After:", resp.Header.Get("Retry-After"))
			fmt.Println("  RateLimit-Policy:", resp.Header.Get("RateLimit-Policy"))
			fmt.Println("  RateLimit:", resp.Header.Get("RateLimit"))
		}
	}
	// Output:
	// acme 200 OK
	// acme 200 OK
	// acme 429 Too Many Requests
	//   Retry-After: 30
	//   RateLimit-Policy: "@rpm";q=2;w=60
	//   RateLimit: "@rpm";r=0;t=30
	// globex 200 OK
}

// A waiting room holds requests up to a latency budget. A request whose
// wait would be longer is handed to the fallback at once (the pacer tells
// the wait up front): here a canned answer; it could call a cheaper model
// on another budget.
func ExampleWithFallback() {
	p, done := chatBudget(pacer.Config{Name: "chat", Limits: pacer.Limits{RPM: 1}})
	defer done()
	chat := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Hello from the large model") })
	h := pacerhttp.NewHandler(chat, p,
		pacerhttp.WithTenantFunc(func(*http.Request) (string, error) { return "", nil }), // one budget for all
		pacerhttp.WithWaitingRoom(2*time.Second),
		pacerhttp.WithFallback(func(w http.ResponseWriter, _ *http.Request, why pacerhttp.Refusal) {
			fmt.Fprintf(w, "I'm at capacity; try again in %v (%s)", why.Wait.Round(time.Second), why.Limit)
		}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	for range 2 {
		resp, err := http.Post(srv.URL, "text/plain", nil)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 Hello from the large model
	// 200 I'm at capacity; try again in 1m0s (rpm)
}

// A handler settles what its model call really used through LeaseFrom:
// the unused part of the reservation goes back to the budget (and to the
// tenant) at once. Without a Settle the handler's lease is released when
// it returns, keeping its whole reservation charged.
func ExampleLeaseFrom() {
	p, done := chatBudget(pacer.Config{Name: "chat", Limits: pacer.Limits{TPM: 10_000}})
	defer done()
	chat := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ... call the model, which reports 120 tokens used ...
		if err := pacerhttp.LeaseFrom(r.Context()).Settle(r.Context(), 120); err != nil {
			http.Error(w, "settle failed", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "Hello!")
	})
	h := pacerhttp.NewHandler(chat, p,
		pacerhttp.WithTenantFunc(func(*http.Request) (string, error) { return "", nil }),
		// A real service estimates the prompt (package estimate) and adds
		// the output cap it sets.
		pacerhttp.WithCost(func(*http.Request) (pacer.Request, error) { return pacer.Request{Tokens: 1000}, nil }))
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	s, _ := p.Snapshot(context.Background())
	fmt.Printf("%s; tokens left this minute: %.0f\n", resp.Status, s.Rate("tpm").Level)
	// Output:
	// 200 OK; tokens left this minute: 9880
}
