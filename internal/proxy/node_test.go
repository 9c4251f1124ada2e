package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// nodeDir holds clients.mjs and the pinned TypeScript SDKs, which .ci/run
// installs into its node_modules (npm ci).
const nodeDir = "testdata/node"

// need returns the path of a program a test runs, failing the test under
// CI=true when it is missing and skipping it otherwise.
func need(t *testing.T, program string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		missingTool(t, program+" is not installed")
	}
	return path
}

func missingTool(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; .ci/run installs what the tests need (node 20, npm, curl), see README.md", what)
	}
	t.Skipf("%s; set CI=true to make this a failure", what)
}

// nodeStep is one call clients.mjs makes (see its doc).
type nodeStep struct {
	SDK     string `json:"sdk"`
	Base    string `json:"base"`
	Key     string `json:"key"`
	Model   string `json:"model,omitempty"`
	Stream  bool   `json:"stream,omitempty"`
	Retries int    `json:"retries,omitempty"`
}

// nodeResult is what clients.mjs prints for a step.
type nodeResult struct {
	OK      bool   `json:"ok"`
	Text    string `json:"text"`
	Tokens  int64  `json:"tokens"`
	Answers []struct {
		Status     int    `json:"status"`
		Refused    string `json:"refused"`
		RetryAfter string `json:"retryAfter"`
	} `json:"answers"`
	Error *struct {
		Class      string `json:"class"`
		Status     int    `json:"status"`
		RetryAfter string `json:"retryAfter"`
		Type       string `json:"type"`
		Message    string `json:"message"`
	} `json:"error"`
}

// statuses lists the status of every answer the SDK saw, "429p" for one
// the proxy gave itself.
func (r nodeResult) statuses() string {
	var s []string
	for _, a := range r.Answers {
		v := http.StatusText(a.Status)
		if a.Refused != "" {
			v += " (proxy, Retry-After " + a.RetryAfter + ")"
		}
		s = append(s, v)
	}
	return strings.Join(s, ", ")
}

// runNode runs steps with node and the official SDKs, in one process.
func runNode(t *testing.T, steps ...nodeStep) []nodeResult {
	t.Helper()
	return runNodeAfter(t, nil, steps...)
}

// runNodeAfter runs steps as runNode does, calling before (if not nil)
// once node has loaded the SDKs, just before the first step: what before
// sets up is not worn off by node's start, however slow.
func runNodeAfter(t *testing.T, before func(), steps ...nodeStep) []nodeResult {
	t.Helper()
	node := need(t, "node")
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "openai", "package.json")); err != nil {
		missingTool(t, "the TypeScript SDKs are not installed in internal/proxy/"+nodeDir+" (npm ci --prefix internal/proxy/"+nodeDir+")")
	}
	arg, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "clients.mjs")
	cmd.Dir = nodeDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = cmd.Wait()
		t.Fatalf("node clients.mjs did not start: %q %v\n%s", lines.Text(), lines.Err(), stderr.String())
	}
	if before != nil {
		before()
	}
	_, _ = stdin.Write(arg)
	_ = stdin.Close()
	var results []nodeResult
	for lines.Scan() {
		var r nodeResult
		if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
			t.Fatalf("node printed %q: %v", lines.Text(), err)
		}
		results = append(results, r)
	}
	if err := cmd.Wait(); err != nil || len(results) != len(steps) {
		t.Fatalf("node clients.mjs: %v; %d answers for %d steps\n%s", err, len(results), len(steps), stderr.String())
	}
	return results
}

