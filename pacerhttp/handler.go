package pacerhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
)

// NewHandler returns h behind the budget p, for a service that offers LLM
// features to its own users: every request is admitted by p before h runs,
// charged to its tenant's share of the budget (see pacer.Tenants), and its
// lease is held while h runs.
//
// For each request the handler:
//
//   - names its tenant with the tenant function (default
//     TenantFromRequest: the id your authentication middleware put in the
//     context with ContextWithTenant; never a header or the body, which a
//     client writes);
//   - prices it with the cost function (default OneRequest: one request, 0
//     tokens; WithCost for token estimates);
//   - acquires a lease: at once (TryAcquire), or in a waiting room up to a
//     latency budget (WithWaitingRoom). A request the budget cannot admit
//     in time goes to the fallback (WithFallback), or is answered 429 Too
//     Many Requests with Retry-After and the IETF RateLimit-Policy and
//     RateLimit headers of the limit that binds;
//   - runs h with the lease in the request's context (LeaseFrom), kept
//     alive while h runs, and releases it when h returns (or panics): the
//     whole reservation stays charged unless h settled the real usage
//     first, and a concurrency slot is held exactly while h runs.
//
// Failures that are not for want of room are answered without running h,
// with a short plain-text body that names the kind of failure, never its
// details (tell WithErrorLog to log those):
//
//   - the budget stopped (pacer.Lease.Fail on an exhausted quota, pacer.Pacer.Stop) or paused by the
//     provider's 429s: 503 Service Unavailable with Retry-After. The
//     service, not the client, is short: a 429 would tell the client it
//     sent too much;
//   - Redis unreachable or failing: 503 with Retry-After: 1;
//   - a request larger than a bucket can ever hold (pacer.ErrTooLarge):
//     413 Content Too Large;
//   - bad input (pacer.ErrInvalid: a tenant id over 64 KiB, a tenant in a
//     budget without Config.Tenants, bad options): 500;
//   - the tenant function's error: 403; the cost function's: 400;
//   - a client that disconnects while waiting: nothing is written, and
//     nothing stays held.
//
// The RateLimit headers are written on refusals only: reading a limit's
// level costs one Redis call (the tenant's or the budget's snapshot),
// which a refusal pays and an admission does not.
func NewHandler(h http.Handler, p *pacer.Pacer, opts ...HandlerOption) http.Handler {
	c := handlerDefaults()
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return &handler{next: h, p: p, c: c, bad: c.check(h, p)}
}

// Refusal says why a request was not admitted, for a fallback.
type Refusal struct {
	// Tenant is the request's tenant ("" for the budget alone).
	Tenant string
	// Limit names the limit that binds: "rpm", "tpm", a tenant's own
	// "@tokens/3600s", "concurrency" (the pacer's RefusedError.Limit), or,
	// where the pacer's Limit is "", "pause", "quota" or "stop" for a
	// budget paused or stopped: the names the answer's
	// violated-policies carries.
	Limit string
	// Wait is how long until the request could be admitted: for a stop,
	// until the next probe or the stop's end.
	Wait time.Duration
	// Request is what the request would have reserved.
	Request pacer.Request
	// Err is the pacer's answer: a *pacer.RefusedError matching
	// pacer.ErrWaitTimeout (Bound 0 when the handler does not wait) or
	// pacer.ErrStopped.
	Err error
}

// Stopped reports whether the budget is stopped or paused, rather than
// short of room for this request: the service, not the client, is short.
func (r Refusal) Stopped() bool {
	return r.Limit == refusedPause || r.Limit == refusedQuota || r.Limit == refusedStop
}

// The names a Refusal gives a pause and the two kinds of stop, which are
// no limits of the pacer's (its RefusedError.Limit is "" for them).
const (
	refusedPause = "pause"
	refusedQuota = "quota"
	refusedStop  = "stop"
)

// refusedBy names what refused re, as Refusal.Limit says it.
func refusedBy(re *pacer.RefusedError) string {
	switch {
	case re.Limit != "":
		return re.Limit
	case errors.Is(re, pacer.ErrQuotaExhausted):
		return refusedQuota
	case errors.Is(re, pacer.ErrStopped):
		return refusedStop
	}
	return refusedPause
}

type handler struct {
	next http.Handler
	p    *pacer.Pacer
	c    handlerConfig
	bad  error // a configuration error, answered 500 on every request
}

// maxRoom bounds WithWaitingRoom, as pacer bounds Request.MaxWait.
const maxRoom = 7 * 24 * time.Hour

// endTimeout bounds the Fail that ends a lease after the handler
// returns, on a context the client's disconnect does not cancel: a lease
// left unended would hold its concurrency slot until its TTL.
const endTimeout = 5 * time.Second

