// Package proxy is the pacing reverse proxy that `llmpacer proxy` runs. A
// client reaches it by changing its base URL only; every model call it
// makes waits for its turn on a budget kept in Redis and shared by every
// replica, then goes to the provider through pacerhttp's transport, and
// every other request passes through unpaced.
//
// Budgets follow the key: each distinct provider key and model gets its
// own budget, named by a digest of the key (see BudgetName). Its limits
// are learned from the provider's rate-limit headers on the first answer
// and stored as the budget's definition in Redis, so every replica follows
// them; until then the budget admits one call at a time. A definition
// stored before (pacer.Pacer.Define) wins over the headers.
//
// A call that cannot get its turn within MaxWait, or meets a pause that
// outlasts it, is answered 429 in the provider's own error shape with
// Retry-After, so the client's SDK retries as it would against the
// provider; a budget stopped for an exhausted quota answers with the
// provider's quota error, sending nothing upstream.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/pacerprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// Defaults of the Config fields.
const (
	DefaultOpenAI     = "https://api.openai.com"
	DefaultAnthropic  = "https://api.anthropic.com"
	DefaultGemini     = "https://generativelanguage.googleapis.com"
	DefaultMaxWait    = 30 * time.Second
	DefaultMaxBody    = 32 << 20 // Anthropic's own limit on a Messages request
	DefaultMaxBudgets = 10_000
	DefaultBudgetIdle = time.Minute
)

// Config describes a proxy. Only Redis is required.
type Config struct {
	// Redis keeps the budgets; every replica on the same Redis (or
	// cluster) and KeyPrefix shares them.
	Redis redis.UniversalClient
	// OpenAI and Anthropic are the upstream base URLs: /openai/<path> goes
	// to OpenAI+"/"+<path>. Defaults DefaultOpenAI and DefaultAnthropic.
	OpenAI, Anthropic string
	// Azure is an Azure OpenAI resource's endpoint
	// (https://NAME.openai.azure.com): /azure/<path> goes to
	// Azure+"/"+<path>. No default: without it /azure/ answers 404.
	Azure string
	// Gemini is the Gemini API's base URL: /gemini/<path> goes to
	// Gemini+"/"+<path>. Default DefaultGemini.
	Gemini string
	// KeyPrefix starts every budget's Redis keys (pacer.Config.KeyPrefix).
	KeyPrefix string
	// MaxWait is the longest a call waits for its turn before the client
	// gets the provider's 429. Default DefaultMaxWait.
	MaxWait time.Duration
	// MaxBody is the largest model-call body accepted; a larger one is
	// answered 413. Other requests stream through unbuffered and
	// unbounded. Default DefaultMaxBody.
	MaxBody int64
	// MaxBudgets bounds the budgets (keys × models) one proxy holds, so
	// that clients sending made-up keys cannot grow it without end.
	// Default DefaultMaxBudgets.
	MaxBudgets int
	// BudgetIdle is how long a budget must go unused before a new key or
	// model may evict it when MaxBudgets are held, the least recently used
	// first. Its state stays in Redis. Default DefaultBudgetIdle.
	BudgetIdle time.Duration
	// Log receives one line per request and what the budgets do; never a
	// key. Default: discarded.
	Log *slog.Logger
	// Upstream sends the requests to the providers. Default: a clone of
	// http.DefaultTransport.
	Upstream http.RoundTripper
	// File is the configuration file's content (LoadFile): keys the proxy
	// holds, its clients' proxy keys and tenants, limits per model.
	File File
}

// Proxy is an http.Handler that paces the model calls it forwards.
type Proxy struct {
	cfg     Config
	log     *slog.Logger
	metrics *pacerprom.Collector
	scrape  http.Handler
	routes  map[string]*route // by the path's first segment
	budgets budgets
	up      http.RoundTripper // the upstream, its errors marked
	// clients are the proxy keys of File, held the provider keys of File
	// by provider and key.
	clients map[string]client
	held    map[string]Key
}

// client is what a proxy key stands for.
type client struct {
	provider, key, tenant string
}

// route is one provider's path prefix and its reverse proxy.
type route struct {
	name   string // "openai", "anthropic", "azure", "gemini": the path prefix and budget names' start
	style  style
	target *url.URL
	rp     *httputil.ReverseProxy
}

// New returns a proxy for cfg, or an error that matches ErrInvalid saying
// what to fix.
func New(cfg Config) (*Proxy, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, log: cfg.Log, metrics: pacerprom.New(), routes: map[string]*route{},
		clients: map[string]client{}, held: map[string]Key{}}
	p.up = upstream{cfg.Upstream}
	p.budgets.m = map[string]*budget{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.metrics)
	p.scrape = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if err := p.hold(cfg.File); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		name, base string
		style      style
	}{{"openai", cfg.OpenAI, openAI}, {"anthropic", cfg.Anthropic, anthropic}, {"azure", cfg.Azure, azure}, {"gemini", cfg.Gemini, gemini}} {
		if r.base == "" {
			continue // Azure's, not given
		}
		target, err := parseUpstream(r.name, r.base)
		if err != nil {
			return nil, err
		}
		p.routes[r.name] = p.newRoute(r.name, r.style, target)
	}
	return p, nil
}

