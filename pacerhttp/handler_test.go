package pacerhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
)

// accounts stands for a service's authentication: a bearer token names an
// account, which the middleware puts in the context for the handler's
// default tenant function. A request without a known token is refused
// before the budget sees it, as real authentication would.
var accounts = func() map[string]string {
	m := map[string]string{}
	for i := range 64 {
		m[fmt.Sprintf("token-%d", i)] = fmt.Sprintf("account-%d", i)
	}
	return m
}()

func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := accounts[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(pacerhttp.ContextWithTenant(r.Context(), id)))
	})
}

// tokensHeader prices a request by its X-Tokens header: a test's stand-in
// for an estimate of the prompt.
func tokensHeader(r *http.Request) (pacer.Request, error) {
	n, err := strconv.ParseInt(r.Header.Get("X-Tokens"), 10, 64)
	if err != nil {
		return pacer.Request{}, fmt.Errorf("X-Tokens: %w", err)
	}
	return pacer.Request{Tokens: n}, nil
}

// budgetOnly charges every request to the budget alone, for budgets
// without tenants (a tenant there is ErrInvalid).
var budgetOnly = pacerhttp.WithTenantFunc(func(*http.Request) (string, error) { return "", nil })

// ok answers 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

// inbound serves h behind a handler on budget cfg, authenticated.
func inbound(t *testing.T, b redistest.Backend, cfg pacer.Config, h http.Handler, opts ...pacerhttp.HandlerOption) (*pacer.Pacer, *httptest.Server) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = redistest.Name(t)
	}
	p, err := pacer.New(b.Client(t), cfg)
	if err != nil {
		t.Fatalf("pacer.New = %v", err)
	}
	srv := httptest.NewServer(authenticate(pacerhttp.NewHandler(h, p, opts...)))
	t.Cleanup(srv.Close)
	return p, srv
}