// check returns what is wrong with the handler's configuration.
func (c handlerConfig) check(h http.Handler, p *pacer.Pacer) error {
	switch {
	case h == nil:
		return fmt.Errorf("%w: NewHandler: the handler is nil: pass the http.Handler to protect", pacer.ErrInvalid)
	case p == nil:
		return fmt.Errorf("%w: NewHandler: the Pacer is nil: pass the budget from pacer.New", pacer.ErrInvalid)
	case c.tenant == nil:
		return fmt.Errorf("%w: WithTenantFunc(nil): pass a function, or leave the option out for TenantFromRequest", pacer.ErrInvalid)
	case c.cost == nil:
		return fmt.Errorf("%w: WithCost(nil): pass a function, or leave the option out for OneRequest", pacer.ErrInvalid)
	case c.wait < 0 || c.wait > maxRoom:
		return fmt.Errorf("%w: WithWaitingRoom(%v): the latency budget must be between 0 (refuse at once) and %v", pacer.ErrInvalid, c.wait, maxRoom)
	}
	return nil
}

// ServeHTTP admits r, runs the wrapped handler with its lease, and ends
// the lease.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.bad != nil {
		h.fail(w, r, http.StatusInternalServerError, "the rate limiter is misconfigured", h.bad)
		return
	}
	tenant, err := h.c.tenant(r)
	if err != nil {
		h.fail(w, r, http.StatusForbidden, "the request names no tenant to charge", err)
		return
	}
	req, err := h.c.cost(r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "the request cannot be priced", err)
		return
	}
	req.Tenant = tenant
	l, err := h.acquire(r.Context(), req)
	if err != nil {
		h.refused(w, r, req, err)
		return
	}
	h.serve(w, r, l)
}

// acquire admits req at once, or within the waiting room's latency budget
// (or the cost function's MaxWait, if shorter).
func (h *handler) acquire(ctx context.Context, req pacer.Request) (*pacer.Lease, error) {
	if h.c.wait == 0 {
		return h.p.TryAcquire(ctx, req)
	}
	if req.MaxWait == 0 || req.MaxWait > h.c.wait {
		req.MaxWait = h.c.wait
	}
	return h.p.Acquire(ctx, req)
}

// serve runs the wrapped handler holding l, and releases l after it.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, l *pacer.Lease) {
	stop := l.KeepAlive(r.Context())
	defer func() {
		stop()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), endTimeout)
		defer cancel()
		// Unless h settled it, the lease ends keeping its reservation: a
		// failure nothing is known of, which tells the budget nothing.
		if err := l.Fail(ctx, classify.Verdict{}, nil); err != nil && !errors.Is(err, pacer.ErrLeaseExpired) {
			h.log(r, fmt.Errorf("pacerhttp: releasing the request's lease: %w", err))
		}
	}()
	h.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), leaseKey, l)))
}

// refused answers a request the pacer did not admit.
func (h *handler) refused(w http.ResponseWriter, r *http.Request, req pacer.Request, err error) {
	why := Refusal{Tenant: req.Tenant, Request: req, Err: err}
	var re *pacer.RefusedError
	switch {
	case errors.Is(r.Context().Err(), context.Canceled):
		// The client left while waiting: nobody reads an answer, and the
		// pacer gave back whatever the wait held.
		return
	case errors.As(err, &re) && !errors.Is(err, pacer.ErrUnavailable):
		why.Limit = refusedBy(re)
	case errors.Is(err, pacer.ErrTooLarge):
		h.fail(w, r, http.StatusRequestEntityTooLarge, "the request is larger than the budget can ever admit", err)
		return
	case errors.Is(err, pacer.ErrInvalid):
		h.fail(w, r, http.StatusInternalServerError, "the rate limiter refused its input", err)
		return
	case r.Context().Err() != nil:
		// The request's deadline passed in the middle of a Redis call.
		h.fail(w, r, http.StatusServiceUnavailable, "no answer from the rate limiter before the request's deadline", err)
		return
	default:
		w.Header().Set("Retry-After", "1")
		h.fail(w, r, http.StatusServiceUnavailable, "the rate limiter is unavailable", err)
		return
	}
	why.Wait, _ = pacer.RetryAfter(err)
	if h.c.fallback != nil {
		h.c.fallback(w, r, why)
		return
	}
	h.tooMany(w, r, why)
}

// fail answers with status and a one-line body, and logs err.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	h.log(r, err)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintf(w, "pacerhttp: %s\n", msg)
}

func (h *handler) log(r *http.Request, err error) {
	if h.c.onError != nil {
		h.c.onError(r, err)
	}
}
