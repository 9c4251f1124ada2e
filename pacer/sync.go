package pacer

import (
	"context"
	"fmt"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/llmpacer/llmpacer/lua"
)

// Sync brings the budget down to the room the provider reports in its
// rate-limit headers (classify.ParseHeaders): the request bucket (RPM) to
// rl.Requests.Remaining and the token bucket (TPM) to rl.Tokens.Remaining,
// each less the Headroom kept unused. It only ever lowers a bucket, never
// raises one, and never past empty: a provider reporting more room than the
// budget believes changes nothing, since the budget also counts calls in
// flight that the provider has not seen yet.
//
// A caller outside the pacer on the same API key is then seen within one
// answer instead of through 429s, while the budget has room. A budget whose
// callers queue believes in less room than any header can report (a
// provider's remaining never goes below zero): an outsider is then seen
// only through the 429s it causes; keep Headroom for a known one.
//
// Only the per-minute request and token buckets follow headers: input- and
// output-token rates, other windows and sliding rates never do. Package
// pacerhttp calls Sync for every answer that carries the headers; call it
// yourself after a call made any other way. A window the headers leave out
// (or the budget does not limit) is skipped; with none left Sync makes no
// Redis call.
func (p *Pacer) Sync(ctx context.Context, rl classify.RateLimits) error {
	args := p.syncArgs(rl)
	if args == nil {
		return nil
	}
	if err := p.unreachable(); err != nil {
		return err
	}
	v, err := p.call(ctx, lua.Pause, args, nil)
	if err != nil {
		return err
	}
	if _, err := wire.Int64s(v, 2); err != nil {
		return fmt.Errorf("pacer: sync of %q: %w", p.s().name, err)
	}
	return nil
}

// syncArgs returns pause.lua's ARGV for Sync (no pause; each bucket's
// offset puts its level at the room reported), or nil if no bucket is
// reported.
func (p *Pacer) syncArgs(rl classify.RateLimits) []any {
	var args []any
	for i, w := range [2]classify.Window{rl.Requests, rl.Tokens} {
		b := p.s().buckets[i] // rpm, tpm
		if b.limit == 0 || !w.HasRemaining {
			continue
		}
		// The provider's room less the units Headroom keeps unused.
		units := min(w.Remaining-(b.stated-b.limit), b.wb.Capacity)
		units = max(units, 0)
		args = append(args, b.field, b.wb.Span-b.wb.Charge(units), 2*b.wb.Span)
	}
	if args == nil {
		return nil
	}
	return append([]any{0}, args...)
}
