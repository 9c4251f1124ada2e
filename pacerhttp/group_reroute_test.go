package pacerhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/estimate"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

const rateLimited = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`

// newRateLimitedDeployment answers every call 429 with Retry-After: 10, a
// wait no call that goes on at once comes near, however loaded the
// machine (2 s did, under a doubled CI load).
func newRateLimitedDeployment(t *testing.T) *deployment {
	return newFailingDeployment(t, http.StatusTooManyRequests, http.Header{"Retry-After": {"10"}}, rateLimited)
}

// groupClient is an openai-go client of a group's transport, configured
// for the first deployment, d[0], with the others' URLs as targets.
func groupClient(g *pacer.Group, ps []*pacer.Pacer, d []*deployment, opts ...ooption.RequestOption) openai.Client {
	targets := map[string]pacerhttp.Target{}
	for i := 1; i < len(d); i++ {
		targets[ps[i].Config().Name] = pacerhttp.Target{URL: d[i].srv.URL}
	}
	hc := &http.Client{Transport: pacerhttp.NewGroupTransport(g, targets, nil)}
	return openai.NewClient(append([]ooption.RequestOption{ooption.WithBaseURL(d[0].srv.URL + "/v1/"),
		ooption.WithAPIKey("sk"), ooption.WithHTTPClient(hc)}, opts...)...)
}

// warmTokenizer builds gpt-4o's tokenizer, once per process (up to a
// second under -race on a loaded machine), before a call is timed.
func warmTokenizer(t *testing.T) {
	e, err := estimate.New("gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	e.Text("hello")
}

var hello = openai.ChatCompletionNewParams{
	Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}, MaxTokens: openai.Int(50),
}

// A deployment's 429 goes on to the deployment with room before the SDK
// sees it: the SDK, its retries on, does not wait out the Retry-After to be
// routed back to the same deployment. The first deployment's lease keeps
// its charge (a 429) and the second's settles what was used.
func TestGroupTransportSends429OnAtOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ev := &events{}
		full, free := newRateLimitedDeployment(t), newDeployment(t, 200)
		g, ps, _ := groupObserved(t, b, ev, 100, 100)
		client := groupClient(g, ps, []*deployment{full, free})
		warmTokenizer(t)
		began := time.Now()
		_, err := client.Chat.Completions.New(context.Background(), hello)
		took := time.Since(began)
		t.Logf("call took %v", took)
		if err != nil {
			t.Fatalf("call = %v; want the second deployment's answer", err)
		}
		if len(full.got()) != 1 || len(free.got()) != 1 {
			t.Errorf("requests: %d to the rate-limited deployment, %d to the other; want 1 and 1", len(full.got()), len(free.got()))
		}
		// The SDK's retry could come only after the whole Retry-After. (A
		// first call builds the tokenizer and loads the scripts: under
		// -race on a loaded machine, up to a second.)
		if took >= 10*time.Second {
			t.Errorf("call took %v; want under the 10 s Retry-After", took)
		}
		// Paused for every process, for its Retry-After.
		if s, err := ps[0].Snapshot(context.Background()); err != nil || s.Paused < 5*time.Second || s.Paused > 10*time.Second {
			t.Errorf("the rate-limited deployment's pause = %v, %v; want up to its 10 s Retry-After", s.Paused, err)
		}
		ends := map[string]pacer.LeaseState{}
		for _, e := range ev.ended(t, 2) {
			ends[e.Name] = e.End
		}
		if ends[ps[0].Config().Name] != pacer.Released || ends[ps[1].Config().Name] != pacer.Settled {
			t.Errorf("leases ended %v; want %s released, %s settled", ends, ps[0].Config().Name, ps[1].Config().Name)
		}
		if n := ev.balanced(t); n != 2 {
			t.Errorf("%d leases; want 2, one per deployment", n)
		}
	})
}

// Many goroutines through one group whose first deployment answers every
// call 429 with Retry-After: 10: no call fails, none waits the Retry-After,
// and the first deployment is hit at most once per call (most skip it
// while it is paused).
func TestGroupTransportNo429Failures(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		full, free := newRateLimitedDeployment(t), newDeployment(t, 200)
		g, ps, _ := groupOf(t, b, 1000, 1000)
		client := groupClient(g, ps, []*deployment{full, free})
		warmTokenizer(t)
		const workers, calls = 8, 3
		var mu sync.Mutex
		var failed []error
		var slowest time.Duration
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < calls; i++ {
					began := time.Now()
					_, err := client.Chat.Completions.New(context.Background(), hello)
					mu.Lock()
					slowest = max(slowest, time.Since(began))
					if err != nil {
						failed = append(failed, err)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(failed) > 0 {
			t.Errorf("%d of %d calls failed; want 0: %v", len(failed), workers*calls, failed[0])
		}
		if slowest >= 10*time.Second {
			t.Errorf("slowest call took %v; want under the 10 s Retry-After", slowest)
		}
		if n := len(full.got()); n > workers*calls {
			t.Errorf("the rate-limited deployment got %d requests; want at most %d, one per call", n, workers*calls)
		}
		if n := len(free.got()); n != workers*calls {
			t.Errorf("the deployment with room got %d requests; want %d", n, workers*calls)
		}
	})
}

// With no other deployment having room, the SDK gets the 429 itself, and
// the full deployment is not charged for a call it did not take.
func TestGroupTransport429WithNoRoomElsewhere(t *testing.T) {
	b := redistest.Mini(t)
	ev := &events{}
	full, empty := newRateLimitedDeployment(t), newDeployment(t, 200)
	g, ps, _ := groupObserved(t, b, ev, 100, 1)
	l, err := ps[1].Acquire(context.Background(), pacer.Request{Tokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Settle(context.Background(), 1)
	client := groupClient(g, ps, []*deployment{full, empty}, ooption.WithMaxRetries(0))
	_, err = client.Chat.Completions.New(context.Background(), hello)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("call = %v; want the deployment's 429", err)
	}
	if len(full.got()) != 1 || len(empty.got()) != 0 {
		t.Errorf("requests: %d and %d; want 1 and 0", len(full.got()), len(empty.got()))
	}
	admitted := map[string]int{}
	for _, e := range ev.of(pacer.Admitted) {
		admitted[e.Name]++
	}
	if admitted[ps[0].Config().Name] != 1 || admitted[ps[1].Config().Name] != 1 {
		t.Errorf("admissions %v; want 1 each: the call's on the first, none for it on the full one", admitted)
	}
}

// Every deployment failing, a call is sent to each at most once, and the
// SDK gets the last answer.
func TestGroupTransportTriesEachDeploymentOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ds := []*deployment{newRateLimitedDeployment(t),
			newFailingDeployment(t, 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			newDeployment(t, http.StatusInternalServerError)}
		g, ps, _ := groupOf(t, b, 100, 100, 100)
		client := groupClient(g, ps, ds, ooption.WithMaxRetries(0))
		_, err := client.Chat.Completions.New(context.Background(), hello)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError {
			t.Fatalf("call = %v; want the last deployment's 500", err)
		}
		for i, d := range ds {
			if n := len(d.got()); n != 1 {
				t.Errorf("deployment %d got %d requests; want 1", i, n)
			}
		}
	})
}

// A stream refused with a 429 (before any body) goes on to the deployment
// with room, and the SDK reads that one's stream.
func TestGroupTransportSendsRefusedStreamOn(t *testing.T) {
	b := redistest.Mini(t)
	full, free := newRateLimitedDeployment(t), newDeployment(t, 200)
	g, ps, _ := groupOf(t, b, 100, 100)
	client := groupClient(g, ps, []*deployment{full, free}, ooption.WithMaxRetries(0))
	s := client.Chat.Completions.NewStreaming(context.Background(), hello)
	var text strings.Builder
	for s.Next() {
		for _, c := range s.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if err := s.Err(); err != nil || text.String() != "hi" {
		t.Fatalf("stream = %q, %v; want \"hi\" from the second deployment", text.String(), err)
	}
	if len(full.got()) != 1 || len(free.got()) != 1 {
		t.Errorf("requests: %d and %d; want 1 and 1", len(full.got()), len(free.got()))
	}
}

// A stream that fails after its body began is not sent again: part of it
// already reached the SDK.
func TestGroupTransportKeepsFailureAfterBody(t *testing.T) {
	b := redistest.Mini(t)
	broken := newFailingDeployment(t, http.StatusOK, nil, "")
	broken.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		broken.mu.Lock()
		broken.hits = append(broken.hits, r.URL.Path)
		broken.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\"}}]}\n\n" +
			"data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"code\":\"500\"}}\n\n"))
	})
	free := newDeployment(t, 200)
	g, ps, _ := groupOf(t, b, 100, 100)
	client := groupClient(g, ps, []*deployment{broken, free}, ooption.WithMaxRetries(0))
	s := client.Chat.Completions.NewStreaming(context.Background(), hello)
	for s.Next() {
	}
	if s.Err() == nil {
		t.Errorf("stream ended without error; want the server's")
	}
	if len(broken.got()) != 1 || len(free.got()) != 0 {
		t.Errorf("requests: %d and %d; want 1 and 0", len(broken.got()), len(free.got()))
	}
}

// anthropic-sdk-go, an overloaded (529) deployment: the call goes on to
// the next deployment at once.
func TestGroupTransportSendsAnthropicOverloadOn(t *testing.T) {
	b := redistest.Mini(t)
	busy := newFailingDeployment(t, 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	free := newDeployment(t, 200)
	g, ps, _ := groupOf(t, b, 100, 100)
	hc := &http.Client{Transport: pacerhttp.NewGroupTransport(g, map[string]pacerhttp.Target{ps[1].Config().Name: {URL: free.srv.URL}}, nil)}
	client := anthropic.NewClient(aoption.WithBaseURL(busy.srv.URL), aoption.WithAPIKey("sk-ant"),
		aoption.WithHTTPClient(hc), aoption.WithMaxRetries(0))
	m, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "claude-haiku-4-5", MaxTokens: 50,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	})
	if err != nil || len(m.Content) != 1 || m.Content[0].Text != "hi" {
		t.Fatalf("call = %v, %v; want the second deployment's message", m, err)
	}
	if len(busy.got()) != 1 || len(free.got()) != 1 {
		t.Errorf("requests: %d and %d; want 1 and 1", len(busy.got()), len(free.got()))
	}
}
