package pacerhttp

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmpacer/llmpacer/pacer"
)

// The RateLimit headers follow draft-ietf-httpapi-ratelimit-headers-11
// (May 2026; https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/),
// whose two fields are Structured Field Lists (RFC 9651):
//
//	RateLimit-Policy: "tpm";q=10000;w=60
//	RateLimit: "tpm";r=0;t=12
//
// A policy item is a String naming the policy, with q (the quota, an
// Integer), w (the window in whole seconds) and qu (the quota unit, one of
// the draft's registry: "requests", the default, "content-bytes",
// "concurrent-requests"). A service-limit item names the same policy, with
// r (the quota available now) and t (seconds within which no more than r
// may be used). Section 6 asks that Retry-After not point earlier than t,
// so both carry the same value. The registry names no unit of tokens: a
// token policy says so in its name ("tpm", "@tokens/3600s"), and leaves qu
// out rather than invent a value.
//
// The problem types of the 429 and 503 bodies are the draft's section 5:
// quota-exceeded and temporary-reduced-capacity.
const (
	problemQuotaExceeded   = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	problemReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// snapshotTimeout bounds the one Redis read a refusal makes for its
// RateLimit headers; without an answer by then the headers are left out,
// and Retry-After alone says when to come back.
const snapshotTimeout = time.Second

// quota is one limit as the RateLimit headers state it.
type quota struct {
	q, w, r int64  // quota, window (s; 0: none), available now
	unit    string // qu; "" for the default
}

// tooMany answers a refusal: 429 with RateLimit headers for a limit that
// binds, 503 for a budget stopped or paused.
func (h *handler) tooMany(w http.ResponseWriter, r *http.Request, why Refusal) {
	secs := retrySeconds(why.Wait)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	problem := map[string]any{"violated-policies": []string{why.Limit}}
	status := http.StatusTooManyRequests
	if why.Stopped() {
		status = http.StatusServiceUnavailable
		problem["type"], problem["title"] = problemReducedCapacity, "The service is paused or stopped by its LLM provider's limits; retry after "+strconv.FormatInt(secs, 10)+" s"
	} else {
		problem["type"], problem["title"] = problemQuotaExceeded, "No room in the "+why.Limit+" limit; retry after "+strconv.FormatInt(secs, 10)+" s"
		if q, ok := h.quotaOf(r, why); ok {
			name := sfString(why.Limit)
			policy := name + ";q=" + strconv.FormatInt(q.q, 10)
			if q.w > 0 {
				policy += ";w=" + strconv.FormatInt(q.w, 10)
			}
			if q.unit != "" {
				policy += ";qu=" + sfString(q.unit)
			}
			w.Header().Set("RateLimit-Policy", policy)
			w.Header().Set("RateLimit", name+";r="+strconv.FormatInt(q.r, 10)+";t="+strconv.FormatInt(secs, 10))
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem)
}

// retrySeconds rounds a wait up to whole seconds, at least 1: Retry-After
// counts whole seconds, and 0 would invite a retry storm.
func retrySeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// quotaOf reads the limit that refused why: from the tenant's snapshot for
// a tenant's own limit ("@...") or share ("%..."), else from the budget's.
// One Redis call, bounded by snapshotTimeout.
func (h *handler) quotaOf(r *http.Request, why Refusal) (quota, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), snapshotTimeout)
	defer cancel()
	name := why.Limit
	if strings.HasPrefix(name, "@") || strings.HasPrefix(name, "%") {
		s, err := h.p.TenantSnapshot(ctx, why.Tenant)
		if err != nil {
			h.log(r, err)
			return quota{}, false
		}
		rates := s.Rates
		if name[0] == '%' {
			rates = s.Shares
		}
		return rateQuota(rates, name[1:])
	}
	s, err := h.p.Snapshot(ctx)
	if err != nil {
		h.log(r, err)
		return quota{}, false
	}
	switch why.Limit {
	case "concurrency": // pacer's name for Limits.Concurrency
		return quota{q: s.Concurrency, r: max(0, s.Concurrency-s.InFlight), unit: "concurrent-requests"}, s.Concurrency > 0
	}
	return rateQuota(s.Rates, name)
}

// rateQuota finds the rate named name.
func rateQuota(rates []pacer.RateState, name string) (quota, bool) {
	for _, rs := range rates {
		if rs.Rate.Name() == name {
			return bucketQuota(rs)
		}
	}
	return quota{}, false
}

// bucketQuota states a bucket: its limit over its window, and what it
// holds now (never below 0: a budget in debt has none available).
func bucketQuota(b pacer.RateState) (quota, bool) {
	window := b.Rate.Window
	if b.Limit == 0 {
		return quota{}, false
	}
	return quota{q: b.Limit, w: int64(math.Ceil(window.Seconds())), r: max(0, int64(math.Floor(b.Level)))}, true
}

// sfString writes s as a Structured Field String (RFC 9651 section
// 3.3.3): quoted, with '"' and '\' escaped. Limit names are printable
// ASCII; any other byte is dropped rather than written malformed.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
