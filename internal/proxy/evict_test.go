package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/redistest"
)

// TestIdleBudgetsEvicted fills -max-budgets: a new key evicts the least
// recently used budget idle for -budget-idle, never one used more
// recently than that nor one with a call in flight.
func TestIdleBudgetsEvicted(t *testing.T) {
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	prov, err := fakeprovider.New(fakeprovider.Config{RequestLimit: 1000, TokenLimit: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer sk-slow" {
			arrived <- struct{}{}
			<-release
		}
		prov.ServeHTTP(w, r)
	}))
	limit := func(n int, idle time.Duration) func(*proxy.Config) {
		return func(c *proxy.Config) { c.MaxBudgets, c.BudgetIdle = n, idle }
	}
	call := func(r replica, key string) int {
		status, _, _ := send(t, r, "POST", "/openai/v1/chat/completions",
			`{"model":"gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+key)
		return status
	}
	name := func(key string) string { return proxy.BudgetName("openai", key, "gpt-4o-mini") }

	busy := startProxy(t, b, prefix, up, limit(1, time.Hour))
	if a, bb := call(busy, "sk-a"), call(busy, "sk-b"); a != 200 || bb != http.StatusServiceUnavailable {
		t.Errorf("a key, then another within -budget-idle = %d, %d; want 200, then 503", a, bb)
	}

	r := startProxy(t, b, prefix, up, limit(2, time.Millisecond))
	for _, k := range []string{"sk-a", "sk-b"} {
		if s := call(r, k); s != 200 {
			t.Fatalf("%s = %d", k, s)
		}
	}
	time.Sleep(5 * time.Millisecond)
	if s := call(r, "sk-a"); s != 200 { // sk-a is now the most recently used
		t.Fatalf("sk-a again = %d", s)
	}
	time.Sleep(5 * time.Millisecond)
	if s := call(r, "sk-c"); s != 200 {
		t.Errorf("a new key with every budget idle = %d, want 200", s)
	}
	log := r.log.String()
	if !strings.Contains(log, `"budget evicted`) || !strings.Contains(log, name("sk-b")) || strings.Contains(log, `"budget":"`+name("sk-a")+`","idle"`) {
		t.Errorf("log:\n%s\nwant sk-b's budget evicted, the least recently used, and not sk-a's", log)
	}

	// A budget with a call in flight is never evicted, however long idle.
	one := startProxy(t, b, prefix, up, limit(1, time.Millisecond))
	done := make(chan int)
	go func() { done <- call(one, "sk-slow") }()
	<-arrived
	time.Sleep(5 * time.Millisecond)
	if s := call(one, "sk-d"); s != http.StatusServiceUnavailable {
		t.Errorf("a new key while the only budget has a call in flight = %d, want 503", s)
	}
	close(release)
	if s := <-done; s != 200 {
		t.Errorf("the call in flight = %d, want 200", s)
	}
	// The call ends when the proxy has settled its lease, which it does
	// just after the client has the answer (the bytes go first): a new
	// key gets the budget's room once that round trip is done.
	s := call(one, "sk-d")
	for deadline := time.Now().Add(5 * time.Second); s != 200 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		s = call(one, "sk-d")
	}
	if s != 200 {
		t.Errorf("a new key once the call ended = %d, want 200 within 5 s", s)
	}
	if strings.Contains(r.log.String()+one.log.String()+busy.log.String(), "sk-") {
		t.Errorf("a key shows in the log")
	}
}
