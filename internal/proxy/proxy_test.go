package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/openai/openai-go/v3"
)

// TestOpenAIThroughProxy sends openai-go's JSON and streamed chat calls
// through the proxy, with only the base URL changed, and checks that the
// budget of the key and model learned the provider's limits from the
// first answer's headers and stored them in Redis.
func TestOpenAIThroughProxy(t *testing.T) {
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	prov, up := upstream(t, fakeprovider.Config{RequestLimit: 100, TokenLimit: 50_000})
	r := startProxy(t, b, prefix, up.URL)
	ctx := context.Background()
	c := openaiClient(r)

	resp, err := c.Chat.Completions.New(ctx, chatParams())
	if err != nil {
		t.Fatalf("chat through the proxy: %v", err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" || resp.Usage.TotalTokens == 0 {
		t.Errorf("chat answer = %+v, want one choice with text and usage", resp)
	}
	if got := open(t, b, prefix, "openai", "gpt-4o-mini").Config().Limits; got != (pacer.Limits{RPM: 100, TPM: 50_000}) {
		t.Errorf("stored limits = %v, want the headers' rpm=100 tpm=50000", got)
	}

	s := c.Chat.Completions.NewStreaming(ctx, chatParams())
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream through the proxy: %v", err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Usage.TotalTokens == 0 {
		t.Errorf("streamed answer = %+v, want text and the usage the proxy asked for", acc.ChatCompletion)
	}
	if st := prov.Stats(); st.OK != 2 || st.Calls != 2 {
		t.Errorf("provider saw %d calls, %d OK; want 2, 2", st.Calls, st.OK)
	}
}

// TestAnthropicThroughProxy does the same with anthropic-sdk-go (its key
// as x-api-key): the budget learns requests and Anthropic's separate input
// and output token limits, and leaves its combined tokens limit out.
func TestAnthropicThroughProxy(t *testing.T) {
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	prov, up := upstream(t, fakeprovider.Config{Style: fakeprovider.Anthropic, RequestLimit: 50, TokenLimit: 48_000, InputTokenLimit: 40_000, OutputTokenLimit: 8_000})
	r := startProxy(t, b, prefix, up.URL)
	ctx := context.Background()
	c := anthropicClient(r)

	msg, err := c.Messages.New(ctx, messageParams())
	if err != nil {
		t.Fatalf("message through the proxy: %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text == "" {
		t.Errorf("message = %+v, want text", msg.Content)
	}
	s := c.Messages.NewStreaming(ctx, messageParams())
	var acc anthropic.Message
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream through the proxy: %v", err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text == "" || acc.Usage.OutputTokens == 0 {
		t.Errorf("streamed message = %+v, want text and usage", acc)
	}
	snap, err := open(t, b, prefix, "anthropic", "claude-sonnet-4-5").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rates := map[pacer.Unit]int64{}
	for _, rs := range snap.Rates {
		rates[rs.Rate.Unit] = rs.Rate.Limit
	}
	if snap.Rate("rpm").Limit != 50 || snap.Rate("tpm").Limit != 0 || rates[pacer.InputTokens] != 40_000 || rates[pacer.OutputTokens] != 8_000 {
		t.Errorf("stored limits: rpm %d, tpm %d, rates %v; want rpm 50, no tpm, input 40000 and output 8000 a minute",
			snap.Rate("rpm").Limit, snap.Rate("tpm").Limit, rates)
	}
	if st := prov.Stats(); st.OK != 2 {
		t.Errorf("provider admitted %d calls, want 2", st.OK)
	}
}

// stripLimits serves h without its rate-limit headers: a provider that
// states no limits.
func stripLimits(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&noLimits{ResponseWriter: w}, r)
	})
}

type noLimits struct {
	http.ResponseWriter
	wrote bool
}

func (n *noLimits) WriteHeader(code int) {
	if n.wrote {
		return
	}
	n.wrote = true
	for k := range n.Header() {
		if l := strings.ToLower(k); strings.Contains(l, "ratelimit") {
			n.Header().Del(k)
		}
	}
	n.ResponseWriter.WriteHeader(code)
}

func (n *noLimits) Write(b []byte) (int, error) {
	n.WriteHeader(http.StatusOK)
	return n.ResponseWriter.Write(b)
}

