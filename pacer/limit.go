package pacer

// Limit names one limit of a budget: the one that made a call wait or be
// denied, or that a pause or stop came from.
type Limit string

// The limits a budget has.
const (
	LimitRPM         Limit = "rpm"         // requests per minute
	LimitTPM         Limit = "tpm"         // tokens per minute
	LimitRPD         Limit = "rpd"         // requests per day
	LimitTPD         Limit = "tpd"         // tokens per day
	LimitConcurrency Limit = "concurrency" // calls in flight
	LimitPause       Limit = "pause"       // a pause set by Pause or Throttled
	LimitQuota       Limit = "quota"       // a stop set by StopQuota: the provider's quota is exhausted
	LimitStop        Limit = "stop"        // a stop set by Stop
)
