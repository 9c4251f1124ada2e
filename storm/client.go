package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
)

// Request headers the storm adds for its own recorder (recorder.go); the
// simulated provider ignores them.
const (
	chargeHeader = "X-Storm-Charge" // prompt + max_tokens, what the provider's limit counts
	callerHeader = "X-Storm-Caller" // "outside" for the caller that bypasses the budget
)

// chatClient is the smallest OpenAI-style client the storm needs: it posts
// a chat request and returns the usage, or an error that carries the
// response the way the official SDKs' errors do, so classify.FromError
// reads it.
type chatClient struct {
	url string
	hc  *http.Client
}

// usage is a call's real token count, as the answer reports it.
type usage struct{ prompt, output int64 }

func (u usage) total() int64 { return u.prompt + u.output }

// retryAfter is the delay a refusal asked for, if any, read as OpenAI's own
// SDKs read it: retry-after-ms, which is exact, over retry-after, its
// rounding up to whole seconds. classify.ParseRetryAfter reads them the
// same way, so the naive client and retry.Run wait the same delays.
func retryAfter(e *fakeprovider.APIError) (time.Duration, bool) {
	return classify.ParseRetryAfter(e.Response.Header, time.Now())
}

func newChatClient(url string, conns int) *chatClient {
	// Enough idle connections for every worker: the default two per host
	// would make most calls dial a new connection, and the dial time would
	// blur what the provider's limit does.
	tr := &http.Transport{MaxIdleConns: conns + 16, MaxIdleConnsPerHost: conns + 16, IdleConnTimeout: time.Minute}
	return &chatClient{url: url, hc: &http.Client{Transport: tr}}
}

func (c *chatClient) close() { c.hc.CloseIdleConnections() }

// warm opens n connections to the server at once and leaves them idle in
// the pool, so that the first calls of the run do not pay for a dial the
// later ones skip. The recorder answers the warm-up path itself: the
// provider never sees it.
func (c *chatClient) warm(ctx context.Context, n int) error {
	errs := make(chan error, n)
	for range n {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+warmPath, nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := c.hc.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return fmt.Errorf("warming connections to the provider: %w", err)
		}
	}
	return nil
}

// chat sends one call for j. outside marks the caller that bypasses the
// budget, for the recorder.
func (c *chatClient) chat(ctx context.Context, j job, outside bool) (usage, error) {
	h := http.Header{}
	h.Set(chargeHeader, strconv.FormatInt(j.charge(), 10))
	if outside {
		h.Set(callerHeader, "outside")
	}
	u, err := fakeprovider.Do(ctx, c.hc, c.url, fakeprovider.Call{Prompt: j.prompt, Output: j.output, MaxTokens: j.maxTokens, Header: h})
	return usage{prompt: u.PromptTokens, output: u.OutputTokens}, err
}
