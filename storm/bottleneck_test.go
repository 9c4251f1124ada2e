package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary stand in for the storm when -procs starts
// it again as a child (procs.go): the child gets the storm's flags, not
// the test's.
func TestMain(m *testing.M) {
	_, child := os.LookupEnv(childEnv)
	_, worker := os.LookupEnv(proxyWorkerEnv) // the proxy scenario's Go worker
	if child || worker {
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "storm child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runExactBottleneck runs the bottleneck scenario's exact sliding row
// alone at its own -speed 4 (a window of 2.5 s), in procs processes, and
// returns its report. It runs 40 jobs of 200 to 800 tokens on 40 workers,
// so that the 30 requests a window bind before the 24,000 tokens: two
// waves, a floor of 2.5 s. The margin is 1 s, not 20 ms: a provider and
// 100 workers in one test process beside other tests on two loaded CPUs
// (load average 24, -race) reached the provider more than 500 ms after
// their admission (17 429s in one run with -margin 500ms), and a call
// counted late there meets a 429. It stretches the budget's window to
// 3.5 s, so the test checks the run against the budget's own floor.
func runExactBottleneck(t *testing.T, procs int) scenarioReport {
	t.Helper()
	args := []string{"-scenario", "bottleneck", "-mode", "shared", "-speed", "4", "-margin", "1s",
		"-jobs", "40", "-workers", "40", "-tokens", "500", "-quiet", "-procs", fmt.Sprint(procs)}
	o, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := buildPlan("bottleneck", o)
	if err != nil {
		t.Fatal(err)
	}
	var exact []variant
	for _, v := range pl.rows {
		if v.exactSliding {
			exact = append(exact, v)
		}
	}
	if len(exact) != 1 {
		t.Fatalf("bottleneck has %d exact sliding rows; want 1", len(exact))
	}
	pl.rows = exact
	ctx := context.Background()
	be, err := openRedis(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer be.close()
	rep, err := runPlan(ctx, pl, be, newProgress(io.Discard, true))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkExactBottleneck checks what the provider saw of the exact row: every
// job done with one call (next to no 429s, see checkFew429s), the counts
// adding up, and the run at the budget's speed: never before the
// provider's floor, and at most a quarter after the budget's own floor
// (its window, stretched by the margin). With the default margin it ends
// within 5% of the provider's floor (docs/storm.md); a quarter still
// catches a budget that waits a sub-window too many per window, or one
// that a single 429 sends back to the end of the queue (about +100%).
func checkExactBottleneck(t *testing.T, r scenarioReport) {
	t.Helper()
	if len(r.Rows) != 1 || r.FloorSeconds == nil {
		t.Fatalf("%d rows, floor %v; want one row and a floor", len(r.Rows), r.FloorSeconds)
	}
	row, floor := r.Rows[0], *r.FloorSeconds
	t.Logf("%s: %.3f s (floor %.3f s, the budget's %v s), %d calls, %d 429s, %d failed, %.1f Redis commands a job",
		row.Label, row.Seconds, floor, ptr(row.BudgetFloorSeconds), row.Calls, row.RateLimited, row.Failed, row.RedisPerJob)
	if r.Jobs != 40 || r.ProviderRequests != 30 || row.Jobs != 40 || floor != 2.5 {
		t.Fatalf("%d jobs, request limit %d, floor %v s; want 40 jobs, 30 requests a window and a second wave at 2.5 s", r.Jobs, r.ProviderRequests, floor)
	}
	checkFew429s(t, row, r.Jobs)
	if row.OK != 40 || row.Calls != int64(row.Attempts) || row.TokensAdmitted != r.JobTokens {
		t.Errorf("%d OK calls of %d sent (%d counted by the jobs), %d tokens admitted; want 40 OK, the provider's count and the jobs' alike, all %d tokens",
			row.OK, row.Calls, row.Attempts, row.TokensAdmitted, r.JobTokens)
	}
	if row.BudgetFloorSeconds == nil {
		t.Fatalf("no budget floor")
	}
	// The speed claim (within 5% of the floor) is measured in docs/storm.md
	// on a quiet machine; here a machine loaded many times over must still
	// finish within a few budget floors, with no 429 and no failure.
	own := *row.BudgetFloorSeconds
	if row.Seconds < floor || row.Seconds > own*3 {
		t.Errorf("took %.3f s; want between the provider's floor %.3f s and three times the budget's own floor %.3f s", row.Seconds, floor, own)
	}
	if !strings.Contains(row.Budget, "Sliding") {
		t.Errorf("budget %q; want sliding rates", row.Budget)
	}
}

func ptr(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// The provider (24,000 tokens and 30 requests per strict sliding
// window) and calls all at once, against a budget of exact sliding
// windows, in one process.
func TestBottleneckExactSliding(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the storm for a few seconds")
	}
	t.Parallel() // its own miniredis and provider, and no tight bound on its time
	checkExactBottleneck(t, runExactBottleneck(t, 1))
}

// The same across three OS processes (this test binary, started again),
// each with its own Pacer on the parent's Redis and its own connections to
// the parent's provider.
func TestBottleneckExactSlidingProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the storm for a few seconds")
	}
	t.Parallel() // its own miniredis and provider, and no tight bound on its time
	r := runExactBottleneck(t, 3)
	if r.Procs != 3 {
		t.Errorf("report says %d processes; want 3", r.Procs)
	}
	checkExactBottleneck(t, r)
}

// share deals every job and worker out once, as evenly as it can.
func TestShare(t *testing.T) {
	jobs := make([]job, 10)
	for i := range jobs {
		jobs[i].prompt = int64(i)
	}
	seen, workers := map[int64]bool{}, 0
	for k := range 3 {
		mine, w := share(jobs, 7, k, 3)
		workers += w
		if want := []int{4, 3, 3}[k]; len(mine) != want || w != []int{3, 2, 2}[k] {
			t.Errorf("share(10 jobs, 7 workers, %d, 3) = %d jobs, %d workers; want %d jobs, %d workers", k, len(mine), w, want, []int{3, 2, 2}[k])
		}
		for _, j := range mine {
			seen[j.prompt] = true
		}
	}
	if len(seen) != 10 || workers != 7 {
		t.Errorf("the children got %d distinct jobs and %d workers; want 10 and 7", len(seen), workers)
	}
}
