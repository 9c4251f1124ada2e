package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// scenarioReport is one scenario's results: the shape of the run and one
// row per mode.
type scenarioReport struct {
	Name           string `json:"scenario"`
	About          string `json:"about"`
	Workers        int    `json:"workers"`
	Jobs           int    `json:"jobs"`
	JobTokens      int64  `json:"job_tokens"` // prompt + max_tokens, all jobs
	ProviderTokens int64  `json:"provider_tokens"`
	// ProviderRequests is the provider's request limit per window; 0 is none.
	ProviderRequests int64   `json:"provider_requests,omitempty"`
	WindowSeconds    float64 `json:"window_seconds"` // wall time, after -speed
	ProviderMode     string  `json:"provider_mode"`  // token bucket or sliding window
	LatencyMs        float64 `json:"latency_ms"`     // wall time, after -speed
	Speed            float64 `json:"speed"`
	QuotaTokens      int64   `json:"quota_tokens,omitempty"`
	Redis            string  `json:"redis"`
	// Procs is the OS processes each row's workers ran in (-procs).
	Procs int `json:"procs"`
	// FloorSeconds is the floor against a provider that keeps max_tokens,
	// for the rows that run against one; null when it means nothing
	// (quota) or no row does.
	FloorSeconds *float64 `json:"floor_seconds"`
	// RefundFloorSeconds is the floor against a provider that refunds, for
	// the rows that run against one (-provider-refund, mixed).
	RefundFloorSeconds *float64    `json:"refund_floor_seconds,omitempty"`
	BinSeconds         float64     `json:"bin_seconds"` // width of the rows' timeline bins
	Rows               []rowResult `json:"rows"`
	// Table is a budget scenario's own table (lane.go), and Budgets its
	// figures; their rows are then empty.
	Table   *customTable `json:"table,omitempty"`
	Budgets any          `json:"budgets,omitempty"`

	floorHow string // how the floor was computed, for the table
}

// rowResult is one mode's run. Calls, 429s and tokens are the provider's
// own counters.
type rowResult struct {
	Mode   string `json:"mode"` // per-worker or shared
	Label  string `json:"label"`
	Budget string `json:"budget"`
	// ProviderRefunds says the row's provider gave unused max_tokens back
	// when a call ended.
	ProviderRefunds bool `json:"provider_refunds"`
	// BudgetFloorSeconds is the floor of the shared budget's own capacity
	// and refill, for shared rows when the scenario has a floor.
	BudgetFloorSeconds *float64      `json:"budget_floor_seconds,omitempty"`
	Seconds            float64       `json:"seconds"`
	Calls              int64         `json:"calls"`
	OK                 int64         `json:"ok"`
	RateLimited        int64         `json:"rate_limited"`
	QuotaErrors        int64         `json:"quota_errors"`
	Jobs               int           `json:"jobs"`
	Failed             int           `json:"failed"`
	QuotaFailed        int           `json:"quota_failed"` // jobs that ended on an exhausted quota
	Attempts           int           `json:"attempts"`     // calls the jobs sent, all jobs
	TokensAdmitted     int64         `json:"tokens_admitted"`
	TokensUsed         int64         `json:"tokens_used"`
	TokensRefunded     int64         `json:"tokens_refunded"` // unused max_tokens the provider gave back
	TokensPerSec       float64       `json:"tokens_per_second"`
	RedisCommands      int64         `json:"redis_commands"`
	RedisPerJob        float64       `json:"redis_commands_per_job"`
	Wait               waitStats     `json:"wait"`
	Interactive        *waitStats    `json:"interactive_wait,omitempty"`
	Batch              *waitStats    `json:"batch_wait,omitempty"`
	Outside            *outsideCount `json:"outside,omitempty"`
	Outage             *outageResult `json:"outage,omitempty"` // redis-down rows
	// FirstByte is, for SDK rows, each job's time from its call to the
	// first byte of the answer's body reaching the SDK (waits and retries
	// included), of the jobs that got one.
	FirstByte *waitStats `json:"first_byte,omitempty"`
	// HeadersToFirstByte is, for the same jobs, the time from the answer's
	// headers coming off the wire (below the transport) to its first byte
	// reaching the SDK (above it): what the transport adds, and the
	// provider's own gap between headers and body.
	HeadersToFirstByte *waitStats `json:"headers_to_first_byte,omitempty"`
	// Pacer is, for transport rows, what the Pacers observed.
	Pacer    *paceCount `json:"pacer,omitempty"`
	Timeline []bin      `json:"timeline"`

	events []event
}

