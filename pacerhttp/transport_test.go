package pacerhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/openai/openai-go/v3"
)

func chatParams(maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:               openai.ChatModelGPT4oMini,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello to the fleet")},
		MaxCompletionTokens: openai.Int(maxTokens),
	}
}

// An openai-go call through the transport reserves its estimate plus its
// output cap, and settles exactly the usage the answer reports.
func TestOpenAISettlesUsage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 1_000_000}, fakeprovider.Config{})
		p, ev := r.pacer()
		c := r.openai(p)
		ctx := context.Background()
		reply, err := c.Chat.Completions.New(ctx, chatParams(200))
		if err != nil {
			t.Fatalf("Chat.Completions.New = %v", err)
		}
		admitted := ev.of(pacer.Admitted)
		if len(admitted) != 1 || admitted[0].Tokens <= 200 || admitted[0].Tokens > 260 {
			t.Fatalf("admitted %+v; want one lease of the prompt estimate plus 200", admitted)
		}
		end := ev.ended(t, 1)[0]
		if end.End != pacer.Settled || end.Used != reply.Usage.TotalTokens || end.Used == 0 {
			t.Errorf("lease ended %v using %d; want settled with the answer's total_tokens %d", end.End, end.Used, reply.Usage.TotalTokens)
		}
		if s := r.provider.Stats(); s.Calls != 1 || s.TokensUsed != reply.Usage.TotalTokens {
			t.Errorf("provider saw %d calls using %d tokens; want 1 using %d", s.Calls, s.TokensUsed, reply.Usage.TotalTokens)
		}
	})
}

// A streamed openai-go call that does not ask for usage is asked for it by
// the transport, and settles exactly what the final chunk reports; every
// chunk reaches the SDK.
func TestOpenAIStreamSettlesUsage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 1_000_000}, fakeprovider.Config{})
		p, ev := r.pacer()
		c := r.openai(p)
		stream := c.Chat.Completions.NewStreaming(context.Background(), chatParams(50))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		stream.Close()
		if acc.Usage.TotalTokens == 0 || len(acc.Choices) == 0 || acc.Choices[0].Message.Content == "" {
			t.Fatalf("accumulated %+v; want text and usage (include_usage added by the transport)", acc.ChatCompletion)
		}
		end := ev.ended(t, 1)[0]
		if end.End != pacer.Settled || end.Used != acc.Usage.TotalTokens {
			t.Errorf("lease ended %v using %d; want settled with the final chunk's %d", end.End, end.Used, acc.Usage.TotalTokens)
		}
	})
}

// Without include_usage (turned off), a stream reports no usage: its lease
// keeps the whole reservation instead of settling 0.
func TestStreamWithoutUsageKeepsReservation(t *testing.T) {
	b := redistest.Mini(t)
	r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 1_000_000}, fakeprovider.Config{})
	p, ev := r.pacer()
	c := r.openai(p, pacerhttp.WithIncludeUsage(false))
	stream := c.Chat.Completions.NewStreaming(context.Background(), chatParams(50))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	stream.Close()
	end := ev.ended(t, 1)[0]
	// A whole stream without usage: settled at its reservation, never 0.
	if end.End != pacer.Settled || end.Used != end.Tokens {
		t.Errorf("lease ended %v using %d of %d; want settled at the reservation, kept whole", end.End, end.Used, end.Tokens)
	}
}

