package pacer_test

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// parallelTests is how many tests marked t.Parallel run at once unless
// -test.parallel says otherwise. go test's default is GOMAXPROCS, 2 on the
// CI machine; but the parallel tests spend their time waiting on Redis's
// clock, turns, TTLs and outages, not on the CPU (a tenth of their wall
// time, under -race), so two at a time left the package mostly asleep.
// Tests whose figures a busy CPU would bend stay sequential: worker
// processes sharing slots, the failover, goroutines by the hundred, turns
// checked to within a few hundred milliseconds, outages with a 2 s bound,
// replies lost through a proxy. Eight at a time, beside the storm's
// package, bent those too.
const parallelTests = 4

// TestMain sets -test.parallel to parallelTests when the command line
// does not set it.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelTests))
	}
	os.Exit(m.Run())
}
