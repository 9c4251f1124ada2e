package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/llmpacer/llmpacer/internal/fakeprovider"
	"github.com/llmpacer/llmpacer/internal/proxy"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The proxy scenario: Go (openai-go), TypeScript (the openai package, run
// by node) and curl workers, each language in its own OS process, call
// one provider account through two `llmpacer proxy` replicas. The
// provider allows proxyRPM requests per minute to the account, whatever
// key a call carries, as OpenAI limits an organization. Each client keeps
// its default retries (2 for both SDKs, curl --retry 2), as deployed.
//
// Two rows: each language with its own key, so its own budget holding the
// account's whole limit (as each language's own limiter would), and all
// three on one key, one budget. The budgets' limits are stored before the
// run (as the proxy's configuration file would), over the sped-up minute.
const (
	proxyRPM     = 60
	proxyJobs    = 60 // per language; -jobs sets it
	proxyWorkers = 4  // per language; -workers sets it
	proxyLatency = 500 * time.Millisecond
	proxyModel   = "gpt-4o-mini"
	proxyBody    = `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`
)

// proxyLangs are the worker processes of a row, by language.
var proxyLangs = []string{"go", "typescript", "curl"}

// proxyRow is one row's run.
type proxyRow struct {
	Label       string
	Seconds     float64
	Calls       int64
	RateLimited int64
	Failed      map[string]int // by language
}

// proxyResult is what the proxy scenario measured.
type proxyResult struct {
	FloorSeconds float64
	Jobs         int // per language
	Workers      int // per language
	Rows         []proxyRow
}

func buildProxy(pl *plan, _ *rand.Rand) {
	jobs, workers := proxyJobs, proxyWorkers
	if pl.set["jobs"] {
		jobs = pl.p.jobs
	}
	if pl.set["workers"] {
		workers = pl.p.workers
	}
	pl.custom = func(ctx context.Context, pl *plan, be *backend, prog *progress) (scenarioReport, error) {
		return runProxyScenario(ctx, pl, be, prog, jobs, workers)
	}
}

func runProxyScenario(ctx context.Context, pl *plan, be *backend, prog *progress, jobs, workers int) (scenarioReport, error) {
	p := pl.p
	w := p.wall(time.Minute)
	total := jobs * len(proxyLangs)
	rep := scenarioReport{Name: pl.name, About: pl.about, Speed: p.speed, Redis: be.desc, Jobs: total}
	res := proxyResult{Jobs: jobs, Workers: workers, FloorSeconds: math.Max(float64(total-proxyRPM)/proxyRPM, 0) * w.Seconds()}
	nodeDir, err := proxyNodeDir()
	if err != nil {
		return rep, err
	}
	id := runID()
	for _, shared := range []bool{false, true} {
		label := "each language its own key and budget, each the account's whole limit"
		if shared {
			label = "one key: one budget shared by all three languages"
		}
		row, err := runProxyRow(ctx, p, be, prog, pl.name, label, nodeDir, id, shared, jobs, workers)
		if err != nil {
			return rep, err
		}
		res.Rows = append(res.Rows, row)
	}
	rep.Budgets = res
	rep.Table = proxyTable(p, res)
	return rep, nil
}

// runProxyRow starts a provider and two proxy replicas, stores each
// budget's limits, and runs the three languages' workers at once.
func runProxyRow(ctx context.Context, p params, be *backend, prog *progress, scenario, label, nodeDir, id string, shared bool, jobs, workers int) (proxyRow, error) {
	row := proxyRow{Label: label, Failed: map[string]int{}}
	w := p.wall(time.Minute)
	fp, _, srv, err := startProvider(fakeprovider.Config{RequestLimit: proxyRPM, TokenLimit: 100_000_000, Window: w, Latency: p.wall(proxyLatency)})
	if err != nil {
		return row, err
	}
	defer srv.Close()
	keys := map[string]string{}
	for _, lang := range proxyLangs {
		keys[lang] = "sk-storm-" + id + "-" + lang
		if shared {
			keys[lang] = "sk-storm-" + id
		}
		if err := defineProxyBudget(ctx, be, keys[lang], w); err != nil {
			return row, err
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var replicas []string
	for range 2 {
		url, err := startProxyReplica(rctx, be, srv.URL, w)
		if err != nil {
			return row, err
		}
		replicas = append(replicas, url)
	}
	procs := []*proxyWorker{
		newGoWorker(replicas[0], keys["go"], jobs, workers),
		newNodeWorker(nodeDir, replicas[1], keys["typescript"], jobs, workers),
		newCurlWorker(replicas, keys["curl"], jobs, workers),
	}
	prog.begin(scenario, label, jobs*len(procs), &recorder{})
	defer prog.end()
	start, err := startWorkers(rctx, procs)
	if err != nil {
		return row, err
	}
	for i, pw := range procs {
		r, err := pw.wait(prog.jobDone)
		if err != nil {
			return row, fmt.Errorf("%s worker: %w", proxyLangs[i], err)
		}
		row.Failed[proxyLangs[i]] = r.Failed
	}
	row.Seconds = time.Since(start).Seconds()
	st := fp.Stats()
	row.Calls, row.RateLimited = st.Calls, st.RateLimited
	return row, ctx.Err()
}

// defineProxyBudget stores the limits of key's budget: the provider's
// request limit over the sped-up minute, with a burst a dispatch margin
// short of it, as every storm budget.
func defineProxyBudget(ctx context.Context, be *backend, key string, w time.Duration) error {
	name := proxy.BudgetName("openai", key, proxyModel)
	burst := proxyRPM - int64(math.Ceil(proxyRPM*dispatchMargin.Seconds()/w.Seconds()))
	pc, err := pacer.New(be.rdb, pacer.Config{Name: name, Limits: pacer.Limits{Concurrency: 1}})
	if err != nil {
		return err
	}
	_, err = pc.Define(ctx, pacer.Config{Version: 1, Rates: []pacer.Rate{{Unit: pacer.Requests, Limit: proxyRPM, Window: w, Burst: burst}}})
	if err != nil && !errors.Is(err, pacer.ErrSuperseded) {
		return err
	}
	return nil
}

// startProxyReplica serves a proxy replica on a loopback port until ctx
// ends, and returns its URL.
func startProxyReplica(ctx context.Context, be *backend, upstream string, w time.Duration) (string, error) {
	px, err := proxy.New(proxy.Config{Redis: be.rdb, OpenAI: upstream, Anthropic: upstream, MaxWait: w})
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = px.Serve(ctx, ln, time.Second) }()
	return "http://" + ln.Addr().String(), nil
}

// proxyNodeDir finds the directory of the TypeScript SDKs that .ci/run
// installs, from the module's root above the working directory.
func proxyNodeDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scenario proxy: run it inside the llmpacer module: it needs internal/proxy/testdata/node")
		}
		dir = parent
	}
	nd := filepath.Join(dir, "internal", "proxy", "testdata", "node")
	if _, err := os.Stat(filepath.Join(nd, "node_modules", "openai")); err != nil {
		return "", fmt.Errorf("scenario proxy: the TypeScript SDKs are not installed: npm ci --prefix %s (or bash .ci/run)", nd)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return "", errors.New("scenario proxy: node is not installed; it runs the TypeScript workers")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		return "", errors.New("scenario proxy: curl is not installed; it runs the curl workers")
	}
	return nd, nil
}

