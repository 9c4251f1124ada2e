package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// sdkRig is the openai-go clients of one SDK row: one per worker, each
// standing for a process. Through the transport each has its own Pacer
// on the shared budget, as processes would.
type sdkRig struct {
	clients []openai.Client
	stream  bool
	tally   *paceTally // nil without pacing
}

// newSDKRig builds the clients of row v. base is the connection pool the
// storm warmed; every client sends through it, below the transport.
func newSDKRig(pl *plan, v variant, be *backend, cfg pacer.Config, url string, base http.RoundTripper) (*sdkRig, error) {
	s := &sdkRig{stream: pl.stream}
	var opts []pacerhttp.Option
	if v.client == clientTransport {
		s.tally = &paceTally{}
		cfg.Observe = s.tally.observe
		if v.noHeaderSync {
			opts = append(opts, pacerhttp.WithHeaderSync(false))
		}
		if v.noIncludeUsage {
			opts = append(opts, pacerhttp.WithIncludeUsage(false))
		}
	}
	counted := countingTransport{next: base}
	// One more client than workers, for direct jobs (see runJobs).
	for range pl.p.workers + 1 {
		var rt http.RoundTripper = counted
		if v.client == clientTransport {
			p, err := pacer.New(be.rdb, cfg)
			if err != nil {
				return nil, err
			}
			rt = pacerhttp.NewTransport(p, counted, opts...)
		}
		copts := []option.RequestOption{
			option.WithBaseURL(url + "/v1/"), option.WithAPIKey("sk-storm"),
			option.WithHTTPClient(&http.Client{Transport: firstByteTransport{next: rt}}),
		}
		if pl.set["retries"] {
			copts = append(copts, option.WithMaxRetries(pl.p.retries))
		}
		s.clients = append(s.clients, openai.NewClient(copts...))
	}
	return s, nil
}

// job sends j with worker w's client, as a user's code would: one call,
// the SDK's retries inside it.
func (s *sdkRig) job(ctx context.Context, w int, j job) jobResult {
	r := jobResult{priority: j.priority, ran: true, start: time.Now()}
	tr := &tracker{}
	ctx = context.WithValue(ctx, trackerKey{}, tr)
	params := openai.ChatCompletionNewParams{
		Model:               sdkModel,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(j.text)},
		MaxCompletionTokens: openai.Int(j.maxTokens),
	}
	opts := []option.RequestOption{
		option.WithHeader(chargeHeader, strconv.FormatInt(j.charge(), 10)),
		option.WithHeader(fakeprovider.PromptTokensHeader, strconv.FormatInt(j.prompt, 10)),
		option.WithHeader(fakeprovider.OutputTokensHeader, strconv.FormatInt(j.output, 10)),
	}
	c := s.clients[w]
	if s.stream {
		st := c.Chat.Completions.NewStreaming(ctx, params, opts...)
		for st.Next() {
		}
		r.err = st.Err()
		_ = st.Close()
	} else {
		_, r.err = c.Chat.Completions.New(ctx, params, opts...)
	}
	r.end = time.Now()
	r.attempts, r.inCalls, r.firstByte, r.answered = tr.attempts, tr.inCalls, tr.firstByte, tr.answered
	return r
}

// tracker is what one job's HTTP attempts did, filled in by the
// transports below and above pacerhttp. A job runs on one goroutine, and
// the SDK sends and reads on it, so no lock is needed.
type tracker struct {
	attempts  int           // requests sent to the provider
	inCalls   time.Duration // from sending each to its answer's headers
	firstByte time.Time     // the first byte of a successful answer's body, as the SDK read it
	answered  time.Time     // the headers of the last successful answer arrived from the wire
}

type trackerKey struct{}

func trackerOf(req *http.Request) *tracker {
	tr, _ := req.Context().Value(trackerKey{}).(*tracker)
	return tr
}