// waitStats summarises the jobs' waits (time outside provider calls) of
// the jobs that succeeded, in milliseconds.
type waitStats struct {
	N      int     `json:"n"`
	Failed int     `json:"failed"` // of the N, jobs that failed (their wait runs until they gave up)
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
}

func newWaitStats(d []time.Duration, failed int) waitStats {
	s := slices.Clone(d)
	slices.Sort(s)
	ms := func(p float64) float64 { return float64(percentile(s, p)) / float64(time.Millisecond) }
	return waitStats{N: len(s), Failed: failed, P50: ms(50), P95: ms(95), P99: ms(99)}
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. It returns 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(k, 1), len(sorted))-1]
}

func newScenarioReport(pl *plan, be *backend) scenarioReport {
	var total int64
	for _, j := range pl.jobs {
		total += j.charge()
	}
	r := scenarioReport{
		Name: pl.name, About: pl.about, Workers: pl.p.workers, Jobs: len(pl.jobs), JobTokens: total,
		ProviderTokens: pl.p.providerTokens, ProviderRequests: pl.p.providerReqs, WindowSeconds: pl.provider.Window.Seconds(),
		ProviderMode: "token bucket", LatencyMs: float64(pl.provider.Latency) / float64(time.Millisecond),
		Speed: pl.p.speed, QuotaTokens: pl.quota, Redis: be.desc, Procs: pl.procs,
	}
	if pl.p.sliding {
		r.ProviderMode = "sliding window"
	}
	if pl.quota > 0 {
		return r // the floor means nothing when jobs cannot all succeed
	}
	for _, v := range pl.rows {
		f := pl.idealFinish(v.providerRefund).Seconds()
		if v.providerRefund {
			r.RefundFloorSeconds = &f
		} else {
			r.FloorSeconds = &f
		}
	}
	r.floorHow = "jobs served in order of arrival at the provider's limit"
	allAtStart := !slices.ContainsFunc(pl.jobs, func(j job) bool { return j.at > 0 })
	if allAtStart && !pl.p.sliding && pl.outside == nil {
		r.floorHow = fmt.Sprintf("(%s - %s burst) / %s per s", thousands(total), thousands(pl.p.providerTokens),
			thousands(int64(math.Round(float64(pl.p.providerTokens)/r.WindowSeconds))))
	}
	if pl.outside != nil {
		r.floorHow = "at the rate the outside caller leaves"
	}
	return r
}

// floor is the floor for the row's provider, or nil.
func (r *scenarioReport) floor(row rowResult) *float64 {
	if row.ProviderRefunds {
		return r.RefundFloorSeconds
	}
	return r.FloorSeconds
}

// binTimelines sorts every row's events into bins of one width, chosen so
// the longest row has some 60 to 150 of them.
func (r *scenarioReport) binTimelines() {
	var longest float64
	for _, row := range r.Rows {
		longest = max(longest, row.Seconds)
	}
	w := 10 * time.Millisecond
	for _, c := range []time.Duration{20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000} {
		if longest/w.Seconds() <= 150 {
			break
		}
		w = c * time.Millisecond
	}
	r.BinSeconds = w.Seconds()
	until := time.Duration(longest * float64(time.Second))
	for i := range r.Rows {
		r.Rows[i].Timeline = timeline(r.Rows[i].events, w, until)
	}
}