// get sends a GET as account i's token, with tokens in X-Tokens if >= 0.
func get(t testing.TB, ctx context.Context, url string, account int, tokens int64) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", fmt.Sprintf("Bearer token-%d", account))
	if tokens >= 0 {
		req.Header.Set("X-Tokens", strconv.FormatInt(tokens, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s = %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// param returns the integer parameter key of a one-item RateLimit field.
func param(t *testing.T, field, key string) int64 {
	t.Helper()
	for _, p := range strings.Split(field, ";")[1:] {
		if k, v, _ := strings.Cut(p, "="); k == key {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s in %q: %v", key, field, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %q", key, field)
	return 0
}

// A refusal states the limit that binds: Retry-After and t are the wait
// rounded up, and r what the limit holds, read from the budget's real
// state, for the budget's limit and for a tenant's own.
func TestHandlerRateLimitHeaders(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		newClock(b)
		p, srv := inbound(t, b, pacer.Config{
			Limits:  pacer.Limits{TPM: 10_000},
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Tokens, Limit: 3000, Window: time.Hour}}},
		}, ok, pacerhttp.WithCost(tokensHeader))

		// Account 1 spends 2,000 of its hour, then asks for 2,000 more:
		// its own rate binds, with 1,000 left, refilling 3,000 an hour.
		if resp, body := get(t, ctx, srv.URL, 1, 2000); resp.StatusCode != http.StatusOK {
			t.Fatalf("first 2,000 = %d %s", resp.StatusCode, body)
		}
		resp, body := get(t, ctx, srv.URL, 1, 2000)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("second 2,000 = %d %s; want 429", resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), `"@tokens/3600s";q=3000;w=3600`; got != want {
			t.Errorf("RateLimit-Policy = %q; want %q", got, want)
		}
		ts, err := p.TenantSnapshot(ctx, "account-1")
		if err != nil {
			t.Fatal(err)
		}
		rl := resp.Header.Get("RateLimit")
		if !strings.HasPrefix(rl, `"@tokens/3600s";`) {
			t.Errorf("RateLimit = %q; want the tenant's rate", rl)
		}
		// Read before the snapshot: at most what it holds, at least the
		// 1,000 left (the clock only refills).
		if r := param(t, rl, "r"); r < 1000 || float64(r) > ts.Rates[0].Level {
			t.Errorf("RateLimit r = %d; want between 1000 and the tenant's level %.1f", r, ts.Rates[0].Level)
		}
		// 1,000 more tokens at 3,000 an hour: 1,200 s.
		ra, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
		if ra < 1190 || ra > 1200 || param(t, rl, "t") != ra {
			t.Errorf("Retry-After = %d, RateLimit t = %d; want both about 1200", ra, param(t, rl, "t"))
		}
		var problem struct {
			Type     string   `json:"type"`
			Violated []string `json:"violated-policies"`
		}
		if err := json.Unmarshal([]byte(body), &problem); err != nil || !strings.HasSuffix(problem.Type, "#quota-exceeded") || len(problem.Violated) != 1 || problem.Violated[0] != "@tokens/3600s" {
			t.Errorf("body %s (%v); want a quota-exceeded problem naming @tokens/3600s", body, err)
		}

		// Accounts 2, 3 and 4 take the budget's minute down to 2,000: the
		// budget's tpm binds account 5's 3,000, within its own hour.
		for a := 2; a <= 4; a++ {
			if resp, body := get(t, ctx, srv.URL, a, 2000); resp.StatusCode != http.StatusOK {
				t.Fatalf("account %d's 2,000 = %d %s", a, resp.StatusCode, body)
			}
		}
		resp, body = get(t, ctx, srv.URL, 5, 3000)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("account 5 on a spent budget = %d %s; want 429", resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), `"tpm";q=10000;w=60`; got != want {
			t.Errorf("RateLimit-Policy = %q; want %q", got, want)
		}
		s := snap(t, p)
		rl = resp.Header.Get("RateLimit")
		if r := param(t, rl, "r"); r < 2000 || float64(r) > s.Rate("tpm").Level {
			t.Errorf("RateLimit = %q; want r between 2000 and the budget's level %.1f", rl, s.Rate("tpm").Level)
		}
		// 1,000 more at 10,000 a minute: 6 s (5 on a moving clock).
		ra, _ = strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
		if (ra != 6 && (b.Mini != nil || ra != 5)) || param(t, rl, "t") != ra {
			t.Errorf("Retry-After = %d, RateLimit = %q; want t = Retry-After = 6 s", ra, rl)
		}
		if s.Rate("tpm").Level > 2000+refillSince(b, 10_000.0/60) {
			t.Errorf("budget level %.1f; the refused call must not have been charged", s.Rate("tpm").Level)
		}
	})
}

// refillSince bounds what a bucket refilling perSecond regained during a
// test: nothing on miniredis, whose clock stands still.
func refillSince(b redistest.Backend, perSecond float64) float64 {
	if b.Mini != nil {
		return 0.5
	}
	return perSecond * 30
}

func snap(t *testing.T, p *pacer.Pacer) pacer.Snapshot {
	t.Helper()
	s, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() = %v", err)
	}
	return s
}

