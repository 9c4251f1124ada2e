package pacer

import (
	"context"
	"errors"
	"log/slog"

	"github.com/llmpacer/llmpacer/classify"
)

// SlogObserver returns an observer for Config.Observe that logs every event
// to l (slog.Default() if nil), with the budget and what the event carries
// as attributes: tokens, priority, limit, wait, how a lease ended, the
// tokens it used and how long it was held, a failure's verdict, the error.
//
// Levels say who should look:
//   - Debug: admissions, waits, leases ended as expected, and TryAcquire's
//     refusal for want of room (ErrWaitTimeout with a Bound of 0: a job
//     queue's normal answer, not a failure);
//   - Info: pauses and resumes, calls whose own context ended, and Redis
//     answering again (a Redis event without Err);
//   - Warn: denials, stops (an exhausted quota or an operator's Stop),
//     expired leases, failed calls (the Ended of a lease Lease.Fail
//     ended), Redis lost (a Redis event with Err), and Warning events (a
//     lost state, a maxmemory-policy that may evict).
//
// Events of calls admitted by this process's share while Redis was down
// carry local=true.
//
// Attributes are built only for the levels l has enabled.
func SlogObserver(l *slog.Logger) func(Event) {
	return func(e Event) {
		log := l
		if log == nil {
			log = slog.Default()
		}
		level, msg := slogLevel(e)
		ctx := context.Background()
		if !log.Enabled(ctx, level) {
			return
		}
		log.LogAttrs(ctx, level, msg, slogAttrs(e)...)
	}
}

func slogLevel(e Event) (slog.Level, string) {
	switch e.Kind {
	case Admitted:
		return slog.LevelDebug, "llmpacer: call admitted"
	case Waiting:
		return slog.LevelDebug, "llmpacer: call waiting"
	case Denied:
		if r := (*RefusedError)(nil); errors.As(e.Err, &r) && r.now() {
			return slog.LevelDebug, "llmpacer: no room yet"
		}
		return slog.LevelWarn, "llmpacer: call denied"
	case Ended:
		switch {
		case e.Verdict.Kind == classify.Canceled:
			return slog.LevelInfo, "llmpacer: call canceled"
		case e.End == Expired:
			return slog.LevelWarn, "llmpacer: lease expired"
		case failedEnd(e):
			return slog.LevelWarn, "llmpacer: call failed"
		}
		return slog.LevelDebug, "llmpacer: lease ended"
	case Paused:
		switch {
		case errors.Is(e.Err, ErrQuotaExhausted):
			return slog.LevelWarn, "llmpacer: budget stopped, provider quota exhausted"
		case e.Err != nil:
			return slog.LevelWarn, "llmpacer: budget stopped"
		}
		return slog.LevelInfo, "llmpacer: budget paused"
	case Resumed:
		return slog.LevelInfo, "llmpacer: budget resumed"
	case Redis:
		if e.Err != nil {
			return slog.LevelWarn, "llmpacer: Redis unreachable, failing open or closed per Config.Outage"
		}
		return slog.LevelInfo, "llmpacer: Redis answers again, the shared budget admits"
	case Warning:
		if errors.Is(e.Err, ErrStateLost) {
			return slog.LevelWarn, "llmpacer: Redis lost the budget's state; its buckets restart empty"
		}
		return slog.LevelWarn, "llmpacer: Redis setting puts the budget at risk"
	}
	return slog.LevelWarn, "llmpacer: " + e.Kind.String()
}

func slogAttrs(e Event) []slog.Attr {
	a := []slog.Attr{slog.String("budget", e.Name)}
	request := func() {
		a = append(a, slog.Int64("tokens", e.Tokens), slog.String("priority", e.Priority.String()))
	}
	limit := func() {
		if e.Limit != "" {
			a = append(a, slog.String("limit", e.Limit))
		}
	}
	// Event.Wait means something else for each kind: each gets its name.
	switch e.Kind {
	case Admitted:
		request()
		a = append(a, slog.Duration("waited", e.Wait))
	case Waiting:
		request()
		limit()
		a = append(a, slog.Duration("wait", e.Wait))
	case Denied:
		request()
		limit()
		a = append(a, slog.Duration("retry_after", e.Wait))
	case Ended:
		a = append(a, slog.String("end", e.End.String()), slog.Int64("tokens", e.Tokens),
			slog.Int64("used", e.Used), slog.Duration("held", e.Held))
		if failedEnd(e) {
			a = verdictAttrs(a, e)
		}
	case Paused:
		if e.Err != nil { // a stop
			a = append(a, slog.Duration("stop", e.Wait))
			break
		}
		limit()
		a = append(a, slog.Duration("pause", e.Wait))
	case Redis:
		if e.Err == nil {
			a = append(a, slog.Duration("down", e.Wait))
		}
	case Warning:
		if errors.Is(e.Err, ErrStateLost) {
			a = append(a, slog.Duration("refill", e.Wait))
		}
	}
	if e.Local {
		a = append(a, slog.Bool("local", true))
	}
	if e.Err != nil && e.Kind != Paused { // a stop's Err is its kind, which msg says
		a = append(a, slog.Any("err", e.Err))
	}
	return a
}

// failedEnd says whether e is the Ended event of a lease that Lease.Fail
// ended for a failure it knew something of: a verdict, or the call's
// error (an expired lease's Err is its expiry).
func failedEnd(e Event) bool {
	return e.Kind == Ended && (e.Verdict != (classify.Verdict{}) || e.Err != nil && e.End != Expired)
}

// verdictAttrs adds a failed call's priority and verdict to a.
func verdictAttrs(a []slog.Attr, e Event) []slog.Attr {
	v := e.Verdict
	a = append(a, slog.String("priority", e.Priority.String()), slog.String("verdict", v.Kind.String()))
	if v.Status != 0 {
		a = append(a, slog.Int("status", v.Status))
	}
	if v.Code != "" {
		a = append(a, slog.String("code", v.Code))
	}
	if v.Provider != "" {
		a = append(a, slog.String("provider", v.Provider))
	}
	if v.RetryAfter > 0 {
		a = append(a, slog.Duration("retry_after", v.RetryAfter))
	}
	return a
}
