package main

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
)

// The shared rows run retry.Run with its default classifier, as users get
// it. That is right only if classify.FromError reads the provider's 429 as
// the exact retry-after-ms, not as retry-after, its rounding up to whole
// seconds: a pause of a second for a 429 that asked for a few milliseconds
// would be the whole result. The per-worker client must read the same.
func TestDefaultClassifierReadsExactDelay(t *testing.T) {
	for _, size := range []int64{1000, 7000} { // a wait under a second, and one of about two
		fp, _, srv, err := startProvider(fakeprovider.Config{TokenLimit: 10_000, Window: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := newChatClient(srv.URL, 1)
		var refused error
		for range 20 {
			if _, refused = c.chat(context.Background(), job{prompt: 0, maxTokens: size, output: size}, false); refused != nil {
				break
			}
		}
		c.close()
		srv.Close()
		var ae *fakeprovider.APIError
		if !errors.As(refused, &ae) || fp.Stats().RateLimited != 1 {
			t.Fatalf("jobs of %d: no 429 from a full provider: %v", size, refused)
		}
		ms, err := strconv.ParseInt(ae.Response.Header.Get("retry-after-ms"), 10, 64)
		if err != nil || ae.Response.Header.Get("retry-after") == "" {
			t.Fatalf("jobs of %d: the 429 lacks retry-after-ms or retry-after: %v", size, ae.Response.Header)
		}
		want := time.Duration(ms) * time.Millisecond
		v := classify.FromError(refused)
		if v.Kind != classify.RateLimited || v.RetryAfter != want {
			t.Errorf("jobs of %d: classify.FromError = %v, %v; want RateLimited, %v (retry-after-ms; retry-after says %ss)",
				size, v.Kind, v.RetryAfter, want, ae.Response.Header.Get("retry-after"))
		}
		if got, ok := retryAfter(ae); !ok || got != want {
			t.Errorf("jobs of %d: the per-worker client reads %v, %v; want %v", size, got, ok, want)
		}
	}
}
