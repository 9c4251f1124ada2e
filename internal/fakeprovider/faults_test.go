package fakeprovider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// sdkStream streams one answer through a real SDK and returns the text
// it read, whether it saw any usage, and the stream's Err.
type sdkStream func(ctx context.Context, srv *httptest.Server) (text string, usage bool, err error)

var sdkStreams = []struct {
	name  string
	style Style
	ep    Endpoint
	run   sdkStream
}{
	{"chat", OpenAI, ChatCompletions, func(ctx context.Context, srv *httptest.Server) (string, bool, error) {
		params := chatParams(8, 1)
		params.StreamOptions.IncludeUsage = openai.Bool(true)
		s := openaiClient(srv, "/v1/").Chat.Completions.NewStreaming(ctx, params)
		defer s.Close()
		var text string
		var usage bool
		for s.Next() {
			for _, c := range s.Current().Choices {
				text += c.Delta.Content
			}
			usage = usage || s.Current().JSON.Usage.Valid()
		}
		return text, usage, s.Err()
	}},
	{"completions", OpenAI, Completions, func(ctx context.Context, srv *httptest.Server) (string, bool, error) {
		params := completionParams(8, 1)
		params.StreamOptions.IncludeUsage = openai.Bool(true)
		s := openaiClient(srv, "/v1/").Completions.NewStreaming(ctx, params)
		defer s.Close()
		var text string
		var usage bool
		for s.Next() {
			for _, c := range s.Current().Choices {
				text += c.Text
			}
			usage = usage || s.Current().JSON.Usage.Valid()
		}
		return text, usage, s.Err()
	}},
	{"responses", OpenAI, Responses, func(ctx context.Context, srv *httptest.Server) (string, bool, error) {
		s := openaiClient(srv, "/v1/").Responses.NewStreaming(ctx, responseParams(8))
		defer s.Close()
		var text string
		var usage bool
		for s.Next() {
			text += s.Current().Delta
			usage = usage || s.Current().Response.JSON.Usage.Valid()
		}
		return text, usage, s.Err()
	}},
	{"messages", Anthropic, Messages, func(ctx context.Context, srv *httptest.Server) (string, bool, error) {
		s := anthropicClient(srv, tokens{}).Messages.NewStreaming(ctx, messageParams(8))
		defer s.Close()
		var text string
		var usage bool
		for s.Next() {
			ev := s.Current()
			text += ev.Delta.Text
			usage = usage || ev.Type == "message_delta"
		}
		return text, usage, s.Err()
	}},
}

func TestCutStreams(t *testing.T) {
	for _, tc := range sdkStreams {
		t.Run(tc.name, func(t *testing.T) {
			p, srv := startServer(t, Config{Style: tc.style, TokenLimit: 1000})
			if err := p.CutStreams(1, 4); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			text, usage, err := tc.run(ctx, srv)
			if !errors.Is(err, io.ErrUnexpectedEOF) || usage || text == wantText(8) {
				t.Errorf("cut stream: text %q, usage seen %v, Err() = %v; want part of the text, no usage, unexpected EOF",
					text, usage, err)
			}
			// Only the next stream is cut.
			text, usage, err = tc.run(ctx, srv)
			if err != nil || !usage || text != wantText(8) {
				t.Errorf("next stream: text %q, usage seen %v, Err() = %v; want the whole answer", text, usage, err)
			}
			s := p.Stats()
			es := s.Endpoints[tc.ep]
			if s.StreamsCut != 1 || es.StreamsCut != 1 || es.OK != 2 || es.Calls != 2 {
				t.Errorf("Stats: StreamsCut %d, endpoint %+v; want 1 cut of 2 admitted calls", s.StreamsCut, es)
			}
		})
	}
}

// TestCutBeforeLastEvent checks that a cut asked after more events than
// the answer has still drops the last one, so the client always sees an
// error.
func TestCutBeforeLastEvent(t *testing.T) {
	p, srv := startServer(t, Config{Style: Anthropic})
	if err := p.CutStreams(1, 1000); err != nil {
		t.Fatal(err)
	}
	text, _, err := sdkStreams[3].run(context.Background(), srv)
	if !errors.Is(err, io.ErrUnexpectedEOF) || text != wantText(8) {
		t.Errorf("text %q, Err() = %v; want the whole text, then unexpected EOF before message_stop", text, err)
	}
}

func TestCutStreamsValidates(t *testing.T) {
	p := newTestProvider(t, Config{}, nil)
	for _, args := range [][2]int{{-1, 0}, {1, -1}} {
		if err := p.CutStreams(args[0], args[1]); err == nil {
			t.Errorf("CutStreams(%d, %d) = nil, want an error", args[0], args[1])
		}
	}
}

