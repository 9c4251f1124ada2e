package lua_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmpacer/llmpacer/pacer"
)

// vlease is what a client keeps of an admitted lease.
type vlease struct {
	StartUs   int64 `json:"start_us"`   // the call's turn: now_us + wait_ms × 1000
	ExpiryMs  int64 `json:"expiry_ms"`  // expiry_ms of the reply
	ChargedUs int64 `json:"charged_us"` // what settle is sent as ARGV[2]
}

type acquireReplyCase struct {
	Name    string   `json:"name"`
	Config  string   `json:"config"`
	Request vrequest `json:"request"`
	// Replies answer the call's acquire attempts in order.
	Replies []any `json:"replies"`
	// The outcome: a lease, or an error with, for not_yet and
	// wait_timeout, the wait and the limit that set it.
	Error  string  `json:"error,omitempty"`
	WaitMs int64   `json:"wait_ms,omitempty"`
	Limit  string  `json:"limit,omitempty"`
	Lease  *vlease `json:"lease,omitempty"`
	// Calls are the acquire calls made. On an attempt after the first,
	// ARGV[3] (what is left of the wait bound) depends on the time slept,
	// and is shown as "<remaining>".
	Calls []wireCall `json:"calls"`
}

func acquireReplyVectors(t *testing.T) any {
	const n, exp = nowUs, nowUs/1000 + 90_000 // "everything": a 90 s lease TTL
	const xp = exp + 30_000                   // the state's keys live past the lease
	try, acq := req("try", 4000, "interactive"), req("acquire", 4000, "interactive")
	cases := []acquireReplyCase{
		{Name: "admitted now", Config: "everything", Request: try, Replies: []any{[]any{int64(1), int64(0), n, "", exp, int64(0), xp}}},
		{Name: "admitted with a turn in 250 ms", Config: "everything", Request: acq, Replies: []any{[]any{int64(1), int64(250), n, "tpm", exp + 250, int64(0), xp}}},
		{Name: "admitted before: a retry whose first reply was lost", Config: "everything", Request: acq, Replies: []any{[]any{int64(2), int64(0), n, "", exp - 3, int64(0), xp}}},
		{Name: "admitted before, turn still ahead", Config: "everything", Request: acq, Replies: []any{[]any{int64(2), int64(1200), n, "", exp + 1200, int64(0), xp}}},
		{Name: "no slot now", Config: "everything", Request: try, Replies: []any{[]any{int64(0), int64(340), n, "concurrency", int64(0), int64(0), xp}}},
		{Name: "wait beyond the bound", Config: "everything", Request: acq, Replies: []any{[]any{int64(0), int64(6000), n, "tpm", int64(0), int64(0), xp}}},
		{Name: "denied, then admitted on the retry with the same id", Config: "everything", Request: acq, Replies: []any{
			[]any{int64(0), int64(300), n, "rpm", int64(0), int64(0), xp}, []any{int64(1), int64(0), n + 301_000, "", exp + 301, int64(0), xp}}},
		{Name: "pending: a turn in 250 ms, then its slot claimed with the ticket", Config: "everything", Request: acq, Replies: []any{
			[]any{int64(1), int64(250), n, "tpm", exp + 250, n + 250_000, xp}, []any{int64(1), int64(0), n + 251_000, "", exp + 251, int64(0), xp}}},
		{Name: "never fits", Config: "everything", Request: acq, Replies: []any{[]any{int64(-1), int64(0), n, "tpm", int64(0), int64(0), xp}}},
		{Name: "stopped: the quota is exhausted", Config: "everything", Request: acq, Replies: []any{[]any{int64(0), int64(60000), n, "quota", int64(0), int64(0), xp}}},
		{Name: "stopped by an operator", Config: "everything", Request: try, Replies: []any{[]any{int64(0), int64(90000), n, "stop", int64(0), int64(0), xp}}},
		{Name: "the probe of a stopped budget", Config: "everything", Request: acq, Replies: []any{[]any{int64(1), int64(0), n, "probe", exp, int64(0), xp}}},
		{Name: "four elements", Config: "basic", Request: try, Replies: []any{[]any{int64(1), int64(0), n, ""}}},
		{Name: "five elements (the contract before the slot queue)", Config: "basic", Request: try, Replies: []any{[]any{int64(1), int64(0), n, "", exp}}},
		{Name: "six elements (the contract before the state's xp)", Config: "basic", Request: try, Replies: []any{[]any{int64(1), int64(0), n, "", exp, int64(0)}}},
		{Name: "eight elements", Config: "basic", Request: try, Replies: []any{[]any{int64(1), int64(0), n, "", exp, int64(0), xp, int64(0)}}},
		{Name: "xp below -1", Config: "basic", Request: try, Replies: []any{[]any{int64(1), int64(0), n, "", exp, int64(0), int64(-2)}}},
		{Name: "the state was lost (xp -1): its buckets restarted empty; admitted on the retry", Config: "everything", Request: acq, Replies: []any{
			[]any{int64(0), int64(300), n, "rpm", int64(0), int64(0), int64(-1)}, []any{int64(1), int64(0), n + 301_000, "", exp + 301, int64(0), xp}}},
		{Name: "negative wait", Config: "basic", Request: try, Replies: []any{[]any{int64(1), int64(-5), n, "", exp, int64(0), xp}}},
		{Name: "unknown code", Config: "basic", Request: try, Replies: []any{[]any{int64(4), int64(0), n, "", exp, int64(0), xp}}},
		{Name: "another definition stored: read it, ask again", Config: "basic", Request: try, Replies: []any{
			[]any{int64(3), int64(0), n, "definition", int64(0), int64(2), xp},
			[]any{int64(0), int64(2), `{"limits":{"RPM":0,"TPM":0,"RPD":0,"TPD":0,"Concurrency":0},"burst":{"RPM":0,"TPM":0,"RPD":0,"TPD":0},"rates":[{"Unit":1,"Limit":7,"Window":3600000000000,"Burst":0,"Sliding":false}],"tenants":{"Rates":null,"Share":0}}`},
			[]any{int64(1), int64(0), n, "", exp, int64(0), xp}}},
		{Name: "reason not a string", Config: "basic", Request: try, Replies: []any{[]any{int64(1), int64(0), n, int64(7), exp, int64(0), xp}}},
		{Name: "code as a string", Config: "basic", Request: try, Replies: []any{[]any{"1", int64(0), n, "", exp, int64(0), xp}}},
		{Name: "not an array", Config: "basic", Request: try, Replies: []any{"OK"}},
	}
	for i := range cases {
		c := &cases[i]
		cfg := configByName(t, c.Config)
		inBubble(t, cfg.config(), func(p *pacer.Pacer, f *fakeWire) {
			f.queue(c.Replies...)
			l, err := c.Request.call(p)
			c.Calls = f.take()
			for j := 1; j < len(c.Calls); j++ {
				if len(c.Calls[j].Args) > 2 {
					c.Calls[j].Args[2] = "<remaining>"
				}
			}
			for j := range c.Calls {
				c.Calls[j].Keys = nil
			}
			if err != nil {
				c.Error = errName(err)
				var re *pacer.RefusedError
				if errors.As(err, &re) && errors.Is(err, pacer.ErrWaitTimeout) {
					c.Limit = re.Limit
				}
				if wait, ok := pacer.RetryAfter(err); ok && c.Limit != "" {
					c.WaitMs = wait.Milliseconds()
				}
				return
			}
			// The charge time shows in what a settle sends.
			f.queue([]any{int64(1), n})
			if err := l.Cancel(context.Background()); err != nil {
				t.Fatalf("%s: Cancel: %v", c.Name, err)
			}
			s := only(t, c.Name+" Cancel", f.take())
			c.Lease = &vlease{StartUs: l.Info().Start.UnixMicro(), ExpiryMs: l.Info().Expiry.UnixMilli(), ChargedUs: atoi(s.Args[1])}
		})
	}
	return map[string]any{
		"comment": "What acquire's replies mean to the Go client. A reply is {code, wait_ms, now_us, reason, expiry_ms, ticket, xp}; " +
			"anything else is bad_reply. lease: start_us, the call's turn; expiry_ms; charged_us, settle's ARGV[2]: now_us, " +
			"or for code 2 (charged by an earlier attempt) a lower bound: now_us less the time since this attempt was sent " +
			"(0 here) less 1000 µs. not_yet and wait_timeout carry the wait and the limit; too_large means never retry. " +
			"After a denial the call sleeps wait_ms (plus up to 10% jitter) and retries with the same lease id, sending what is left of its bound. " +
			"An admission with a ticket is pending: the call sleeps wait_ms, then claims its slot by sending the ticket as ARGV[8]; the lease keeps the pending admission's turn and charge time. " +
			"xp is the state's expiry as the script read it (0: none), or -1 when the call found the state lost: the client keeps the latest xp or lease expiry it saw, and sends it after the version, with each bucket's span, on every later acquire.",
		"cases": cases,
	}
}