func (n *noLimits) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// TestOneCallAtATimeUntilLimitsKnown checks that a budget whose limits no
// answer has stated admits one call at a time, across both replicas.
func TestOneCallAtATimeUntilLimitsKnown(t *testing.T) {
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	prov, err := fakeprovider.New(fakeprovider.Config{Latency: 60 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	up := httptestServer(t, stripLimits(prov))
	r1, r2 := startProxy(t, b, prefix, up), startProxy(t, b, prefix, up)
	errs := concurrently(4, func(i int) error { return chat([]replica{r1, r2}[i%2]) })
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if st := prov.Stats(); st.OK != 4 || st.MaxInFlight != 1 {
		t.Errorf("provider: %d OK, at most %d in flight; want 4 OK one at a time", st.OK, st.MaxInFlight)
	}
	if _, err := pacer.Open(context.Background(), b.Client(t), prefix, proxy.BudgetName("openai", secret, "gpt-4o-mini")); !errors.Is(err, pacer.ErrInvalid) || !strings.Contains(err.Error(), "no definition") {
		t.Errorf("pacer.Open = %v, want ErrInvalid saying no definition is stored: no header stated a limit", err)
	}
}

// TestStoredDefinitionWins checks that limits an operator stored are kept
// whatever the headers say.
func TestStoredDefinitionWins(t *testing.T) {
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	ctx := context.Background()
	op, err := pacer.New(b.Client(t), pacer.Config{Name: proxy.BudgetName("openai", secret, "gpt-4o-mini"), KeyPrefix: prefix, Limits: pacer.Limits{RPM: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Define(ctx, pacer.Config{Limits: pacer.Limits{RPM: 7}}); err != nil {
		t.Fatal(err)
	}
	_, up := upstream(t, fakeprovider.Config{RequestLimit: 100, TokenLimit: 50_000})
	r := startProxy(t, b, prefix, up.URL)
	for range 2 {
		if err := chat(r); err != nil {
			t.Fatal(err)
		}
	}
	p := open(t, b, prefix, "openai", "gpt-4o-mini")
	if p.Config().Limits != (pacer.Limits{RPM: 7}) || p.Config().Version != 1 {
		t.Errorf("stored: %v version %d, want the operator's rpm=7, version 1", p.Config().Limits, p.Config().Version)
	}
}

// TestReplicasShareOneBudget runs two replicas on one budget: after the
// first answer teaches the provider's limit of 5 requests, 11 calls spread
// over both replicas get exactly the 4 turns left; the other 7 get the
// proxy's 429, and the provider refuses none.
func TestReplicasShareOneBudget(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		prefix := redistest.Name(t)
		prov, up := upstream(t, fakeprovider.Config{RequestLimit: 5, TokenLimit: 1_000_000})
		rs := []replica{startProxy(t, b, prefix, up.URL, maxWait(100*time.Millisecond)), startProxy(t, b, prefix, up.URL, maxWait(100*time.Millisecond))}
		if err := chat(rs[0]); err != nil {
			t.Fatal(err)
		}
		errs := concurrently(11, func(i int) error { return chat(rs[i%2]) })
		ok, refused := 0, 0
		for _, err := range errs {
			var apiErr *openai.Error
			switch {
			case err == nil:
				ok++
			case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests &&
				apiErr.Response.Header.Get("X-Llmpacer-Refused") != "" && apiErr.Response.Header.Get("Retry-After") != "":
				refused++
				if v := classify.FromError(err); v.Kind != classify.RateLimited || v.RetryAfter <= 0 {
					t.Errorf("classify.FromError(the proxy's 429) = %+v, want RateLimited with a delay", v)
				}
			default:
				t.Errorf("call: %v, want success or the proxy's 429 with Retry-After", err)
			}
		}
		st := prov.Stats()
		if ok != 4 || refused != 7 || st.OK != 5 || st.RateLimited != 0 {
			t.Errorf("%d OK, %d refused by the proxy; provider %d OK, %d 429s; want 4, 7, 5, 0", ok, refused, st.OK, st.RateLimited)
		}
	})
}

// TestRateLimitPausesBothReplicas checks that a provider's 429 through one
// replica holds the other's calls back past their max wait, sending
// nothing upstream, and that the other answers a 429 the provider's SDK
// and package classify read as the provider's own rate limit. The 429
// asks for 10 s: the second replica's call must come inside the pause,
// however loaded the machine.
func TestRateLimitPausesBothReplicas(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		for _, style := range []fakeprovider.Style{fakeprovider.OpenAI, fakeprovider.Anthropic} {
			t.Run(style.String(), func(t *testing.T) {
				prefix := redistest.Name(t)
				prov, up := upstream(t, fakeprovider.Config{Style: style, RequestLimit: 100, TokenLimit: 1_000_000, FaultWait: 10 * time.Second})
				r1 := startProxy(t, b, prefix, up.URL, maxWait(50*time.Millisecond))
				r2 := startProxy(t, b, prefix, up.URL, maxWait(50*time.Millisecond))
				call, code := chat, "rate_limit_exceeded"
				if style == fakeprovider.Anthropic {
					call, code = func(r replica) error {
						_, err := anthropicClient(r).Messages.New(context.Background(), messageParams())
						return err
					}, "rate_limit_error"
				}
				if err := call(r1); err != nil {
					t.Fatal(err)
				}
				if err := prov.Fail(1, http.StatusTooManyRequests); err != nil {
					t.Fatal(err)
				}
				if err := call(r1); classify.FromError(err).Kind != classify.RateLimited || answeredByProxy(err) {
					t.Fatalf("call through replica 1 = %v, want the provider's own 429", err)
				}
				before := prov.Stats().Calls
				err := call(r2)
				if !answeredByProxy(err) {
					t.Fatalf("call through replica 2 = %v, want the proxy's 429", err)
				}
				if v := classify.FromError(err); v.Kind != classify.RateLimited || v.RetryAfter <= 0 || v.Code != code {
					t.Errorf("classify.FromError = %+v, want a rate limit with a delay, code %s", v, code)
				}
				if got := prov.Stats().Calls; got != before {
					t.Errorf("the provider saw %d more calls during the pause, want 0", got-before)
				}
			})
		}
	})
}

// TestQuotaStopReachesBothReplicas checks that an exhausted quota through
// one replica stops the other, which answers with the provider's own
// quota error and sends nothing, for each provider.
func TestQuotaStopReachesBothReplicas(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		for _, style := range []fakeprovider.Style{fakeprovider.OpenAI, fakeprovider.Anthropic} {
			t.Run(style.String(), func(t *testing.T) {
				prefix := redistest.Name(t)
				prov, up := upstream(t, fakeprovider.Config{Style: style, RequestLimit: 100, TokenLimit: 1_000_000})
				r1, r2 := startProxy(t, b, prefix, up.URL), startProxy(t, b, prefix, up.URL)
				call := func(r replica) error {
					if style == fakeprovider.Anthropic {
						_, err := anthropicClient(r).Messages.New(context.Background(), messageParams())
						return err
					}
					return chat(r)
				}
				if err := call(r1); err != nil {
					t.Fatal(err)
				}
				prov.StopQuota()
				if v := classify.FromError(call(r1)); v.Kind != classify.QuotaExhausted {
					t.Fatalf("replica 1 = %+v, want the provider's quota error", v)
				}
				before := prov.Stats().Calls
				err := call(r2)
				if v := classify.FromError(err); v.Kind != classify.QuotaExhausted {
					t.Errorf("replica 2: classify.FromError(%v) = %+v, want QuotaExhausted", err, v)
				}
				if !answeredByProxy(err) {
					t.Errorf("replica 2 = %v, want the proxy's own answer", err)
				}
				if got := prov.Stats().Calls; got != before {
					t.Errorf("the provider saw %d more calls while stopped, want 0", got-before)
				}
			})
		}
	})
}