// Many accounts, each with several clients sending at once over real
// HTTP: every account is admitted exactly its own limit, whoever else
// sends, and the budget counts exactly the admissions.
func TestHandlerNoTenantSpendsAnothers(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		const accountsN, clients, each, limit = 16, 4, 4, 5
		ctx := context.Background()
		newClock(b)
		p, srv := inbound(t, b, pacer.Config{
			Rates:   []pacer.Rate{{Unit: pacer.Requests, Limit: 1000, Window: time.Hour}},
			Tenants: pacer.Tenants{Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: limit, Window: time.Hour}}},
		}, ok, pacerhttp.WithErrorLog(func(_ *http.Request, err error) {
			// The one snapshot a 429 reads for its RateLimit headers is
			// bounded at 1 s: on a loaded machine, with 64 clients on one
			// miniredis, it may run out, and the headers are left out.
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error log: %v", err)
			}
		}))
		var (
			mu       sync.Mutex
			admitted = map[int]int{}
			other    []string
			wg       sync.WaitGroup
		)
		for a := range accountsN {
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						resp, body := get(t, ctx, srv.URL, a, -1)
						mu.Lock()
						switch resp.StatusCode {
						case http.StatusOK:
							admitted[a]++
						case http.StatusTooManyRequests:
							// Retry-After always; RateLimit unless its read
							// ran out of time (see above).
							ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
							if err != nil || ra < 1 || ra > 3600 {
								other = append(other, "Retry-After: "+resp.Header.Get("Retry-After"))
							}
							if rl := resp.Header.Get("RateLimit"); rl != "" && rl != fmt.Sprintf(`"@requests/3600s";r=0;t=%d`, ra) {
								other = append(other, "RateLimit: "+rl)
							}
						default:
							other = append(other, fmt.Sprintf("%d %s", resp.StatusCode, body))
						}
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		if len(other) > 0 {
			t.Errorf("unexpected answers: %q", other)
		}
		total := 0
		for a := range accountsN {
			total += admitted[a]
			if admitted[a] != limit {
				t.Errorf("account %d admitted %d of %d sent; want its limit %d", a, admitted[a], clients*each, limit)
			}
		}
		if got := 1000 - snap(t, p).Rates[0].Level; math.Abs(got-float64(total)) > 0.5+refillSince(b, 1000.0/3600) {
			t.Errorf("the budget counted %.1f requests; want the %d admitted", got, total)
		}
	})
}

// A concurrency limit and a rate over any window are stated too: slots in
// the draft's concurrent-requests unit, a rate by its window.
func TestHandlerRateLimitHeadersOtherLimits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ctx := context.Background()
		newClock(b)
		release := make(chan struct{})
		running := make(chan struct{}, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				running <- struct{}{}
				<-release
			}
		})
		_, srv := inbound(t, b, pacer.Config{
			Limits: pacer.Limits{Concurrency: 1},
			Rates:  []pacer.Rate{{Unit: pacer.Requests, Limit: 3, Window: 10 * time.Second}},
		}, h, budgetOnly)
		held := make(chan int)
		go func() { resp, _ := get(t, ctx, srv.URL+"/hold", 0, -1); held <- resp.StatusCode }()
		<-running
		resp, body := get(t, ctx, srv.URL, 1, -1)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("with the only slot held = %d %s; want 429", resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), `"concurrency";q=1;qu="concurrent-requests"`; got != want {
			t.Errorf("RateLimit-Policy = %q; want %q", got, want)
		}
		if got := resp.Header.Get("RateLimit"); !strings.HasPrefix(got, `"concurrency";r=0;t=`) {
			t.Errorf("RateLimit = %q; want no slot available", got)
		}
		close(release)
		if code := <-held; code != http.StatusOK {
			t.Fatalf("/hold = %d", code)
		}
		// A refusal charges nothing: /hold and the next admitted request
		// leave one of the 3 requests in 10 s; the one after waits for the
		// rate (3.3 s, rounded up to 4).
		waitFor(t, "the slot back", func() bool { resp, _ := get(t, ctx, srv.URL, 2, -1); return resp.StatusCode == http.StatusOK })
		if resp, body := get(t, ctx, srv.URL, 2, -1); resp.StatusCode != http.StatusOK {
			t.Fatalf("the 3rd request in 10 s = %d %s", resp.StatusCode, body)
		}
		resp, body = get(t, ctx, srv.URL, 3, -1)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the 4th request in 10 s = %d %s; want 429", resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), `"requests/10s";q=3;w=10`; got != want {
			t.Errorf("RateLimit-Policy = %q; want %q", got, want)
		}
		rl := resp.Header.Get("RateLimit")
		if ra := resp.Header.Get("Retry-After"); !strings.HasPrefix(rl, `"requests/10s";r=0;t=`) || param(t, rl, "t") > 4 || strconv.FormatInt(param(t, rl, "t"), 10) != ra {
			t.Errorf("RateLimit = %q, Retry-After = %s; want r=0 and t = Retry-After <= 4", rl, ra)
		}
	})
}
