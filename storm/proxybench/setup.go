package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/redis/go-redis/v9"
)

// key is the provider key the bench's clients send.
const key = "sk-proxybench-not-a-real-key"

// lane is one way to the simulated provider: bare, or through a proxy.
type lane struct {
	name   string
	base   string // the server a client sends /openai/v1/... to
	client *http.Client
}

// store is one Redis the proxies and the bare pacer use.
type store struct {
	kind  string        // "miniredis", "redis"
	rdb   *redis.Client // the proxy's
	own   *redis.Client // the bare pacer's
	pacer *pacer.Pacer  // an Acquire and Settle with no HTTP
	cmds  *counter      // commands the proxy's client sends
}

// setup is everything the bench runs against.
type setup struct {
	prefix  string
	servers []*httptest.Server
	mini    *miniredis.Miniredis
	stores  []store
	lanes   []lane             // bare first, then one proxy per store
	perCall map[string]float64 // the proxy's Redis commands per call, by store, in the last rounds
	log     io.Writer          // failed calls, one line each
}

func newSetup(ctx context.Context, addr string) (s *setup, err error) {
	s = &setup{prefix: fmt.Sprintf("llmpacer-proxybench-%d", os.Getpid()), perCall: map[string]float64{}, log: os.Stderr}
	defer func() {
		if err != nil {
			s.close(ctx)
		}
	}()
	// Limits no call reaches: the bench measures the way, not the waiting.
	prov, err := fakeprovider.New(fakeprovider.Config{RequestLimit: 10_000_000, TokenLimit: 100_000_000})
	if err != nil {
		return s, err
	}
	up := s.serveRaw(traceIf(prov, traceProvider))
	target, _ := url.Parse(up.URL)
	// The bare proxy: what `llmpacer proxy` is built on, with the same
	// upstream transport the proxy gets by default.
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = upstreamTransport()
	rp.FlushInterval = -1
	s.lanes = append(s.lanes, newLane("bare", s.serve(buffered(http.StripPrefix("/openai", rp))).URL))
	if s.mini, err = miniredis.Run(); err != nil {
		return s, err
	}
	if err := s.addStore(ctx, "miniredis", s.mini.Addr(), up.URL); err != nil {
		return s, err
	}
	if addr != "" {
		if err := s.addStore(ctx, "redis", addr, up.URL); err != nil {
			return s, err
		}
	}
	return s, nil
}

