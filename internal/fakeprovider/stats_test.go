package fakeprovider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTimelineAndReset(t *testing.T) {
	clk := newClock()
	p := newTestProvider(t, Config{TokenLimit: 2000, Mode: SlidingWindow}, clk)
	start := clk.Now()
	for _, step := range []struct {
		at   time.Duration
		max  int64
		want int
	}{
		{500 * time.Millisecond, 1500, 200},
		{2100 * time.Millisecond, 500, 200},
		{2200 * time.Millisecond, 1, 429},
	} {
		clk.Advance(start.Add(step.at).Sub(clk.Now()))
		if w := job(p, OpenAI, step.max); w.Code != step.want {
			t.Fatalf("job(%d) at %v = %d, want %d", step.max, step.at, w.Code, step.want)
		}
	}
	want := Stats{
		Start: start, Calls: 3, OK: 2, RateLimited: 1, TokensAdmitted: 2000, TokensUsed: 2000, MaxInFlight: 1,
		Timeline:  []Second{{TokensAdmitted: 1500, OK: 1}, {}, {TokensAdmitted: 500, OK: 1, RateLimited: 1}},
		Endpoints: map[Endpoint]EndpointStats{ChatCompletions: {Calls: 3, OK: 2, RateLimited: 1, OutputTokens: 2000}},
	}
	if diff := cmp.Diff(want, p.Stats()); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}

	p.ResetStats()
	if diff := cmp.Diff(Stats{Start: clk.Now(), Endpoints: map[Endpoint]EndpointStats{}}, p.Stats()); diff != "" {
		t.Errorf("Stats() after ResetStats mismatch (-want +got):\n%s", diff)
	}
	if w := job(p, OpenAI, 1); w.Code != http.StatusTooManyRequests {
		t.Errorf("job after ResetStats = %d, want 429: the limits are not reset", w.Code)
	}
}

func TestTimelineIgnoresFarClock(t *testing.T) {
	clk := newClock()
	p := newTestProvider(t, Config{}, clk)
	clk.Advance(400 * 24 * time.Hour)
	job(p, OpenAI, 1)
	if s := p.Stats(); s.OK != 1 || len(s.Timeline) != 0 {
		t.Errorf("Stats() = %+v, want the call counted and the timeline left empty", s)
	}
}

// TestConcurrentCalls runs many clients over real HTTP. The window is long
// and strict, so exactly TokenLimit/1000 calls fit however they interleave.
func TestConcurrentCalls(t *testing.T) {
	p := newTestProvider(t, Config{TokenLimit: 50_000, RequestLimit: 1000, Window: time.Hour, Mode: SlidingWindow}, nil)
	srv := httptest.NewServer(p)
	defer srv.Close()
	const clients, each = 32, 5
	var wg sync.WaitGroup
	codes := make(chan int, clients*each)
	for range clients {
		wg.Go(func() {
			for range each {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+openAIPath, strings.NewReader(chatBody(OpenAI, 1000, false)))
				req.Header.Set(PromptTokensHeader, "0")
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Errorf("POST error = %v", err)
					return
				}
				res.Body.Close()
				codes <- res.StatusCode
				_ = p.Stats() // read while others write
			}
		})
	}
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if diff := cmp.Diff(map[int]int{200: 50, 429: clients*each - 50}, got); diff != "" {
		t.Errorf("status counts mismatch (-want +got):\n%s", diff)
	}
	s := p.Stats()
	if s.Calls != clients*each || s.OK != 50 || s.RateLimited != clients*each-50 || s.TokensAdmitted != 50_000 {
		t.Errorf("Stats() = %+v, want %d calls, 50 OK, 50,000 tokens", s, clients*each)
	}
}

// TestMaxInFlight holds every call in its latency until all have arrived,
// so they are certainly in flight together.
func TestMaxInFlight(t *testing.T) {
	const n = 8
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	go func() { arrived.Wait(); close(release) }()
	p := newTestProvider(t, Config{LatencyFunc: func(Usage) time.Duration {
		arrived.Done()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		return 0
	}}, nil)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { job(p, OpenAI, 1) })
	}
	wg.Wait()
	if got := p.Stats().MaxInFlight; got != n {
		t.Errorf("Stats().MaxInFlight = %d, want %d", got, n)
	}
}
