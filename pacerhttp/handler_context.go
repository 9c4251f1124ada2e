package pacerhttp

import (
	"context"

	"github.com/llmpacer/llmpacer/pacer"
)

type handlerKey int

const leaseKey handlerKey = 0

// LeaseFrom returns the lease NewHandler acquired for the request whose
// context is ctx, or nil outside such a handler. The handler holds it
// while it runs and releases it when it returns; settle it first with the
// real usage to give the unused reservation back:
//
//	reply, err := callModel(r.Context())
//	if err == nil {
//		pacerhttp.LeaseFrom(r.Context()).Settle(r.Context(), reply.Usage.TotalTokens)
//	}
//
// Ending a lease twice changes the budget once, so the handler's end
// after a Settle is a no-op. A handler whose own call failed ends the lease
// with Fail, which also pauses or stops the budget as the provider asks.
func LeaseFrom(ctx context.Context) *pacer.Lease {
	l, _ := ctx.Value(leaseKey).(*pacer.Lease)
	return l
}
