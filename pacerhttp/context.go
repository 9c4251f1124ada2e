package pacerhttp

import (
	"context"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// The context's keys. A context setter is named ContextWithX and its
// reader XFrom, apart from the options (WithX), so that neither reads as
// the other.
type ctxKey int

const (
	priorityKey ctxKey = iota
	maxWaitKey
	tenantKey
)

// ContextWithPriority returns a context whose model calls the transport
// acquires with priority p (the default is pacer.Interactive).
func ContextWithPriority(ctx context.Context, p pacer.Priority) context.Context {
	return context.WithValue(ctx, priorityKey, p)
}

// ContextWithMaxWait returns a context whose model calls wait at most d for
// the budget (pacer.Request.MaxWait), instead of the budget's
// Config.MaxWait.
// The context's deadline bounds the wait too.
func ContextWithMaxWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, maxWaitKey, d)
}

// ContextWithTenant returns a context that names the tenant a request is
// for: NewHandler's default tenant function reads it, and the transport
// charges the model calls made with it to that tenant
// (pacer.Request.Tenant) as well as to the budget, when the budget has
// Config.Tenants (a budget without tenants is charged alone). Call it in
// the authentication middleware, with the id it verified:
//
//	next.ServeHTTP(w, r.WithContext(pacerhttp.ContextWithTenant(r.Context(), session.AccountID)))
func ContextWithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey, tenant)
}

// TenantFrom returns the tenant ContextWithTenant put in ctx, and whether
// there was one.
func TenantFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(tenantKey).(string)
	return id, ok
}

// request returns what the context says about the call to admit to p.
func request(ctx context.Context, p *pacer.Pacer, tokens int64) pacer.Request {
	r := pacer.Request{Tokens: tokens}
	if p, ok := ctx.Value(priorityKey).(pacer.Priority); ok {
		r.Priority = p
	}
	if d, ok := ctx.Value(maxWaitKey).(time.Duration); ok && d > 0 {
		r.MaxWait = d
	}
	if t, ok := ctx.Value(tenantKey).(string); ok {
		// A budget without tenants refuses a Tenant: name it only to one
		// that has them.
		if tn := p.Config().Tenants; len(tn.Rates) > 0 || tn.Share != 0 {
			r.Tenant = t
		}
	}
	return r
}