// countingTransport sits below pacerhttp, on the wire: every request it
// sends reached the provider.
type countingTransport struct{ next http.RoundTripper }

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t := time.Now()
	resp, err := c.next.RoundTrip(req)
	if tr := trackerOf(req); tr != nil {
		now := time.Now()
		tr.attempts++
		tr.inCalls += now.Sub(t)
		if err == nil && resp.StatusCode/100 == 2 {
			tr.answered = now
		}
	}
	return resp, err
}

// firstByteTransport sits above pacerhttp, where the SDK reads: it notes
// when the first byte of a successful answer's body reaches the SDK.
type firstByteTransport struct{ next http.RoundTripper }

func (f firstByteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(req)
	if tr := trackerOf(req); err == nil && tr != nil && resp.StatusCode/100 == 2 {
		resp.Body = &firstByteBody{ReadCloser: resp.Body, tr: tr}
	}
	return resp, err
}

type firstByteBody struct {
	io.ReadCloser
	tr *tracker
}

func (b *firstByteBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.tr.firstByte.IsZero() {
		b.tr.firstByte = time.Now()
	}
	return n, err
}

// paceTally counts what a row's Pacers observed (Config.Observe): the
// tokens each admission reserved, and what each lease ended with.
type paceTally struct {
	admitted, reserved   atomic.Int64
	ended, used          atomic.Int64
	settled, kept, given atomic.Int64
	pauses               atomic.Int64
}

func (t *paceTally) observe(e pacer.Event) {
	switch e.Kind {
	case pacer.Admitted:
		t.admitted.Add(1)
		t.reserved.Add(e.Tokens)
	case pacer.Ended:
		t.ended.Add(1)
		t.used.Add(e.Used)
		switch e.End {
		case pacer.Settled:
			t.settled.Add(1)
		case pacer.Released, pacer.Expired:
			t.kept.Add(1)
		default:
			t.given.Add(1)
		}
	case pacer.Paused:
		t.pauses.Add(1)
	}
}

// paceCount is a paceTally as the report gives it.
type paceCount struct {
	Admitted       int64 `json:"admitted"`
	TokensReserved int64 `json:"tokens_reserved"` // Admitted events' Tokens
	Ended          int64 `json:"ended"`
	TokensUsed     int64 `json:"tokens_used"` // Ended events' Used: settled usage, or the reservation kept
	Settled        int64 `json:"settled"`     // leases settled with the answer's usage
	Kept           int64 `json:"kept"`        // released or expired: the whole reservation kept
	GivenBack      int64 `json:"given_back"`  // rejected or canceled: nothing charged
	Pauses         int64 `json:"pauses"`
}

func (t *paceTally) count() *paceCount {
	return &paceCount{
		Admitted: t.admitted.Load(), TokensReserved: t.reserved.Load(),
		Ended: t.ended.Load(), TokensUsed: t.used.Load(),
		Settled: t.settled.Load(), Kept: t.kept.Load(), GivenBack: t.given.Load(), Pauses: t.pauses.Load(),
	}
}

// describeSDK says how an SDK row is set up, for the report.
func describeSDK(v variant, cfg pacer.Config, exact bool) string {
	if v.client != clientTransport {
		return "each worker: its own openai-go client, nothing between it and the provider"
	}
	s := "each worker: its own Pacer and pacerhttp.NewTransport; " + describeBudget(cfg, exact)
	if v.noHeaderSync {
		s += "; no header sync"
	}
	if v.noIncludeUsage {
		s += "; no include_usage"
	}
	return s
}

// waitFor waits up to d for the row's leases to have ended: a lease ends
// as the SDK reads or closes the answer, or in the background if Redis
// failed then.
func (t *paceTally) waitFor(d time.Duration) error {
	deadline := time.Now().Add(d)
	for t.ended.Load() < t.admitted.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d leases of %d still open %v after the last job", t.admitted.Load()-t.ended.Load(), t.admitted.Load(), d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}
