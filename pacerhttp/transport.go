package pacerhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/estimate"
	"github.com/llmpacer/llmpacer/pacer"
)

// NewTransport returns an http.RoundTripper that paces the model calls sent
// through it on p's budget and sends them with base (http.DefaultTransport
// if nil). Requests that are not model calls go to base unpaced. See the
// package doc for what it does with each call.
//
// A nil p or an invalid option does not panic: every model call then fails
// with an error matching pacer.ErrInvalid that says what to fix.
func NewTransport(p *pacer.Pacer, base http.RoundTripper, opts ...Option) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &transport{p: p, base: base, cfg: defaults()}
	for _, o := range opts {
		if o != nil {
			o(&t.cfg)
		}
	}
	t.err = t.cfg.check()
	if p == nil {
		t.err = fmt.Errorf("%w: pacerhttp.NewTransport: the pacer is nil; pass the *pacer.Pacer of the budget to pace", pacer.ErrInvalid)
	}
	t.sync.p = p
	return t
}

// check validates the options.
func (c config) check() error {
	switch {
	case c.defaultMaxOutput <= 0:
		return fmt.Errorf("%w: pacerhttp.WithDefaultMaxOutput(%d): must be positive", pacer.ErrInvalid, c.defaultMaxOutput)
	case c.defaultTokens <= 0:
		return fmt.Errorf("%w: pacerhttp.WithDefaultTokens(%d): must be positive", pacer.ErrInvalid, c.defaultTokens)
	case c.maxBody <= 0:
		return fmt.Errorf("%w: pacerhttp.WithMaxBody(%d): must be positive", pacer.ErrInvalid, c.maxBody)
	}
	if _, err := estimate.New("", c.estimateOpts...); err != nil {
		return fmt.Errorf("%w: pacerhttp.WithEstimateOptions: %v", pacer.ErrInvalid, err)
	}
	return nil
}

type transport struct {
	p    *pacer.Pacer
	base http.RoundTripper
	cfg  config
	err  error    // a nil pacer or a bad option: every model call fails with it
	ests sync.Map // model name → *estimate.Estimator
	sync syncer
	// g, for NewGroupTransport, routes each call to a deployment, whose
	// target and syncer are in to (p is then g's first deployment).
	g  *pacer.Group
	to map[*pacer.Pacer]*target
}

// estimator returns the estimator for a model, made once per name.
func (t *transport) estimator(model string) *estimate.Estimator {
	if e, ok := t.ests.Load(model); ok {
		return e.(*estimate.Estimator)
	}
	e, err := estimate.New(model, t.cfg.estimateOpts...)
	if err != nil { // the options were checked: cannot happen
		e = &estimate.Estimator{}
	}
	v, _ := t.ests.LoadOrStore(model, e)
	return v.(*estimate.Estimator)
}

// RoundTrip paces one HTTP attempt.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, urlModel := recognize(req)
	if a == apiNone {
		return t.base.RoundTrip(req)
	}
	if t.err != nil {
		closeBody(req)
		return nil, t.err
	}
	ctx := req.Context()
	out, c, parsed, err := t.prepare(req, a, urlModel)
	if err != nil {
		return nil, err
	}
	// The prompt and the output cap apart, so that a budget with input and
	// output rates (Anthropic's ITPM and OTPM) charges each its own.
	r := request(ctx, t.p, t.cfg.defaultTokens)
	if parsed {
		r.Model = c.Model // for Config.Weights
		r.Tokens, r.Input, r.Output = 0, max(c.Prompt, 0), t.cfg.defaultMaxOutput
		if c.HasMaxOutput {
			r.Output = max(c.MaxOutput, 0)
		}
	}
	at := &attempt{a: a, c: c, parsed: parsed, r: r, tokens: r.Tokens + r.Input + r.Output, src: *out}
	l, p, base, err := t.acquire(ctx, r, out)
	if err != nil {
		closeBody(out)
		return nil, err
	}
	tried := []*pacer.Pacer{p}
	for {
		resp, v, failed, err := t.send(ctx, at, out, l, p, base)
		if err != nil || !failed {
			return resp, err
		}
		// In a group, a deployment's refusal goes on to another with room
		// before the SDK sees it: the SDK's own retry would wait out the
		// Retry-After and be routed back to the same deployment.
		if l, p, base, out = t.elsewhere(ctx, at, v, tried); l == nil {
			return resp, nil
		}
		discard(resp)
		tried = append(tried, p)
	}
}

// attempt is one HTTP attempt of a model call: what the transport read of
// it, its reservation, and the request before any deployment's rewrite
// (with its replayable body), from which a call sent on elsewhere is made.
type attempt struct {
	a      api
	c      call
	parsed bool
	r      pacer.Request
	tokens int64
	src    http.Request
}