// proxyWorker is one language's worker process. It prints "ready" once
// set up, starts its jobs on a line on stdin, prints "done" after each
// job, and last a proxyWorkerResult.
type proxyWorker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr strings.Builder
	done   func()
}

// proxyWorkerResult is what a worker reports.
type proxyWorkerResult struct {
	OK     int `json:"ok"`
	Failed int `json:"failed"`
}

// proxyWorkerEnv makes the storm a Go proxy worker: its value is a
// proxyWorkerSpec.
const proxyWorkerEnv = "LLMPACER_STORM_PROXY_WORKER"

// proxyWorkerSpec is a Go worker's part.
type proxyWorkerSpec struct {
	Base    string `json:"base"`
	Key     string `json:"key"`
	Jobs    int    `json:"jobs"`
	Workers int    `json:"workers"`
}

func newGoWorker(base, key string, jobs, workers int) *proxyWorker {
	self, _ := os.Executable()
	spec, _ := json.Marshal(proxyWorkerSpec{Base: base + "/openai/v1", Key: key, Jobs: jobs, Workers: workers})
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), proxyWorkerEnv+"="+string(spec))
	return &proxyWorker{cmd: cmd}
}

func newNodeWorker(dir, base, key string, jobs, workers int) *proxyWorker {
	cmd := exec.Command("node", "storm.mjs", base+"/openai/v1", fmt.Sprint(jobs), fmt.Sprint(workers))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+key) // not in the arguments, which ps shows
	return &proxyWorker{cmd: cmd}
}