// printTable writes the scenario as a table a person reads.
func printTable(w io.Writer, r scenarioReport) {
	fmt.Fprintf(w, "%s: %s\n", r.Name, r.About)
	if t := r.Table; t != nil {
		printCustom(w, t)
		return
	}
	reqs := ""
	if r.ProviderRequests > 0 {
		reqs = fmt.Sprintf(" and %s requests", thousands(r.ProviderRequests))
	}
	fmt.Fprintf(w, "  %d workers, %d jobs, %s tokens (prompt + max_tokens); provider %s tokens%s per %s, %s%s, %s per call",
		r.Workers, r.Jobs, thousands(r.JobTokens), thousands(r.ProviderTokens), reqs, secs(r.WindowSeconds), r.ProviderMode, r.refundWords(), dur(r.LatencyMs))
	if r.Speed != 1 {
		fmt.Fprintf(w, " (-speed %g: windows and latencies ÷%g)", r.Speed, r.Speed)
	}
	fmt.Fprintf(w, "; %s", r.Redis)
	if r.Procs > 1 {
		fmt.Fprintf(w, "; workers in %d OS processes", r.Procs)
	}
	fmt.Fprintln(w)
	if r.QuotaTokens > 0 {
		fmt.Fprintf(w, "  provider credit: %s tokens of real usage\n", thousands(r.QuotaTokens))
	}
	switch f, rf := r.FloorSeconds, r.RefundFloorSeconds; {
	case f != nil && rf != nil:
		fmt.Fprintf(w, "  floor %.2f s: %s\n", *f, r.floorHow)
		fmt.Fprintf(w, "  floor %.2f s against the refunding provider: each call keeps only its real usage\n", *rf)
	case f != nil:
		fmt.Fprintf(w, "  floor %.2f s: %s\n", *f, r.floorHow)
	case rf != nil:
		fmt.Fprintf(w, "  floor %.2f s: jobs served in order of arrival at the provider's limit, each keeping only its real usage\n", *rf)
	}
	fmt.Fprintln(w)
	cells := [][]string{{"mode", "seconds", "vs floor", "calls", "429s", "failed", "tokens/s", "redis/job", "wait p50", "p95", "p99"}}
	for _, row := range r.Rows {
		vs, redis := "-", "-"
		if f := r.floor(row); f != nil && *f > 0 {
			vs = fmt.Sprintf("%+.1f%%", (row.Seconds / *f - 1)*100)
		}
		if row.Mode == "shared" || row.Mode == "transport" {
			redis = fmt.Sprintf("%.1f", row.RedisPerJob)
		}
		cells = append(cells, []string{row.Label, fmt.Sprintf("%.2f", row.Seconds), vs,
			fmt.Sprint(row.Calls), fmt.Sprint(row.RateLimited), fmt.Sprint(row.Failed),
			thousands(int64(math.Round(row.TokensPerSec))), redis,
			dur(row.Wait.P50), dur(row.Wait.P95), dur(row.Wait.P99)})
	}
	writeCells(w, cells)
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		fmt.Fprintf(w, "  %s: %s", row.Label, row.Budget)
		if f := row.BudgetFloorSeconds; f != nil {
			fmt.Fprintf(w, "; the budget's own floor %.2f s", *f)
		}
		fmt.Fprintln(w)
		if row.Interactive != nil {
			i, b := row.Interactive, row.Batch
			fmt.Fprintf(w, "    interactive wait p50 %s, p95 %s (%d calls, %d failed); batch wait p50 %s, p95 %s (%d jobs, %d failed)\n",
				dur(i.P50), dur(i.P95), i.N, i.Failed, dur(b.P50), dur(b.P95), b.N, b.Failed)
		}
		if f := r.floor(row); f != nil && row.Seconds < *f && row.Failed > 0 {
			fmt.Fprintf(w, "    beat the floor only by giving up: %d of %d jobs failed\n", row.Failed, row.Jobs)
		}
		if fb := row.FirstByte; fb != nil {
			ah := row.HeadersToFirstByte
			fmt.Fprintf(w, "    first byte of the answer: p50 %s, p95 %s after the call began; p50 %s, p95 %s after its headers came off the wire (%d jobs)\n",
				dur(fb.P50), dur(fb.P95), micros(ah.P50), micros(ah.P95), fb.N)
		}
		if pc := row.Pacer; pc != nil {
			fmt.Fprintf(w, "    pacer: %d admissions reserved %s tokens; %d leases ended with %s used (%d settled, %d kept their reservation, %d gave it back), %d pauses\n",
				pc.Admitted, thousands(pc.TokensReserved), pc.Ended, thousands(pc.TokensUsed), pc.Settled, pc.Kept, pc.GivenBack, pc.Pauses)
		}
		if o := row.Outside; o != nil {
			fmt.Fprintf(w, "    of which the outside caller: %d calls, %d 429s\n", o.Calls, o.RateLimited)
		}
		if o := row.Outage; o != nil {
			fmt.Fprintf(w, "    Redis down %.1f s: %d calls (%s tokens) admitted by the %d pods' own shares", o.DownSeconds, o.Admitted, thousands(o.AdmittedTokens), o.Pods)
			if o.LocalBound > 0 {
				fmt.Fprintf(w, ", bound %s tokens", thousands(o.LocalBound))
			}
			fmt.Fprintf(w, "; %d acquires refused; shared budget back %.2f s after Redis answered\n", o.Refused, o.BackSeconds)
		}
		if row.TokensUsed != row.TokensAdmitted && row.QuotaErrors == 0 {
			fmt.Fprintf(w, "    tokens admitted (prompt + max_tokens) %s, really used %s", thousands(row.TokensAdmitted), thousands(row.TokensUsed))
			if row.ProviderRefunds {
				fmt.Fprintf(w, ", given back by the provider %s", thousands(row.TokensRefunded))
			}
			fmt.Fprintln(w)
		}
		if row.QuotaErrors > 0 {
			fmt.Fprintf(w, "    quota: %d jobs stopped on it after %d calls to an exhausted quota (%d of them retries)\n",
				row.QuotaFailed, row.QuotaErrors, row.QuotaErrors-int64(row.QuotaFailed))
		}
	}
	fmt.Fprintln(w)
}