// anthropic-sdk-go, JSON and streamed: usage is input + output (+ cache).
func TestAnthropicSettlesUsage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 1_000_000}, fakeprovider.Config{Style: fakeprovider.Anthropic})
		p, ev := r.pacer()
		c := r.anthropic(p)
		params := anthropic.MessageNewParams{
			Model:     anthropic.ModelClaudeSonnet4_5,
			MaxTokens: 120,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello to the fleet"))},
		}
		msg, err := c.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatalf("Messages.New = %v", err)
		}
		want := msg.Usage.InputTokens + msg.Usage.OutputTokens + msg.Usage.CacheReadInputTokens + msg.Usage.CacheCreationInputTokens
		if end := ev.ended(t, 1)[0]; end.End != pacer.Settled || end.Used != want {
			t.Errorf("JSON: lease ended %v using %d; want settled with %d", end.End, end.Used, want)
		}

		stream := c.Messages.NewStreaming(context.Background(), params)
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		stream.Close()
		want = acc.Usage.InputTokens + acc.Usage.OutputTokens + acc.Usage.CacheReadInputTokens + acc.Usage.CacheCreationInputTokens
		if end := ev.ended(t, 2)[1]; end.End != pacer.Settled || end.Used != want || want == 0 {
			t.Errorf("stream: lease ended %v using %d; want settled with %d", end.End, end.Used, want)
		}
	})
}

// Requests that are not model calls pass through unpaced.
func TestNonModelCallsPassThrough(t *testing.T) {
	b := redistest.Mini(t)
	r := newRig(t, b, pacer.Limits{RPM: 1}, fakeprovider.Config{})
	p, ev := r.pacer()
	hc := &http.Client{Transport: pacerhttp.NewTransport(p, nil)}
	for range 3 {
		resp, err := hc.Get(r.server.URL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := ev.of(pacer.Admitted); len(got) != 0 {
		t.Errorf("%d admissions for GET /v1/models; want none", len(got))
	}
}

// A body that is not JSON gets the default reservation and its lease ends
// exactly once, however the provider answers.
func TestMalformedBodyEndsItsLeaseOnce(t *testing.T) {
	b := redistest.Mini(t)
	r := newRig(t, b, pacer.Limits{RPM: 1000, TPM: 1_000_000}, fakeprovider.Config{})
	p, ev := r.pacer()
	hc := &http.Client{Transport: pacerhttp.NewTransport(p, nil)}
	resp, err := hc.Post(r.server.URL+"/v1/chat/completions", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := ev.of(pacer.Admitted); len(a) != 1 || a[0].Tokens != pacerhttp.DefaultTokens {
		t.Fatalf("admitted %+v; want one lease of DefaultTokens", a)
	}
	if e := ev.ended(t, 1); e[0].End != pacer.Rejected {
		t.Errorf("a 400 answer ended the lease %v; want rejected (tokens back)", e[0].End)
	}
	time.Sleep(20 * time.Millisecond)
	if got := len(ev.of(pacer.Ended)); got != 1 {
		t.Errorf("%d Ended events; want exactly 1", got)
	}
}

// A nil pacer or a bad option fails every model call with ErrInvalid, never
// a panic; other requests still pass.
func TestBadTransportFailsClearly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	b := redistest.Mini(t)
	p, err := pacer.New(b.Client(t), pacer.Config{Name: redistest.Name(t), Limits: pacer.Limits{RPM: 10}})
	if err != nil {
		t.Fatal(err)
	}
	for name, rt := range map[string]http.RoundTripper{
		"nil pacer":     pacerhttp.NewTransport(nil, nil),
		"bad max body":  pacerhttp.NewTransport(p, nil, pacerhttp.WithMaxBody(0)),
		"bad max out":   pacerhttp.NewTransport(p, nil, pacerhttp.WithDefaultMaxOutput(-1)),
		"bad tokens":    pacerhttp.NewTransport(p, nil, pacerhttp.WithDefaultTokens(0)),
		"nil option ok": nil,
	} {
		if rt == nil {
			continue
		}
		hc := &http.Client{Transport: rt}
		_, err := hc.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
		if !errors.Is(err, pacer.ErrInvalid) {
			t.Errorf("%s: model call = %v; want ErrInvalid", name, err)
		}
		resp, err := hc.Get(srv.URL + "/v1/models")
		if err != nil {
			t.Errorf("%s: GET /v1/models = %v; want it passed through", name, err)
		} else {
			resp.Body.Close()
		}
	}
}