// curlWorker is a shell running a loop of curl per worker, alternating
// between the replicas; the key reaches curl in a header file, never in
// its arguments. Answers go to a file, not /dev/null: curl truncates its
// output before a retry, fails to on /dev/null, and then gives up without
// retrying (exit 23). -w prints the last status whatever the exit code.
const curlWorker = `set -u
urls=($1 $2) jobs=$3 workers=$4
echo ready
read -r _
for w in $(seq 0 $((workers - 1))); do
  (for j in $(seq "$w" "$workers" $((jobs - 1))); do
    curl -s -o "$OUT.$w" -w '%{http_code}\n' --retry 2 -H @"$KEYFILE" -H 'Content-Type: application/json' \
      -d "$BODY" "${urls[$((w % 2))]}/openai/v1/chat/completions" || true
  done) &
done | while read -r code; do
  echo done
  if [ "$code" = 200 ]; then ok=$((${ok:-0} + 1)); else failed=$((${failed:-0} + 1)); fi
  echo "{\"ok\":${ok:-0},\"failed\":${failed:-0}}" >"$RESULT"
done
cat "$RESULT" 2>/dev/null || echo '{"ok":0,"failed":0}'
`

func newCurlWorker(replicas []string, key string, jobs, workers int) *proxyWorker {
	dir, _ := os.MkdirTemp("", "storm-curl")
	keyFile := filepath.Join(dir, "headers")
	_ = os.WriteFile(keyFile, []byte("Authorization: Bearer "+key+"\n"), 0o600)
	cmd := exec.Command("bash", "-c", curlWorker, "curl-worker", replicas[0], replicas[1], fmt.Sprint(jobs), fmt.Sprint(workers))
	cmd.Env = append(os.Environ(), "KEYFILE="+keyFile, "BODY="+proxyBody, "RESULT="+filepath.Join(dir, "result"), "OUT="+filepath.Join(dir, "answer"))
	return &proxyWorker{cmd: cmd, done: func() { _ = os.RemoveAll(dir) }}
}

// startWorkers starts every worker, waits until each is ready, then starts
// their jobs at once and returns that moment.
func startWorkers(ctx context.Context, ws []*proxyWorker) (time.Time, error) {
	for _, pw := range ws {
		var err error
		if pw.stdin, err = pw.cmd.StdinPipe(); err != nil {
			return time.Time{}, err
		}
		out, err := pw.cmd.StdoutPipe()
		if err != nil {
			return time.Time{}, err
		}
		pw.cmd.Stderr = &pw.stderr
		pw.lines = bufio.NewScanner(out)
		if err := pw.cmd.Start(); err != nil {
			return time.Time{}, fmt.Errorf("starting %s: %w", pw.cmd.Path, err)
		}
		context.AfterFunc(ctx, func() { _ = pw.cmd.Process.Kill() })
	}
	for _, pw := range ws {
		if !pw.lines.Scan() || pw.lines.Text() != "ready" {
			_ = pw.cmd.Wait()
			return time.Time{}, fmt.Errorf("%s did not start: %q\n%s", pw.cmd.Path, pw.lines.Text(), pw.stderr.String())
		}
	}
	start := time.Now()
	for _, pw := range ws {
		_, _ = io.WriteString(pw.stdin, "go\n")
		_ = pw.stdin.Close()
	}
	return start, nil
}