// sdkCall makes one non-streaming call through a real SDK.
func sdkCall(style Style, srv *httptest.Server) error {
	ctx := context.Background()
	if style == Anthropic {
		_, err := anthropicClient(srv, tokens{}).Messages.New(ctx, messageParams(8))
		return err
	}
	_, err := openaiClient(srv, "/v1/").Chat.Completions.New(ctx, chatParams(8, 1))
	return err
}

func TestStopQuota(t *testing.T) {
	for _, style := range []Style{OpenAI, Anthropic} {
		t.Run(style.String(), func(t *testing.T) {
			p, srv := startServer(t, Config{Style: style, TokenLimit: 1000})
			p.StopQuota()
			err := sdkCall(style, srv)
			if v := classify.FromError(err); v.Kind != classify.QuotaExhausted {
				t.Errorf("classify.FromError(%v) = %v, want QuotaExhausted", err, v)
			}
			if _, err := openaiClient(srv, "/v1/").Models.List(context.Background()); style == OpenAI && err != nil {
				t.Errorf("Models.List() under StopQuota error = %v, want the list", err)
			}
			p.ResumeQuota()
			if err := sdkCall(style, srv); err != nil {
				t.Errorf("call after ResumeQuota error = %v", err)
			}
			s := p.Stats()
			if s.QuotaErrors != 1 || s.TokensAdmitted != 8+2 {
				t.Errorf("Stats: %d quota errors, %d admitted; want 1 and only the call after ResumeQuota", s.QuotaErrors, s.TokensAdmitted)
			}
		})
	}
}

func TestQuotaTokensThroughSDK(t *testing.T) {
	for _, style := range []Style{OpenAI, Anthropic} {
		p, srv := startServer(t, Config{Style: style, QuotaTokens: 5})
		if err := sdkCall(style, srv); err != nil {
			t.Fatalf("%v: first call error = %v", style, err)
		}
		err := sdkCall(style, srv)
		if v := classify.FromError(err); v.Kind != classify.QuotaExhausted || v.Retryable() {
			t.Errorf("%v: classify.FromError(%v) = %+v, want QuotaExhausted, no retry", style, err, v)
		}
		p.ResumeQuota() // lifts StopQuota only
		if err := sdkCall(style, srv); err == nil {
			t.Errorf("%v: call after ResumeQuota succeeded; a used-up QuotaTokens stays used up", style)
		}
	}
}

// TestRemainingSeesOutsideCallers checks that the rate-limit headers count
// every caller of the provider: a call from outside the SDK lowers what
// the SDK's next answer reports.
func TestRemainingSeesOutsideCallers(t *testing.T) {
	for _, style := range []Style{OpenAI, Anthropic} {
		t.Run(style.String(), func(t *testing.T) {
			p, srv := startServer(t, Config{Style: style, TokenLimit: 1000, RequestLimit: 10})
			remaining := func() (tok, req string) {
				var resp *http.Response
				ctx := context.Background()
				if style == Anthropic {
					c := anthropicClient(srv, tokens{prompt: 2})
					if _, err := c.Messages.New(ctx, messageParams(8), aoption.WithResponseInto(&resp)); err != nil {
						t.Fatal(err)
					}
					return resp.Header.Get("anthropic-ratelimit-tokens-remaining"), resp.Header.Get("anthropic-ratelimit-requests-remaining")
				}
				c := openaiClient(srv, "/v1/", tokens{prompt: 2}.openaiOptions()...)
				if _, err := c.Chat.Completions.New(ctx, chatParams(8, 1), option.WithResponseInto(&resp)); err != nil {
					t.Fatal(err)
				}
				return resp.Header.Get("x-ratelimit-remaining-tokens"), resp.Header.Get("x-ratelimit-remaining-requests")
			}
			if tok, req := remaining(); tok != "990" || req != "9" {
				t.Fatalf("first answer: remaining tokens %s requests %s, want 990 9", tok, req)
			}
			if _, err := Do(context.Background(), srv.Client(), srv.URL, Call{Style: style, Prompt: 100, Output: 1, MaxTokens: 200}); err != nil {
				t.Fatalf("outside call: %v", err)
			}
			if tok, req := remaining(); tok != "680" || req != "7" {
				t.Errorf("after an outside call of 300 tokens: remaining tokens %s requests %s, want 680 7", tok, req)
			}
			if got := p.Stats().Calls; got != 3 {
				t.Errorf("Stats().Calls = %d, want 3", got)
			}
		})
	}
}
