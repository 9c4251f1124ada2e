package classify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// The SDKs are test-only dependencies: this file checks FromError against
// the error values they really return, which a hand-made fake got wrong
// (openai-go strips the {"error": ...} wrapper before RawJSON returns).

// sdkCall makes one call through an SDK client pointed at baseURL and
// returns its error.
type sdkCall struct {
	name string
	call func(ctx context.Context, baseURL string, hc *http.Client) error
}

var (
	viaOpenAI          = sdkCall{"openai-go", openaiChat}
	viaAnthropic       = sdkCall{"anthropic-sdk-go", anthropicMessage}
	viaAnthropicStream = sdkCall{"anthropic-sdk-go stream", anthropicStream}
)

// openaiChat is a chat completion through openai-go. Azure OpenAI answers go
// through it too: openai-go's azure package only rewrites the URL and the
// auth header, and importing it would pull in the Azure SDK.
func openaiChat(ctx context.Context, baseURL string, hc *http.Client) error {
	c := openai.NewClient(ooption.WithBaseURL(baseURL), ooption.WithAPIKey("sk-test"),
		ooption.WithMaxRetries(0), ooption.WithHTTPClient(hc))
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4oMini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	return err
}

// anthropicMessage is a message through anthropic-sdk-go.
func anthropicMessage(ctx context.Context, baseURL string, hc *http.Client) error {
	c := anthropicClient(baseURL, hc)
	_, err := c.Messages.New(ctx, anthropicParams())
	return err
}

// anthropicStream is a streamed message through anthropic-sdk-go, whose
// error event arrives after a 200.
func anthropicStream(ctx context.Context, baseURL string, hc *http.Client) error {
	c := anthropicClient(baseURL, hc)
	s := c.Messages.NewStreaming(ctx, anthropicParams())
	defer s.Close()
	for s.Next() {
	}
	return s.Err()
}

func anthropicClient(baseURL string, hc *http.Client) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(baseURL), aoption.WithAPIKey("sk-ant-test"),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(hc))
}

func anthropicParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	}
}

// sdkCalls says which SDK calls a recorded response goes through, or why
// none does.
func sdkCalls(r providerResponse) (calls []sdkCall, skip string) {
	switch {
	case r.status == 0:
		return nil, "a status of 0 cannot be sent over HTTP"
	case r.status < 400 && r.want.Kind == OK:
		return nil, "a success is no error to an SDK"
	case r.status < 400:
		if r.want.Provider != ProviderAnthropic {
			return nil, "openai-go reports a stream's error event as text only (ssestream.StreamError)"
		}
		return []sdkCall{viaAnthropicStream}, ""
	}
	switch r.want.Provider {
	case ProviderOpenAI, ProviderAzure:
		// Mistral's flat answer is guessed as OpenAI's too, and openai-go
		// pointed at its URL is how Go programs call it.
		return []sdkCall{viaOpenAI}, ""
	case ProviderAnthropic:
		return []sdkCall{viaAnthropic}, ""
	case "":
		// A proxy's page or an unparseable body reaches users of either SDK.
		return []sdkCall{viaOpenAI, viaAnthropic}, ""
	}
	return nil, "no official Go SDK for " + r.want.Provider + " is a dependency here"
}

// recorder keeps the last response its client received, body included, so
// that FromHTTP sees exactly what the SDK saw.
type recorder struct {
	status int
	header http.Header
	body   []byte
}

func (rec *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	rec.status, rec.header, rec.body = resp.StatusCode, resp.Header.Clone(), body
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func TestFromErrorSDK(t *testing.T) {
	ran := map[string]int{}
	for _, tt := range providerResponses {
		calls, skip := sdkCalls(tt)
		if skip != "" {
			t.Logf("%s: not sent through an SDK: %s", tt.name, skip)
			continue
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for k, vs := range tt.header {
				w.Header()[k] = vs
			}
			// Anthropic's resets are instants, read against the Date the
			// answer carries; the fixtures were recorded at testNow.
			w.Header().Set("Date", testNow.Format(http.TimeFormat))
			if w.Header().Get("Content-Type") == "" {
				w.Header().Set("Content-Type", "application/json")
				if tt.status < 400 {
					w.Header().Set("Content-Type", "text/event-stream")
				}
			}
			w.WriteHeader(tt.status)
			io.WriteString(w, tt.body)
		}))
		for _, sdk := range calls {
			t.Run(sdk.name+"/"+tt.name, func(t *testing.T) {
				ran[sdk.name]++
				rec := &recorder{}
				err := sdk.call(t.Context(), srv.URL, &http.Client{Transport: rec})
				if err == nil {
					t.Fatalf("%s call error = nil, want the %d answer as an error", sdk.name, tt.status)
				}
				want := fromHTTPAt(rec.status, rec.header, rec.body, testNow)
				// The answer as received must still be the fixture, or this
				// test would check the server's additions instead.
				fixture := want
				fixture.Message = ""
				if diff := cmp.Diff(tt.want, fixture); diff != "" {
					t.Fatalf("FromHTTP on the received answer mismatch (-fixture +received):\n%s", diff)
				}
				for _, e := range []error{err, fmt.Errorf("summarize: %w", err)} {
					got := fromErrorAt(e, testNow)
					if want.Message == "" {
						// With no message in the body, FromError falls back
						// to the error's text, which FromHTTP does not have.
						got.Message = ""
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("FromError(%v) differs from FromHTTP on its response (-FromHTTP +FromError):\n%s", e, diff)
					}
				}
				// FromError may read the body the SDK kept; the caller must
				// still find it there.
				if d, ok := err.(responseDumper); ok && tt.status >= 400 {
					if dump := d.DumpResponse(true); !bytes.HasSuffix(dump, rec.body) {
						t.Errorf("after FromError, DumpResponse(true) = %q, want it to end with the body %q", dump, rec.body)
					}
				}
			})
		}
		srv.Close()
	}
	t.Logf("responses sent through each SDK: %v", ran)
	if ran[viaOpenAI.name] == 0 || ran[viaAnthropic.name] == 0 {
		t.Errorf("responses sent through each SDK: %v, want some through both", ran)
	}
}

// FuzzFromErrorSDK feeds hostile bodies to the SDKs' own error types, as
// their UnmarshalJSON fills them, with no response behind them.
func FuzzFromErrorSDK(f *testing.F) {
	for _, b := range seedBodies {
		f.Add(429, b)
	}
	f.Add(400, `{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}`)
	f.Add(429, `{"type":"tokens","code":"rate_limit_exceeded","message":"cut`)
	f.Fuzz(func(t *testing.T, status int, raw string) {
		oe := &openai.Error{StatusCode: status}
		if oe.UnmarshalJSON([]byte(raw)) == nil {
			checkVerdict(t, fromErrorAt(oe, testNow))
		}
		ae := &anthropic.Error{StatusCode: status}
		if ae.UnmarshalJSON([]byte(raw)) == nil {
			checkVerdict(t, fromErrorAt(ae, testNow))
		}
	})
}
