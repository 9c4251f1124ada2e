package pacerhttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
)

// Target says where the calls admitted on one deployment of a group go.
// The zero value sends them as the SDK made them.
type Target struct {
	// URL, if set, replaces the scheme and host of every call sent to the
	// deployment ("https://westus.openai.azure.com"): the SDK keeps one
	// base URL, the first deployment's, say.
	URL string
	// AzureDeployment, if set, replaces the deployment name of an Azure
	// OpenAI path (".../openai/deployments/{name}/...").
	AzureDeployment string
	// Header is set on every call sent to the deployment, replacing the
	// SDK's values: its key ("api-key" for Azure, "Authorization" for
	// OpenAI), a project header.
	Header http.Header
	// Base sends the deployment's calls; nil: the transport's base.
	Base http.RoundTripper
}

// target is a Target checked: its URL parsed, its base set.
type target struct {
	url    *url.URL
	azure  string
	header http.Header
	base   http.RoundTripper
	sync   syncer
}

// NewGroupTransport is NewTransport for a pacer.Group: each model call is
// admitted on one of g's deployments (see pacer.Group.Acquire), rewritten
// for it as targets says (keyed by the deployment's budget name,
// Pacer.Config().Name), and sent there. So one SDK client serves every
// deployment: configure it for any one of them, and give each deployment its URL, Azure deployment name or key
// here. A deployment with no entry gets the call as the SDK made it.
//
// Each answer is handled on the deployment that gave it: a 429 pauses its
// budget, an exhausted quota stops it, its rate-limit headers sync it; a
// 5xx or a connection that fails takes it out of the group for
// pacer.GroupConfig.Cooldown, for every process.
//
// A call refused by a deployment (a 429, an exhausted quota, an overload
// or another 5xx: an answer that comes before any body) is sent on at once
// to another deployment that has room now (the TryAcquire of a group of
// the deployments not yet tried, made with pacer.NewGroup from
// Group.Config), before the SDK sees the refusal: the SDK would wait out
// the Retry-After and then be routed back to the deployment whose pause
// had just ended.
// Each deployment gets the call at most once per attempt; the refused
// lease ends by pacer.Lease.Fail's rule and the next deployment's is a new
// one. Only when no other deployment has room, or all have refused the
// call, does the SDK get the (last) refusal, and its retry is routed
// again. A body the transport could not read whole (over WithMaxBody, with
// no GetBody) is not sent twice; a failure inside a stream that has begun
// is never sent on, as part of it reached the SDK; nor is a connection
// that fails, which the provider may have processed: the SDK retries it.
//
// A nil g, a target for no deployment of g, or an invalid URL does not
// panic: every model call then fails with an error matching
// pacer.ErrInvalid.
func NewGroupTransport(g *pacer.Group, targets map[string]Target, base http.RoundTripper, opts ...Option) http.RoundTripper {
	var first *pacer.Pacer
	var cfg pacer.GroupConfig
	if g != nil {
		cfg = g.Config()
		first = cfg.Deployments[0].Pacer
	}
	rt := NewTransport(first, base, opts...)
	t := rt.(*transport)
	if g == nil {
		t.err = fmt.Errorf("%w: pacerhttp.NewGroupTransport: the group is nil; pass the *pacer.Group to route among", pacer.ErrInvalid)
		return t
	}
	t.g, t.to = g, map[*pacer.Pacer]*target{}
	names := map[string]bool{}
	for _, d := range cfg.Deployments {
		name := d.Pacer.Config().Name
		names[name] = true
		tg := &target{base: t.base}
		tg.sync.p = d.Pacer
		t.to[d.Pacer] = tg
		c, ok := targets[name]
		if !ok {
			continue
		}
		if c.Base != nil {
			tg.base = c.Base
		}
		tg.azure, tg.header = c.AzureDeployment, c.Header.Clone()
		if c.URL != "" {
			u, err := url.Parse(c.URL)
			if err != nil || u.Scheme == "" || u.Host == "" {
				t.err = fmt.Errorf("%w: pacerhttp.NewGroupTransport: the URL %q of %q: want scheme://host", pacer.ErrInvalid, c.URL, name)
				return t
			}
			tg.url = u
		}
		if strings.Contains(c.AzureDeployment, "/") {
			t.err = fmt.Errorf("%w: pacerhttp.NewGroupTransport: the Azure deployment %q of %q contains '/'", pacer.ErrInvalid, c.AzureDeployment, name)
			return t
		}
	}
	for name := range targets {
		if !names[name] {
			t.err = fmt.Errorf("%w: pacerhttp.NewGroupTransport: a target for %q, which is no deployment of the group", pacer.ErrInvalid, name)
			return t
		}
	}
	return t
}

