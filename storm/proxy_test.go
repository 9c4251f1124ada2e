package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestProxyScenario runs the proxy scenario: Go, TypeScript and curl
// processes through two proxy replicas. With a budget per language's key
// the provider answers 429s: every language sends its 30 calls at once,
// 90 against the provider's 60 and its refill of 2 a second at -speed 2,
// so even a machine too loaded to send them within seconds meets them;
// with one budget no call fails, and 429s are at most one call in ten
// (see checkFew429s). Under CI=true, node, curl or the TypeScript SDKs
// missing fail it.
func TestProxyScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the storm for half a minute")
	}
	t.Parallel() // its own miniredis and provider, and no tight bound on its time
	_, nodeErr := exec.LookPath("node")
	_, curlErr := exec.LookPath("curl")
	_, sdkErr := os.Stat(filepath.Join("..", "internal", "proxy", "testdata", "node", "node_modules", "openai"))
	if nodeErr != nil || curlErr != nil || sdkErr != nil {
		what := "node, curl and the TypeScript SDKs (npm ci --prefix internal/proxy/testdata/node; .ci/run does it)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s are needed: %v %v %v", what, nodeErr, curlErr, sdkErr)
		}
		t.Skipf("%s are needed; set CI=true to make this a failure", what)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-scenario", "proxy", "-speed", "2", "-jobs", "30", "-workers", "30", "-json", "-quiet"}, &out, io.Discard); err != nil {
		t.Fatalf("run = %v", err)
	}
	var doc struct {
		Scenarios []struct {
			Budgets proxyResult `json:"budgets"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Scenarios) != 1 || len(doc.Scenarios[0].Budgets.Rows) != 2 {
		t.Fatalf("JSON = %s (%v), want one scenario with two rows", out.String(), err)
	}
	res := doc.Scenarios[0].Budgets
	own, shared := res.Rows[0], res.Rows[1]
	jobs := int64(res.Jobs * len(proxyLangs))
	failed := func(r proxyRow) (n int) {
		for _, f := range r.Failed {
			n += f
		}
		return n
	}
	if own.RateLimited == 0 {
		t.Errorf("%s: no 429s; want the provider to refuse three budgets each holding its whole limit", own.Label)
	}
	if failed(shared) != 0 || shared.RateLimited*10 > jobs || shared.Calls != jobs+shared.RateLimited {
		t.Errorf("%s: %d 429s, failed %v, %d calls; want none failed, at most %d 429s, one call per job plus one per 429",
			shared.Label, shared.RateLimited, shared.Failed, shared.Calls, jobs/10)
	}
	if shared.Seconds < res.FloorSeconds*0.95 {
		t.Errorf("%s: %.2f s, under the floor of %.2f s", shared.Label, shared.Seconds, res.FloorSeconds)
	}
}