// TestTypeScriptThroughProxy sends the official openai and
// @anthropic-ai/sdk packages' JSON and streamed calls through the proxy,
// with only the base URL changed: each budget learns its provider's limits
// from the first answer's headers, and the key shows in no log line.
func TestTypeScriptThroughProxy(t *testing.T) {
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	oprov, oup := upstream(t, fakeprovider.Config{RequestLimit: 100, TokenLimit: 50_000})
	aprov, aup := upstream(t, fakeprovider.Config{Style: fakeprovider.Anthropic, RequestLimit: 50, InputTokenLimit: 40_000, OutputTokenLimit: 8_000})
	r := startProxy(t, b, prefix, oup.URL, func(c *proxy.Config) { c.Anthropic = aup.URL })
	results := runNode(t,
		nodeStep{SDK: "openai", Base: r.srv.URL + "/openai/v1", Key: secret},
		nodeStep{SDK: "openai", Base: r.srv.URL + "/openai/v1", Key: secret, Stream: true},
		nodeStep{SDK: "anthropic", Base: r.srv.URL + "/anthropic", Key: secret},
		nodeStep{SDK: "anthropic", Base: r.srv.URL + "/anthropic", Key: secret, Stream: true},
	)
	for i, res := range results {
		if !res.OK || res.Text == "" || res.Tokens == 0 || res.statuses() != "OK" {
			t.Errorf("step %d: ok %v, text %q, %d tokens, answers [%s], error %+v; want one 200 with text and usage",
				i, res.OK, res.Text, res.Tokens, res.statuses(), res.Error)
		}
	}
	if got := open(t, b, prefix, "openai", "gpt-4o-mini").Config().Limits; got != (pacer.Limits{RPM: 100, TPM: 50_000}) {
		t.Errorf("openai budget: stored limits %v, want the headers' rpm=100 tpm=50000", got)
	}
	snap, err := open(t, b, prefix, "anthropic", "claude-sonnet-4-5").Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Rate("rpm").Limit != 50 || len(snap.Rates) != 3 {
		t.Errorf("anthropic budget: rpm %d, %d rates; want the headers' rpm 50 and input and output rates", snap.Rate("rpm").Limit, len(snap.Rates))
	}
	if o, a := oprov.Stats(), aprov.Stats(); o.OK != 2 || a.OK != 2 {
		t.Errorf("providers admitted %d and %d calls, want 2 each", o.OK, a.OK)
	}
	if strings.Contains(r.log.String(), secret) || strings.Contains(r.log.String(), secret[len(secret)-12:]) {
		t.Errorf("the key shows in the proxy's log")
	}
}

// TestTypeScriptRetriesTheProxy429 pauses a budget, as a provider's 429
// through one replica does: the other replica answers the TypeScript SDKs a 429
// they raise as their RateLimitError with Retry-After, sending nothing
// upstream; with retries on, the SDK waits as told and its retry succeeds
// once the pause is over.
func TestTypeScriptRetriesTheProxy429(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		t.Parallel() // each waits out its pauses, side by side
		for _, style := range []fakeprovider.Style{fakeprovider.OpenAI, fakeprovider.Anthropic} {
			t.Run(style.String(), func(t *testing.T) {
				prefix := redistest.Name(t)
				prov, up := upstream(t, fakeprovider.Config{Style: style, RequestLimit: 100, TokenLimit: 1_000_000})
				r1 := startProxy(t, b, prefix, up.URL, maxWait(50*time.Millisecond))
				r2 := startProxy(t, b, prefix, up.URL, maxWait(50*time.Millisecond))
				step := nodeStep{SDK: "openai", Base: r2.srv.URL + "/openai/v1", Key: secret}
				call, model := chat, "gpt-4o-mini"
				if style == fakeprovider.Anthropic {
					step = nodeStep{SDK: "anthropic", Base: r2.srv.URL + "/anthropic", Key: secret}
					call, model = func(r replica) error {
						_, err := anthropicClient(r).Messages.New(context.Background(), messageParams())
						return err
					}, "claude-sonnet-4-5"
				}
				if err := call(r1); err != nil {
					t.Fatal(err)
				}
				before := prov.Stats().Calls
				retrying := step
				retrying.Retries = 4
				// As a provider's 429 through replica 1 does (see
				// TestRateLimitPausesBothReplicas), for long enough that
				// node's first call surely meets it: on a loaded machine
				// it came more than 2 s after the pause.
				res := runNodeAfter(t, func() {
					if err := open(t, b, prefix, strings.ToLower(style.String()), model).Pause(context.Background(), 5*time.Second); err != nil {
						t.Fatal(err)
					}
				}, step, retrying)
				if e := res[0].Error; e == nil || e.Class != "RateLimitError" || e.Status != 429 || e.RetryAfter == "" || res[0].Answers[0].Refused == "" {
					t.Errorf("no retries: error %+v, answers [%s]; want the SDK's RateLimitError, 429 with Retry-After, from the proxy", e, res[0].statuses())
				}
				as := res[1].Answers
				if !res[1].OK || len(as) < 2 || as[0].Refused == "" || as[0].RetryAfter == "" || as[len(as)-1].Status != 200 {
					t.Errorf("with retries: ok %v, answers [%s], error %+v; want the proxy's 429s, then a 200 after the pause", res[1].OK, res[1].statuses(), res[1].Error)
				}
				if got := prov.Stats().Calls - before; got != 1 {
					t.Errorf("the provider saw %d calls, want 1: the retry after the pause", got)
				}
			})
		}
	})
}

