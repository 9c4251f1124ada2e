package pacerhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/llmpacer/llmpacer/retry"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// A failed call's lease ends the same way whether retry.Run or the
// transport saw the failure, and the budget hears the same: one rule,
// pacer.Lease.Fail, which reports the failure once, in the lease's Ended
// event, and pauses the budget on a 429 or stops it on an exhausted quota
// (retry.Run did not stop it before Fail did).
func TestFailedLeaseEndsAlikeInRunAndTransport(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   pacer.LeaseState
		told   string // what the budget heard: "paused", "stopped" or ""
	}{
		{400, `{"error":{"message":"bad","type":"invalid_request_error"}}`, pacer.Rejected, ""},
		{401, `{"error":{"message":"key","type":"invalid_request_error","code":"invalid_api_key"}}`, pacer.Rejected, ""},
		{404, `{"error":{"message":"no model","code":"model_not_found"}}`, pacer.Rejected, ""},
		{408, `{"error":{"message":"timeout"}}`, pacer.Released, ""},
		{409, `{"type":"error","error":{"type":"conflict_error","message":"conflict"}}`, pacer.Released, ""},
		{429, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, pacer.Released, "paused"},
		{429, `{"error":{"message":"no money","type":"insufficient_quota","code":"insufficient_quota"}}`, pacer.Rejected, "stopped"},
		{500, `{"error":{"message":"oops","type":"server_error"}}`, pacer.Released, ""},
		{502, `bad gateway`, pacer.Released, ""},
		{503, `{"error":{"message":"The engine is currently overloaded","type":"server_error"}}`, pacer.Released, ""},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, pacer.Released, ""},
	}
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		for i, c := range cases {
			t.Run(fmt.Sprintf("%d-%d", c.status, i), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(c.status)
					_, _ = w.Write([]byte(c.body))
				}))
				t.Cleanup(srv.Close)
				run, runTold := failedEnd(t, b, srv.URL, "run", func(p *pacer.Pacer, client openai.Client, params openai.ChatCompletionNewParams) {
					_, _ = retry.Run(context.Background(), p, pacer.Request{Tokens: 100},
						func(ctx context.Context) (*openai.ChatCompletion, error) {
							return client.Chat.Completions.New(ctx, params)
						}, nil, retry.WithRetries(0))
				}, false)
				tr, trTold := failedEnd(t, b, srv.URL, "transport", func(p *pacer.Pacer, client openai.Client, params openai.ChatCompletionNewParams) {
					_, _ = client.Chat.Completions.New(context.Background(), params)
				}, true)
				if run != c.want || tr != c.want {
					t.Errorf("status %d: Run ended the lease %v, the transport %v; want both %v", c.status, run, tr, c.want)
				}
				if runTold != c.told || trTold != c.told {
					t.Errorf("status %d: after Run the budget was %q, after the transport %q; want both %q", c.status, runTold, trTold, c.told)
				}
			})
		}
	})
}

// failedEnd makes one failing call with send, on a new budget, through an
// openai-go client without retries (paced by the transport if paced), and
// returns how its lease ended and what the budget heard ("paused",
// "stopped" or "").
func failedEnd(t *testing.T, b redistest.Backend, url, name string, send func(*pacer.Pacer, openai.Client, openai.ChatCompletionNewParams), paced bool) (pacer.LeaseState, string) {
	t.Helper()
	ev := &events{}
	p, err := pacer.New(b.Client(t), pacer.Config{Name: redistest.Name(t) + "-" + name, Limits: pacer.Limits{RPM: 1000, TPM: 1_000_000}, Observe: ev.observe})
	if err != nil {
		t.Fatal(err)
	}
	hc := http.DefaultClient
	if paced {
		hc = &http.Client{Transport: pacerhttp.NewTransport(p, nil)}
	}
	client := openai.NewClient(ooption.WithBaseURL(url+"/v1/"), ooption.WithAPIKey("sk"),
		ooption.WithHTTPClient(hc), ooption.WithMaxRetries(0))
	send(p, client, openai.ChatCompletionNewParams{
		Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}, MaxTokens: openai.Int(50),
	})
	got := ev.ended(t, 1)
	if len(got) != 1 {
		t.Fatalf("%s: %d leases ended; want 1", name, len(got))
	}
	// Lease.Fail reports the failure in the Ended event, once, whoever
	// calls it.
	if got[0].Verdict.Status == 0 {
		t.Errorf("%s: Ended event %+v; want the answer's verdict", name, got[0])
	}
	s, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case s.StoppedBy != nil:
		return got[0].End, "stopped"
	case s.Paused > 0:
		return got[0].End, "paused"
	}
	return got[0].End, ""
}
