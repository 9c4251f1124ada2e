package pacerhttp

import (
	"net/http"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// HandlerOption changes how NewHandler admits requests. It is apart from
// Option, which configures NewTransport, so that neither can be passed to
// the other by mistake.
type HandlerOption func(*handlerConfig)

type handlerConfig struct {
	tenant   func(*http.Request) (string, error)
	cost     func(*http.Request) (pacer.Request, error)
	wait     time.Duration
	fallback func(http.ResponseWriter, *http.Request, Refusal)
	onError  func(*http.Request, error)
}

func handlerDefaults() handlerConfig {
	return handlerConfig{tenant: TenantFromRequest, cost: OneRequest}
}

// TenantFromRequest is the default tenant function of NewHandler: the id
// that your authentication middleware put in the request's context with
// ContextWithTenant, or "" (the budget alone) when it put none. It never
// reads the body or a header, which a client writes: a tenant id taken
// from them would let any client spend another's budget.
func TenantFromRequest(r *http.Request) (string, error) {
	id, _ := TenantFrom(r.Context())
	return id, nil
}

// OneRequest is the default cost of NewHandler: one request and no tokens,
// which a budget of requests (RPM, RPD, a Rate of Requests) counts and a
// budget of tokens lets through.
func OneRequest(*http.Request) (pacer.Request, error) { return pacer.Request{}, nil }

// WithTenantFunc sets how the handler names the tenant of a request
// (default TenantFromRequest). Derive the id from what your server
// authenticated: a session, a verified token's subject, a client
// certificate. An error refuses the request with 403 Forbidden, charging
// nothing: return one for a request that names no tenant in a budget
// where every request must have one.
func WithTenantFunc(f func(*http.Request) (string, error)) HandlerOption {
	return func(c *handlerConfig) { c.tenant = f }
}

// WithCost sets what a request reserves (default OneRequest): its tokens
// (an estimate of the prompt plus the output cap; see package estimate),
// model and priority. The handler sets the returned Request's Tenant from
// the tenant function, overriding any. A function that reads the body must
// leave r.Body readable for the handler. An error refuses the request with
// 400 Bad Request, charging nothing.
func WithCost(f func(*http.Request) (pacer.Request, error)) HandlerOption {
	return func(c *handlerConfig) { c.cost = f }
}

// WithWaitingRoom holds a request for which the budget has no room for up
// to d (the latency budget) instead of refusing it at once: a virtual
// waiting room. The pacer says up front how long the wait would
// be, so a request whose wait is longer than d is refused (or handed to
// the fallback) at once, not after d. The request's context bounds the
// wait too: a client that disconnects leaves the room, holding nothing.
// d = 0 (the default) refuses at once; d must not exceed 7 days.
func WithWaitingRoom(d time.Duration) HandlerOption {
	return func(c *handlerConfig) { c.wait = d }
}

// WithFallback sets what answers a request the budget cannot admit within
// the latency budget (at once without WithWaitingRoom), or while it is
// stopped or paused: a cheaper model, a cached or canned answer. f is
// called without a lease, having charged nothing, and learns from the
// Refusal how long the wait would have been and which limit binds. Without
// a fallback the handler answers 429 Too Many Requests with Retry-After
// and RateLimit headers (503 Service Unavailable with Retry-After for a
// stop or pause).
func WithFallback(f func(w http.ResponseWriter, r *http.Request, why Refusal)) HandlerOption {
	return func(c *handlerConfig) { c.fallback = f }
}

// WithErrorLog sets a function told of every error that refused a request
// for a reason other than want of room: Redis unreachable, bad input, a
// tenant or cost function's error. Use it to log them: the client's answer
// says what kind of failure it was, not its details (addresses, keys).
func WithErrorLog(f func(r *http.Request, err error)) HandlerOption {
	return func(c *handlerConfig) { c.onError = f }
}