// TestTypeScriptTenants has the TypeScript SDK present proxy keys: the
// provider sees only the key the proxy holds, one tenant past its own
// limit gets the proxy's 429 while the other is served, and no key shows
// in the log.
func TestTypeScriptTenants(t *testing.T) {
	f, err := loadFile(t, `{"keys": [{"provider": "openai", "key_env": "HELD", "share": 0.5,
		"tenant_limits": {"rpm": 2},
		"clients": [{"key_env": "TEAM_A", "tenant": "team-a"}, {"key_env": "TEAM_B", "tenant": "team-b"}],
		"models": {"gpt-4o-mini": {"rpm": 100, "tpm": 100000}}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := fakeprovider.New(fakeprovider.Config{RequestLimit: 100, TokenLimit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	seen := &keysSeen{seen: map[string]int{}, h: prov}
	r := startProxy(t, redistest.Mini(t), redistest.Name(t), httptestServer(t, seen), maxWait(50*time.Millisecond), func(c *proxy.Config) { c.File = f })
	var steps []nodeStep
	for _, k := range []string{"pk-team-a", "pk-team-a", "pk-team-a", "pk-team-b"} {
		steps = append(steps, nodeStep{SDK: "openai", Base: r.srv.URL + "/openai/v1", Key: k})
	}
	var got []string
	for _, res := range runNode(t, steps...) {
		switch {
		case res.OK:
			got = append(got, "ok")
		case res.Error != nil && res.Error.Status == 429 && len(res.Answers) == 1 && res.Answers[0].Refused != "":
			got = append(got, "429")
		default:
			got = append(got, res.statuses())
		}
	}
	if strings.Join(got, " ") != "ok ok 429 ok" {
		t.Errorf("team-a ×3, team-b = %v; want team-a held back at its rpm of 2, team-b served", got)
	}
	if len(seen.seen) != 1 || seen.seen["Bearer "+heldKey] != 3 {
		t.Errorf("the provider saw keys %v; want only the held key, 3 times", seen.seen)
	}
	for _, k := range []string{heldKey, "pk-team-a", "pk-team-b"} {
		if strings.Contains(r.log.String(), k) {
			t.Errorf("the log shows %s", k)
		}
	}
}

// TestCurlThroughProxy sends curl's JSON and streamed chat calls through
// the proxy: the budget learns the limits, the stream arrives whole.
func TestCurlThroughProxy(t *testing.T) {
	curl := need(t, "curl")
	b := redistest.Mini(t)
	prefix := redistest.Name(t)
	prov, up := upstream(t, fakeprovider.Config{RequestLimit: 100, TokenLimit: 50_000})
	r := startProxy(t, b, prefix, up.URL)
	run := func(stream bool) string {
		body := `{"model":"gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":"hi"}]`
		if stream {
			body += `,"stream":true`
		}
		out, err := exec.Command(curl, "-sS", "-N", "--fail-with-body", r.srv.URL+"/openai/v1/chat/completions",
			"-H", "Authorization: Bearer "+secret, "-H", "Content-Type: application/json", "-d", body+"}").Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("curl: %v: %s%s", err, ee.Stderr, out)
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if out := run(false); !strings.Contains(out, `"choices"`) || !strings.Contains(out, `"usage"`) {
		t.Errorf("curl JSON = %s, want a chat completion with usage", out)
	}
	if out := run(true); !strings.HasPrefix(out, "data: ") || !strings.Contains(out, "data: [DONE]") {
		t.Errorf("curl stream = %s, want server-sent events ending in [DONE]", out)
	}
	if got := open(t, b, prefix, "openai", "gpt-4o-mini").Config().Limits; got != (pacer.Limits{RPM: 100, TPM: 50_000}) {
		t.Errorf("stored limits = %v, want the headers' rpm=100 tpm=50000", got)
	}
	if st := prov.Stats(); st.OK != 2 {
		t.Errorf("provider admitted %d calls, want 2", st.OK)
	}
}