// ErrInvalid reports a Config that cannot work.
var ErrInvalid = errors.New("proxy: invalid configuration")

func (c Config) withDefaults() (Config, error) {
	if c.Redis == nil {
		return c, fmt.Errorf("%w: no Redis client", ErrInvalid)
	}
	if c.OpenAI == "" {
		c.OpenAI = DefaultOpenAI
	}
	if c.Anthropic == "" {
		c.Anthropic = DefaultAnthropic
	}
	if c.Gemini == "" {
		c.Gemini = DefaultGemini
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxBudgets == 0 {
		c.MaxBudgets = DefaultMaxBudgets
	}
	if c.BudgetIdle == 0 {
		c.BudgetIdle = DefaultBudgetIdle
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Upstream == nil {
		c.Upstream = http.DefaultTransport.(*http.Transport).Clone()
	}
	switch {
	case c.MaxWait < 0 || c.MaxWait > 7*24*time.Hour:
		return c, fmt.Errorf("%w: max wait %v: give a duration from 1ms to 168h", ErrInvalid, c.MaxWait)
	case c.MaxBody < 1:
		return c, fmt.Errorf("%w: max body %d: give a positive number of bytes", ErrInvalid, c.MaxBody)
	case c.MaxBudgets < 1:
		return c, fmt.Errorf("%w: max budgets %d: give a positive number", ErrInvalid, c.MaxBudgets)
	case c.BudgetIdle < 0:
		return c, fmt.Errorf("%w: budget idle %v: give a positive duration", ErrInvalid, c.BudgetIdle)
	}
	return c, nil
}

// parseUpstream checks a provider's base URL: http or https, a host, no
// query, no credentials.
func parseUpstream(name, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("%w: -%s %q: give the provider's base URL, http(s)://host[:port][/path], without query or credentials", ErrInvalid, name, s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// newRoute builds the reverse proxy of one provider. Its transport sends a
// model call through its budget's pacerhttp transport, anything else
// straight upstream.
func (p *Proxy) newRoute(name string, st style, target *url.URL) *route {
	rt := &route{name: name, style: st, target: target}
	prefix := "/" + name
	rt.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, prefix)
			pr.Out.URL.RawPath = strings.TrimPrefix(pr.In.URL.RawPath, prefix)
			pr.SetURL(target)
		},
		Transport:     router{p.up},
		FlushInterval: -1, // stream every byte as it comes: SSE and long JSON alike
		ErrorHandler:  func(w http.ResponseWriter, r *http.Request, err error) { p.failed(w, r, rt, err) },
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return rt
}

// budgetKey holds, in a request's context, the budget of a model call.
type budgetKey struct{}

// router sends a model call through its budget's transport.
type router struct{ up http.RoundTripper }

func (r router) RoundTrip(req *http.Request) (*http.Response, error) {
	if b, ok := req.Context().Value(budgetKey{}).(*budget); ok {
		return b.rt.RoundTrip(req)
	}
	return r.up.RoundTrip(req)
}

// upstreamError is a failure to reach the provider, told apart from the
// budget's own refusals.
type upstreamError struct{ err error }

func (e *upstreamError) Error() string { return "upstream: " + e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// upstream marks the errors of the transport to the providers.
type upstream struct{ base http.RoundTripper }

func (u upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := u.base.RoundTrip(req)
	if err != nil {
		return nil, &upstreamError{err}
	}
	return resp, nil
}

// ServeHTTP answers the health, readiness and metrics endpoints, and
// forwards /openai/..., /anthropic/..., /azure/... and /gemini/... to the
// providers.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	start := time.Now()
	first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	rt := p.routes[first]
	budgetName := p.serve(rec, r, rt)
	provider := ""
	if rt != nil {
		provider = rt.name
	}
	p.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method), slog.String("path", r.URL.EscapedPath()), slog.String("provider", provider),
		slog.String("budget", budgetName), slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes),
		slog.Duration("took", time.Since(start)))
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, rt *route) (budget string) {
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case get && r.URL.Path == "/healthz":
		fmt.Fprintln(w, "ok")
	case get && r.URL.Path == "/readyz":
		p.ready(w, r)
	case get && r.URL.Path == "/metrics":
		p.scrape.ServeHTTP(w, r)
	case rt != nil:
		return p.forward(w, r, rt)
	default:
		msg := "llmpacer proxy: no such route; send OpenAI calls to /openai/..., Anthropic's to /anthropic/..., Azure OpenAI's to /azure/... and Gemini's to /gemini/..."
		if strings.HasPrefix(r.URL.Path, "/azure/") {
			msg = "llmpacer proxy: no Azure OpenAI endpoint; start the proxy with -azure https://NAME.openai.azure.com"
		}
		http.Error(w, msg, http.StatusNotFound)
	}
	return ""
}

// ready answers 200 while Redis answers a PING within two seconds.
func (p *Proxy) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := p.cfg.Redis.Ping(ctx).Err(); err != nil {
		http.Error(w, "llmpacer proxy: Redis does not answer", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// recorder notes the status and size of an answer, for the log line. It
// unwraps, so that the reverse proxy can still flush a stream.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// budgets are the proxy's budgets by name, made on first use.
type budgets struct {
	mu sync.Mutex
	m  map[string]*budget
}
