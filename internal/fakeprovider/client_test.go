package fakeprovider

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	for _, style := range []Style{OpenAI, Anthropic} {
		p, err := New(Config{TokenLimit: 1000, Window: time.Minute, Style: style})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p)
		u, err := Do(context.Background(), srv.Client(), srv.URL, Call{Style: style, Prompt: 300, Output: 200, MaxTokens: 500})
		if err != nil || u != (Usage{PromptTokens: 300, OutputTokens: 200}) {
			t.Errorf("%v: Do() = %+v, %v; want 300 + 200 tokens", style, u, err)
		}
		_, err = Do(context.Background(), srv.Client(), srv.URL, Call{Style: style, Prompt: 300, Output: 200, MaxTokens: 500})
		var ae *APIError
		if !errors.As(err, &ae) || ae.HTTPResponse().StatusCode != 429 || ae.RawJSON() == "" {
			t.Errorf("%v: Do() over the limit = %v; want an *APIError with the 429", style, err)
		}
		srv.Close()
	}
}