// acquire admits r, on the transport's budget or on one of its group's
// deployments, and returns the lease, the budget, and what sends the call,
// having rewritten out for that deployment.
func (t *transport) acquire(ctx context.Context, r pacer.Request, out *http.Request) (*pacer.Lease, *pacer.Pacer, http.RoundTripper, error) {
	if t.g == nil {
		l, err := t.p.Acquire(ctx, r)
		return l, t.p, t.base, err
	}
	l, p, err := t.g.Acquire(ctx, r)
	if err != nil {
		return nil, nil, nil, err
	}
	tg := t.to[p]
	tg.rewrite(out)
	return l, p, tg.base, nil
}

// rewrite points out, the transport's own copy of the SDK's request, at
// the target.
func (tg *target) rewrite(out *http.Request) {
	if tg.url == nil && tg.azure == "" && tg.header == nil {
		return
	}
	u := *out.URL
	if tg.url != nil {
		u.Scheme, u.Host = tg.url.Scheme, tg.url.Host
		out.Host = ""
	}
	if tg.azure != "" {
		const marker = "/deployments/"
		if i := strings.LastIndex(u.Path, marker); i >= 0 {
			if _, rest, ok := strings.Cut(u.Path[i+len(marker):], "/"); ok {
				u.Path = u.Path[:i+len(marker)] + tg.azure + "/" + rest
				u.RawPath = ""
			}
		}
	}
	out.URL = &u
	if tg.header != nil {
		out.Header = out.Header.Clone()
		for k, v := range tg.header {
			out.Header[k] = v
		}
	}
}

// syncer returns the syncer of p's headers.
func (t *transport) syncer(p *pacer.Pacer) *syncer {
	if t.g == nil {
		return &t.sync
	}
	return &t.to[p].sync
}

// cooldown takes a failing deployment out of the transport's group, if it
// has one.
func (t *transport) cooldown(ctx context.Context, p *pacer.Pacer) {
	if t.g != nil {
		_ = t.g.Cooldown(ctx, p, 0) // reaches the fleet even when ctx is done
	}
}

// elsewhere admits a call that a deployment of the transport's group
// refused with v on another deployment that has room now and was not tried
// for this attempt, and returns its lease, budget, sender and the request
// rewritten for it. It returns a nil lease when the transport has no
// group, v is no failure of the deployment, the body cannot be sent again,
// ctx is done, or no other deployment has room: the SDK then gets the
// answer.
func (t *transport) elsewhere(ctx context.Context, at *attempt, v classify.Verdict, tried []*pacer.Pacer) (*pacer.Lease, *pacer.Pacer, http.RoundTripper, *http.Request) {
	if t.g == nil || !deploymentFailed(v) || ctx.Err() != nil {
		return nil, nil, nil, nil
	}
	out := new(http.Request)
	*out = at.src
	if b := at.src.Body; b != nil && b != http.NoBody {
		if at.src.GetBody == nil {
			return nil, nil, nil, nil // read as it was sent: not replayable
		}
		body, err := at.src.GetBody()
		if err != nil {
			return nil, nil, nil, nil
		}
		out.Body = body
	}
	g := t.untried(tried)
	if g == nil {
		return nil, nil, nil, nil
	}
	// Room now, or the SDK's answer: waiting here would hold the answer
	// from the SDK, whose retry is routed again anyway.
	l, p, err := g.TryAcquire(ctx, at.r)
	if err != nil {
		closeBody(out)
		return nil, nil, nil, nil
	}
	tg := t.to[p]
	tg.rewrite(out)
	return l, p, tg.base, out
}

// untried returns a group of the transport's deployments other than tried,
// with its group's policy, weights and cooldown, or nil when none is left.
func (t *transport) untried(tried []*pacer.Pacer) *pacer.Group {
	cfg := t.g.Config()
	cfg.Deployments = slices.DeleteFunc(cfg.Deployments, func(d pacer.Deployment) bool { return slices.Contains(tried, d.Pacer) })
	if len(cfg.Deployments) == 0 {
		return nil
	}
	g, err := pacer.NewGroup(cfg) // a part of a valid group: valid
	if err != nil {
		return nil
	}
	return g
}

// deploymentFailed says whether a verdict is the deployment's, not the
// call's: another deployment may take the call as it is. A 429, an
// exhausted quota (of that deployment's key), an overload or a 5xx.
func deploymentFailed(v classify.Verdict) bool {
	switch v.Kind {
	case classify.RateLimited, classify.QuotaExhausted, classify.Overloaded:
		return true
	case classify.Transient:
		return v.Status >= 500
	}
	return false
}

// discard drops the answer of a call sent on elsewhere, reading a little of
// it first so that its connection can be used again.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