// answeredByProxy says whether an SDK's error is an answer the proxy gave
// itself, sending nothing upstream.
func answeredByProxy(err error) bool {
	var o *openai.Error
	var a *anthropic.Error
	switch {
	case errors.As(err, &o):
		return o.Response.Header.Get("X-Llmpacer-Refused") != ""
	case errors.As(err, &a):
		return a.Response.Header.Get("X-Llmpacer-Refused") != ""
	}
	return false
}

// TestBearerAndXAPIKeyAreOneKey sends one key as Authorization: Bearer and
// as x-api-key: both calls draw from one budget, so the third call meets
// the budget's end in the proxy, not the provider's 429.
func TestBearerAndXAPIKeyAreOneKey(t *testing.T) {
	b := redistest.Mini(t)
	prov, up := upstream(t, fakeprovider.Config{RequestLimit: 2, TokenLimit: 100_000})
	r := startProxy(t, b, redistest.Name(t), up.URL, maxWait(20*time.Millisecond))
	body := `{"model":"gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	var statuses []int
	var refused string
	for _, h := range [][]string{{"Authorization", "Bearer " + secret}, {"X-Api-Key", secret}, {"Authorization", "bearer " + secret}} {
		status, hdr, _ := send(t, r, "POST", "/openai/v1/chat/completions", body, h...)
		statuses = append(statuses, status)
		refused = hdr.Get("X-Llmpacer-Refused")
	}
	if st := prov.Stats(); statuses[0] != 200 || statuses[1] != 200 || statuses[2] != 429 || refused == "" || st.RateLimited != 0 {
		t.Errorf("statuses %v (last refused by the proxy: %q), provider 429s %d; want 200 200 and the proxy's 429, none from the provider",
			statuses, refused, st.RateLimited)
	}
}