// wait reads the worker's lines until it exits, calling done for each
// "done", and returns its result.
func (pw *proxyWorker) wait(done func()) (proxyWorkerResult, error) {
	if pw.done != nil {
		defer pw.done()
	}
	var r proxyWorkerResult
	last := ""
	for pw.lines.Scan() {
		if last = pw.lines.Text(); last == "done" {
			done()
		}
	}
	if err := pw.cmd.Wait(); err != nil {
		return r, fmt.Errorf("%w\n%s", err, pw.stderr.String())
	}
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		return r, fmt.Errorf("its last line %q: %w\n%s", last, err, pw.stderr.String())
	}
	return r, nil
}

// runProxyWorker is the Go worker: openai-go with its default retries,
// Workers goroutines sharing Jobs chat calls.
func runProxyWorker(ctx context.Context, specJSON string, stdin io.Reader, stdout io.Writer) error {
	var spec proxyWorkerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("%s: %w", proxyWorkerEnv, err)
	}
	c := openai.NewClient(option.WithBaseURL(spec.Base+"/"), option.WithAPIKey(spec.Key),
		option.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: spec.Workers}}))
	fmt.Fprintln(stdout, "ready")
	if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		res    proxyWorkerResult
		wg     sync.WaitGroup
		next   = make(chan struct{})
		params = openai.ChatCompletionNewParams{Model: proxyModel, MaxTokens: openai.Int(16),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}
	)
	for range spec.Workers {
		wg.Go(func() {
			for range next {
				_, err := c.Chat.Completions.New(ctx, params)
				mu.Lock()
				if err != nil {
					res.Failed++
				} else {
					res.OK++
				}
				fmt.Fprintln(stdout, "done")
				mu.Unlock()
			}
		})
	}
	for range spec.Jobs {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	b, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(b))
	return nil
}

func proxyTable(p params, r proxyResult) *customTable {
	t := &customTable{Header: []string{
		fmt.Sprintf("provider: %d requests per %v to the account, whatever the key (-speed %g: a simulated minute); %v per call",
			proxyRPM, p.wall(time.Minute), p.speed, p.wall(proxyLatency).Round(time.Millisecond)),
		fmt.Sprintf("%d jobs in each of three OS processes, %d at a time: Go (openai-go), TypeScript (openai on node), curl; through two proxy replicas; default retries (2)", r.Jobs, r.Workers),
		fmt.Sprintf("floor %.2f s: the calls past the first minute's %d, at the limit", r.FloorSeconds, proxyRPM),
	}}
	t.Cells = [][]string{{"budgets", "seconds", "vs floor", "calls", "429s", "failed go", "ts", "curl"}}
	for _, row := range r.Rows {
		t.Cells = append(t.Cells, []string{row.Label, fmt.Sprintf("%.2f", row.Seconds),
			fmt.Sprintf("%+.1f%%", (row.Seconds/r.FloorSeconds-1)*100), fmt.Sprint(row.Calls), fmt.Sprint(row.RateLimited),
			fmt.Sprint(row.Failed["go"]), fmt.Sprint(row.Failed["typescript"]), fmt.Sprint(row.Failed["curl"])})
	}
	t.Notes = []string{
		"429s are the provider's; a call the proxy holds past -max-wait (here the simulated minute) would get the proxy's own 429, and none did if failed is 0",
	}
	return t
}