// refundWords says whether the provider refunds unused max_tokens, for the
// header: nothing when it keeps them, as OpenAI documents and every row
// but mixed's refunding ones assume.
func (r *scenarioReport) refundWords() string {
	var some, all = false, len(r.Rows) > 0
	for _, row := range r.Rows {
		some = some || row.ProviderRefunds
		all = all && row.ProviderRefunds
	}
	switch {
	case all:
		return ", refunding unused max_tokens"
	case some:
		return ", with and without refunds"
	}
	return ""
}

// writeCells writes a table: the first column left-aligned, the others
// right-aligned, two spaces apart, indented by two.
func writeCells(w io.Writer, cells [][]string) {
	width := make([]int, len(cells[0]))
	for _, row := range cells {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range cells {
		var b strings.Builder
		b.WriteString(" ")
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(" " + c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// writeJSON writes every scenario's report as one JSON document.
func writeJSON(w io.Writer, reports []scenarioReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Scenarios []scenarioReport `json:"scenarios"`
	}{reports})
}

// thousands formats n with comma separators: 120000 → "120,000".
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// dur formats milliseconds compactly: "0ms", "35ms", "1.2s".
func dur(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("%.0fms", ms)
	}
	return secs(ms / 1000)
}

// micros formats milliseconds as whole microseconds: "83µs".
func micros(ms float64) string { return fmt.Sprintf("%.0fµs", ms*1000) }

func secs(s float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", s), "0"), ".") + "s"
}