// addStore starts a proxy on the Redis at addr, and a bare pacer beside it.
func (s *setup) addStore(ctx context.Context, kind, addr, up string) error {
	rdb, own := redis.NewClient(&redis.Options{Addr: addr}), redis.NewClient(&redis.Options{Addr: addr})
	if tracing() != nil { // before the first connection, so that it is traced too
		rdb.AddHook(traceRedis{})
		own.AddHook(traceRedis{})
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%s at %s: %w", kind, addr, err)
	}
	cmds := &counter{}
	rdb.AddHook(cmds)
	p, err := pacer.New(own, pacer.Config{Name: "acquire-only", KeyPrefix: s.prefix,
		Limits: pacer.Limits{RPM: 1_000_000_000, TPM: 1_000_000_000_000}})
	if err != nil {
		return err
	}
	s.stores = append(s.stores, store{kind: kind, rdb: rdb, own: own, pacer: p, cmds: cmds})
	px, err := proxy.New(proxy.Config{Redis: rdb, OpenAI: up, Anthropic: up, KeyPrefix: s.prefix, Upstream: upstreamTransport(),
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	s.lanes = append(s.lanes, newLane("proxy-"+kind, s.serve(px).URL))
	// Between the two: the bare proxy with pacerhttp's transport on one
	// budget, without the proxy's own work (routing, reading the body and
	// its model, finding the key's budget, learning limits).
	one, err := pacer.New(own, pacer.Config{Name: "pacerhttp-only", KeyPrefix: s.prefix,
		Limits: pacer.Limits{RPM: 1_000_000_000, TPM: 1_000_000_000_000}})
	if err != nil {
		return err
	}
	target, _ := url.Parse(up)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = pacerhttp.NewTransport(one, upstreamTransport())
	rp.FlushInterval = -1
	s.lanes = append(s.lanes, newLane("pacerhttp-"+kind, s.serve(http.StripPrefix("/openai", rp)).URL))
	// The floor: the bare proxy with one Acquire before sending and its
	// Settle after the answer, nothing else. "Delayed by the Acquire round
	// trip only" is this lane's first byte.
	floor, err := pacer.New(own, pacer.Config{Name: "acquire-only-proxy", KeyPrefix: s.prefix,
		Limits: pacer.Limits{RPM: 1_000_000_000, TPM: 1_000_000_000_000}})
	if err != nil {
		return err
	}
	rp = httputil.NewSingleHostReverseProxy(target)
	rp.Transport = acquireFirst{p: floor, base: upstreamTransport()}
	rp.FlushInterval = -1
	s.lanes = append(s.lanes, newLane("acquire+bare-"+kind, s.serve(buffered(http.StripPrefix("/openai", rp))).URL))
	return nil
}

// acquireFirst takes one lease before sending and settles it when the
// answer's body has been passed on: the least a pacing proxy does.
type acquireFirst struct {
	p    *pacer.Pacer
	base http.RoundTripper
}

func (a acquireFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	l, err := a.p.Acquire(req.Context(), pacer.Request{Tokens: 16})
	if err != nil {
		return nil, err
	}
	resp, err := a.base.RoundTrip(req)
	if err != nil {
		_ = l.Fail(req.Context(), classify.FromError(err), err)
		return nil, err
	}
	resp.Body = &settleAfter{rc: resp.Body, l: l, ctx: req.Context()}
	return resp, nil
}

// settleAfter settles its lease on the Read after the body's end, as
// pacerhttp's meter does, so that the last bytes go out first.
type settleAfter struct {
	rc   io.ReadCloser
	l    *pacer.Lease
	ctx  context.Context
	end  error
	once sync.Once
}

func (b *settleAfter) Read(p []byte) (int, error) {
	if b.end != nil {
		b.settle()
		return 0, b.end
	}
	n, err := b.rc.Read(p)
	if n > 0 && err != nil {
		b.end, err = err, nil
	}
	if err != nil {
		b.settle()
	}
	return n, err
}

func (b *settleAfter) Close() error {
	err := b.rc.Close()
	b.settle()
	return err
}

func (b *settleAfter) settle() { b.once.Do(func() { _ = b.l.Settle(b.ctx, 16) }) }

// buffered reads the inbound body into memory before h sends it on, as
// the proxy and pacerhttp's transport do. A ReverseProxy that streams the
// inbound body itself may lose the answer: once it writes the answer's
// headers, the server closes the inbound body, and the transport's last
// read of it (the check for a body longer than declared) then fails and
// tears down the upstream connection mid-answer (golang/go#40747). The
// bare lanes hit it under load; buffering also makes them do the work
// the proxy does, so the comparison stays fair.
func buffered(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		h.ServeHTTP(w, r)
	})
}

func (s *setup) serve(h http.Handler) *httptest.Server {
	return s.serveRaw(traceIf(h, traceLane))
}

func traceIf(h http.Handler, wrap func(http.Handler) http.Handler) http.Handler {
	if tracing() == nil {
		return h
	}
	return wrap(h)
}

func upstreamTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if tracing() == nil {
		return t
	}
	return traceTransport{t}
}

func (s *setup) serveRaw(h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	s.servers = append(s.servers, srv)
	return srv
}

// newLane gives a lane its own client, with room for every concurrent
// client's connection, so that the client side never throttles a run.
func newLane(name, base string) lane {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 2048, 2048
	return lane{name: name, base: base, client: &http.Client{Transport: tr}}
}

// close stops the servers and deletes the keys the bench wrote.
func (s *setup) close(ctx context.Context) {
	for _, srv := range s.servers {
		srv.Close()
	}
	for _, st := range s.stores {
		// A budget's keys are "{<prefix>:<name>}:<part>".
		iter := st.rdb.Scan(ctx, 0, "*"+s.prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			st.rdb.Del(ctx, iter.Val())
		}
		st.rdb.Close()
		st.own.Close()
	}
	if s.mini != nil {
		s.mini.Close()
	}
}

// counter counts the commands a client sends, one by one or pipelined.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