// send sends out with base on p's budget, holding l. A failed answer comes
// back with its verdict and failed true, l ended; a success with its body
// metered (l ends when the SDK has read it).
func (t *transport) send(ctx context.Context, at *attempt, out *http.Request, l *pacer.Lease, p *pacer.Pacer, base http.RoundTripper) (*http.Response, classify.Verdict, bool, error) {
	k := keep(l)
	resp, err := base.RoundTrip(out)
	if err != nil {
		// Sent or not, the provider may have counted it: Fail keeps the
		// reservation, as for a timeout.
		k.stop()
		_ = l.Fail(ctx, classify.FromError(err), err)
		if ctx.Err() == nil {
			t.cooldown(ctx, p) // the deployment did not answer
		}
		return nil, classify.Verdict{}, false, err
	}
	var rl *classify.RateLimits
	if t.cfg.headerSync {
		h := classify.ParseHeaders(resp.Header, time.Now())
		rl = &h
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		k.stop()
		if rl != nil {
			t.syncer(p).push(*rl)
		}
		return resp, t.failed(ctx, resp, p, l), true, nil
	}
	stream := at.parsed && at.c.Stream || at.a == apiGeminiStream ||
		strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	k.answered()
	// A success's headers are synced once the caller has the answer's
	// first bytes (see meter.sync): the Sync starts a goroutine and a
	// Redis call, which must not run on the way to the first byte.
	b := &meter{t: t, p: p, ctx: ctx, l: l, k: k, a: at.a, tokens: at.tokens, rc: resp.Body, rl: rl}
	if stream {
		b.scan = newStreamScanner(at.a)
	}
	resp.Body = b
	return resp, classify.Verdict{}, false, nil
}

// prepare reads the body of a model call and returns the request to send:
// a shallow copy with a replayable body (with include_usage added to an
// OpenAI stream that lacks it). parsed says whether the body was read and
// understood; if not, the call gets the default reservation.
func (t *transport) prepare(req *http.Request, a api, urlModel string) (out *http.Request, c call, parsed bool, err error) {
	out = new(http.Request)
	*out = *req
	if req.Body == nil || req.Body == http.NoBody {
		return out, c, false, nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, t.cfg.maxBody+1))
	if err != nil {
		req.Body.Close()
		return nil, c, false, fmt.Errorf("pacerhttp: reading the request body: %w", err)
	}
	if int64(len(body)) > t.cfg.maxBody {
		// Too large to estimate: sent as it is, the part read first.
		out.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
		return out, c, false, nil
	}
	req.Body.Close()
	c, err = parseRequest(a, urlModel, body, t.estimator)
	parsed = err == nil
	if parsed && c.Stream && t.cfg.includeUsage && !c.WantsUsage && (a == apiOpenAIChat || a == apiOpenAICompletions) {
		body, _ = withIncludeUsage(body)
	}
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	return out, c, parsed, nil
}

// failed answers a provider's refusal for the whole fleet, puts the part
// read to classify it back, so that the SDK gets the answer unchanged, and
// returns its verdict.
func (t *transport) failed(ctx context.Context, resp *http.Response, p *pacer.Pacer, l *pacer.Lease) classify.Verdict {
	head, _ := io.ReadAll(io.LimitReader(resp.Body, classify.MaxBodyBytes))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	v := classify.FromHTTP(resp.StatusCode, resp.Header, head)
	t.answer(ctx, v, p, l, resp.StatusCode)
	return v
}

// answer ends the lease of a failed call by pacer.Lease.Fail, which also
// pauses or stops the budget when the provider asks for it, and cools a
// failing deployment down: before the SDK sees the answer, so that its
// retry meets the pause (or, in a group, goes to another deployment).
func (t *transport) answer(ctx context.Context, v classify.Verdict, p *pacer.Pacer, l *pacer.Lease, status int) {
	_ = l.Fail(ctx, v, nil)
	if v.Kind != classify.RateLimited && v.Kind != classify.QuotaExhausted && (status >= 500 || status == 0) {
		t.cooldown(ctx, p)
	}
}

// settle settles a lease with f, with ctx: a lease whose end fails (Redis
// unreachable, or ctx done) keeps trying in the background until it lands
// or the lease expires (its reservation then stays charged, the safe
// side), the same loop for every caller (see pacer.Lease.Settle). A
// caller is never held past its context.
func settle(ctx context.Context, l *pacer.Lease, f func(context.Context) error) {
	// A usage the lease refuses must not leave it held: it ends as a
	// failure nothing is known of, keeping its reservation.
	if err := f(ctx); errors.Is(err, pacer.ErrInvalid) {
		_ = l.Fail(ctx, classify.Verdict{}, nil)
	}
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		r.Body.Close()
	}
}
