package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runJSON runs the storm with args and -json -quiet, and returns the one
// scenario it reports.
func runJSON(t *testing.T, args ...string) scenarioReport {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append(args, "-json", "-quiet"), &out, io.Discard); err != nil {
		t.Fatalf("run(%q) = %v", args, err)
	}
	var doc struct {
		Scenarios []scenarioReport `json:"scenarios"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Scenarios) != 1 {
		t.Fatalf("-json output does not parse into one scenario (%v):\n%s", err, out.String())
	}
	return doc.Scenarios[0]
}

// The sdk scenario, shortened: the real openai-go client with its default
// retries. Alone, its workers meet 429s; through the transport they meet
// next to none, fail nothing, send one call per job, and finish near the
// floor. The transport reserves exactly what the provider charges, so
// the jobs' prompt texts are estimated as pacerhttp estimates them.
func TestSDKScenarioShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the storm for a few seconds")
	}
	r := runJSON(t, "-scenario", "sdk", "-speed", "4")
	if len(r.Rows) != 3 || r.FloorSeconds == nil {
		t.Fatalf("%d rows, floor %v; want 3 rows and a floor", len(r.Rows), r.FloorSeconds)
	}
	floor := *r.FloorSeconds
	for _, row := range r.Rows {
		t.Logf("%s: %.3f s, %d calls, %d 429s, %d failed, %.1f redis/job", row.Label, row.Seconds, row.Calls, row.RateLimited, row.Failed, row.RedisPerJob)
		if row.Calls != int64(row.Attempts) {
			t.Errorf("%s: the provider saw %d calls, the jobs' transports sent %d", row.Label, row.Calls, row.Attempts)
		}
	}
	if bare := r.Rows[0]; bare.Mode != "sdk" || bare.RateLimited == 0 || bare.Pacer != nil {
		t.Errorf("%s: mode %q, %d 429s, pacer %v; want sdk, some 429s, no pacer", bare.Label, bare.Mode, bare.RateLimited, bare.Pacer)
	}
	for _, row := range r.Rows[1:] {
		if row.Mode != "transport" || row.Pacer == nil {
			t.Fatalf("%s: mode %q, pacer %v; want transport with a pacer count", row.Label, row.Mode, row.Pacer)
		}
		checkFew429s(t, row, r.Jobs)
		// The speed is measured in docs/storm.md; a machine loaded many
		// times over must still finish within a few floors.
		if row.Seconds < floor || row.Seconds > floor*3 {
			t.Errorf("%s took %.3f s; want between the floor %.3f s and three times as long", row.Label, row.Seconds, floor)
		}
		pc := row.Pacer
		if pc.Admitted != row.Calls || pc.TokensReserved != row.Calls*1000 || pc.Ended != pc.Admitted {
			t.Errorf("%s: %d admissions reserved %d tokens, %d ended, for %d calls of 1,000; want one admission of 1,000 per call, each ended",
				row.Label, pc.Admitted, pc.TokensReserved, pc.Ended, row.Calls)
		}
	}
}

// The stream scenario, shortened: through the transport every stream is
// settled with the usage its last chunk reports, which is what the
// provider counted; without include_usage every stream keeps its
// reservation. Every job's first byte is timed.
func TestStreamScenarioShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the storm for a few seconds")
	}
	r := runJSON(t, "-scenario", "stream", "-mode", "shared", "-jobs", "20", "-speed", "4")
	if len(r.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(r.Rows))
	}
	for _, row := range r.Rows {
		pc := row.Pacer
		t.Logf("%s: %.3f s, %d calls, %d 429s, pacer %+v", row.Label, row.Seconds, row.Calls, row.RateLimited, pc)
		checkFew429s(t, row, r.Jobs)
		if row.FirstByte == nil || row.FirstByte.N != r.Jobs || row.HeadersToFirstByte == nil {
			t.Errorf("%s: first byte %+v; want one per job", row.Label, row.FirstByte)
		}
		if pc == nil || pc.Ended != pc.Admitted || pc.TokensReserved != pc.Admitted*1000 {
			t.Fatalf("%s: pacer %+v; want every admission of 1,000 ended", row.Label, pc)
		}
		// A 429 (see checkFew429s) keeps its reservation.
		want := paceCount{Settled: pc.Admitted - row.RateLimited, Kept: row.RateLimited, TokensUsed: row.TokensUsed + row.RateLimited*1000}
		if strings.Contains(row.Label, "WithIncludeUsage(false)") {
			// No usage in a whole stream: settled at the reservation.
			want = paceCount{Settled: pc.Admitted, TokensUsed: pc.TokensReserved}
		}
		got := paceCount{Settled: pc.Settled, Kept: pc.Kept, TokensUsed: pc.TokensUsed}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: leases mismatch (-want +got):\n%s", row.Label, diff)
		}
	}
}

// outside adds two transport rows, with and without header sync, to the
// pacer.Run rows; sdk and stream run openai-go rows only, mapped onto
// -mode (per-worker: the SDK alone; shared: through the transport).
func TestSDKRows(t *testing.T) {
	type row struct {
		Label                   string
		Client                  clientKind
		NoSync, NoUsage, Shared bool
	}
	const via = "openai-go through pacerhttp, default retries"
	for _, tc := range []struct {
		args []string
		want []row
	}{
		{[]string{"-scenario", "outside", "-mode", "shared"}, []row{
			{"shared budget", clientRaw, false, false, true},
			{"shared, Headroom 0.2", clientRaw, false, false, true},
			{via + ", header sync", clientTransport, false, false, true},
			{via + ", WithHeaderSync(false)", clientTransport, true, false, true},
		}},
		{[]string{"-scenario", "sdk", "-retries", "1"}, []row{
			{"openai-go, 1 SDK retries, no pacing", clientSDK, false, false, false},
			{"openai-go through pacerhttp, 1 SDK retries", clientTransport, false, false, true},
			{"openai-go through pacerhttp, 1 SDK retries, WithHeaderSync(false)", clientTransport, true, false, true},
		}},
		{[]string{"-scenario", "stream", "-mode", "per-worker"}, []row{
			{"openai-go, default retries, no pacing", clientSDK, false, false, false},
		}},
		{[]string{"-scenario", "stream", "-mode", "shared"}, []row{
			{via, clientTransport, false, false, true},
			{via + ", WithHeaderSync(false)", clientTransport, true, false, true},
			{via + ", WithIncludeUsage(false)", clientTransport, false, true, true},
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if err != nil {
				t.Fatalf("parseFlags = %v", err)
			}
			pl, err := buildPlan(o.scenarios[0], o)
			if err != nil {
				t.Fatalf("buildPlan = %v", err)
			}
			var got []row
			for _, v := range pl.rows {
				got = append(got, row{v.label, v.client, v.noHeaderSync, v.noIncludeUsage, v.shared})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rows mismatch (-want +got):\n%s", diff)
			}
			for _, j := range pl.jobs {
				if j.text == "" || j.charge() != pl.p.tokens {
					t.Fatalf("job %+v: want a prompt text and a charge of %d", j, pl.p.tokens)
				}
			}
		})
	}
}
