package pacer

import "github.com/llmpacer/llmpacer/classify"

// The names of the limits Limits states, as Rate.Name gives them.
const (
	nameRPM         = "rpm"
	nameTPM         = "tpm"
	nameRPD         = "rpd"
	nameTPD         = "tpd"
	nameConcurrency = "concurrency" // calls in flight (Limits.Concurrency)
)

// The reasons a script's reply gives for a wait or a refusal that are not
// limits: a pause, and the two kinds of stop (see lua/stop.lua). They are
// the wire's names, mapped here, at the edge, so that no name of a limit
// means a pause or a stop.
const (
	wirePause = "pause" // a pause set by Pause or by Lease.Fail on a 429
	wireQuota = "quota" // a stop set by Lease.Fail on an exhausted quota
	wireStop  = "stop"  // a stop set by Stop
)

// limitOfReason returns the limit a reply's reason names: the reason
// itself, or "" for a pause (the reply does not say what the 429 that set
// it named) or a stop (ErrStopped says so).
func limitOfReason(reason string) string {
	switch reason {
	case wirePause, wireQuota, wireStop:
		return ""
	}
	return reason
}

// throttledName names the limit a provider's 429 named, as Event.Limit
// reports it for a 429's pause (Lease.Fail): "rpm" for requests, "tpm" for tokens
// (input or output ones too), or "" when it named none.
func throttledName(l classify.Limit) string {
	switch l {
	case classify.LimitRequests:
		return nameRPM
	case classify.LimitTokens, classify.LimitInputTokens, classify.LimitOutputTokens:
		return nameTPM
	}
	return ""
}
