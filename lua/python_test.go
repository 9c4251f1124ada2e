package lua_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
)

// pythonDir is the Python client, clients/python.
var pythonDir = filepath.Join("..", "clients", "python")

// findPython returns a Python 3.11 or later, one that can import redis-py
// if needRedis: $LLMPACER_PYTHON, else python3 on the PATH, else Debian's
// /usr/bin/python3 (where the python3-redis package installs redis-py; a
// python3 earlier on the PATH may lack it). Without one the test skips, or
// fails under CI=true or when LLMPACER_PYTHON names one that does not
// work: a skipped suite would read as green.
func findPython(t *testing.T, needRedis bool) string {
	t.Helper()
	check := "import sys; assert sys.version_info >= (3, 11), sys.version"
	what := "python3 (3.11 or later)"
	if needRedis {
		check += "; import redis"
		what += " with redis-py (Debian: apt-get install python3-redis)"
	}
	explicit := os.Getenv("LLMPACER_PYTHON")
	candidates := []string{"python3", "/usr/bin/python3"}
	if explicit != "" {
		candidates = []string{explicit}
	}
	var tried []string
	for _, c := range candidates {
		path, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, c+": not found")
			continue
		}
		out, err := exec.Command(path, "-c", check).CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, path+": "+strings.TrimSpace(lastLine(string(out))))
	}
	if os.Getenv("CI") == "true" || explicit != "" {
		t.Fatalf("no %s (%s); .ci/run installs Debian's python3 and python3-redis", what, strings.Join(tried, "; "))
	}
	t.Skipf("no %s (%s); set CI=true to make this a failure", what, strings.Join(tried, "; "))
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// pythonEnv is the environment Python runs in: no .pyc files written into
// the checkout.
func pythonEnv() []string { return append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") }

// The Python client passes the conformance vectors (clients/python/test_vectors.py).
func TestPythonClientVectors(t *testing.T) {
	py := findPython(t, false)
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_vectors")
	cmd.Dir = pythonDir
	cmd.Env = pythonEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest test_vectors in clients/python: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// The Python client's Lease.fail and Lease.keep_alive on a real Redis, two
// Pacers as two processes (clients/python/test_redis.py): a rate-limited
// fail pauses the budget for the other, a quota fail stops it, a refused
// call's fail gives its tokens back, a second fail changes nothing, and
// keep_alive renews the lease until its stop, which ends its thread.
func TestPythonClientFail(t *testing.T) {
	py := findPython(t, true)
	b := redistest.Real(t)
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_redis")
	cmd.Dir = pythonDir
	cmd.Env = append(pythonEnv(), "LLMPACER_REDIS_ADDR="+b.Addrs[0], "LLMPACER_PY_BUDGET="+redistest.Name(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest test_redis in clients/python: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("skipped")) {
		t.Fatalf("test_redis skipped a test:\n%s", out)
	}
	t.Logf("%s", out)
}

// worker is a running clients/python/interop_worker.py.
type worker struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     *json.Encoder
	out    *bufio.Scanner
	stderr *lockedBuffer
}

// pyAnswer is any of the worker's answers (see interop_worker.py).
type pyAnswer struct {
	Error     string             `json:"error"`
	Message   string             `json:"message"`
	WaitMs    int64              `json:"wait_ms"`
	Limit     string             `json:"limit"`
	Lease     string             `json:"lease"`
	StartUs   int64              `json:"start_us"`
	ChargedUs int64              `json:"charged_us"`
	ExpiryMs  int64              `json:"expiry_ms"`
	WaitedMs  float64            `json:"waited_ms"`
	EndUs     int64              `json:"end_us"`
	State     string             `json:"state"`
	TimeUs    int64              `json:"time_us"`
	InFlight  int64              `json:"in_flight"`
	PausedMs  int64              `json:"paused_ms"`
	Remaining int64              `json:"remaining_ms"`
	Levels    map[string]float64 `json:"levels"`
	Calls     []call             `json:"calls"`
	// Chosen is group_try's deployment, by its key.
	Chosen string `json:"chosen"`
	// TenantCalls are tenant_load's calls.
	TenantCalls []tenantCall `json:"tenant_calls"`
}

// call is one admitted call of the load phase, on the Redis clock.
type call struct {
	Side    string `json:"side"`
	StartUs int64  `json:"start_us"` // its turn
	// SlotUs is when it took its slot, if later than its turn: a pending
	// lease claims its slot at its turn, or after it if it must queue.
	SlotUs   int64   `json:"slot_us"`
	EndUs    int64   `json:"end_us"`   // when its lease ended; 0 if canceled
	How      string  `json:"how"`      // settle, release, reject, cancel
	Reserved int64   `json:"reserved"` // tokens
	Used     int64   `json:"used"`     // tokens, for a settle
	WaitedMs float64 `json:"waited_ms"`
	Priority string  `json:"priority"`
}

// startWorker starts the Python worker on backend b (a Redis, or a
// Cluster by its seed nodes) with the given budgets; it is stopped when
// the test ends.
func startWorker(t *testing.T, py string, b redistest.Backend, budgets map[string]vconfig) *worker {
	t.Helper()
	spec, _ := json.Marshal(map[string]any{"addr": strings.Join(b.Addrs, ","), "cluster": b.Kind == "cluster", "budgets": budgets})
	cmd := exec.Command(py, "interop_worker.py", string(spec))
	cmd.Dir = pythonDir
	cmd.Env = pythonEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{t: t, cmd: cmd, in: json.NewEncoder(stdin), out: bufio.NewScanner(stdout), stderr: &lockedBuffer{}}
	w.out.Buffer(nil, 16<<20)
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the Python worker: %v", err)
	}
	t.Cleanup(func() {
		_ = w.in.Encode(map[string]any{"op": "quit"})
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !t.Failed() {
				t.Errorf("Python worker: %v\n%s", err, w.stderr.String())
			}
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("Python worker did not quit; killed it\n%s", w.stderr.String())
		}
	})
	return w
}

// send writes a command without waiting for its answer.
func (w *worker) send(cmd map[string]any) {
	w.t.Helper()
	if err := w.in.Encode(cmd); err != nil {
		w.t.Fatalf("to the Python worker: %v\n%s", err, w.stderr.String())
	}
}

// answer reads the answer to the oldest command not yet answered.
func (w *worker) answer() pyAnswer {
	w.t.Helper()
	if !w.out.Scan() {
		w.t.Fatalf("the Python worker stopped answering: %v\n%s", w.out.Err(), w.stderr.String())
	}
	var a pyAnswer
	if err := json.Unmarshal(w.out.Bytes(), &a); err != nil {
		w.t.Fatalf("the Python worker's answer %q: %v", w.out.Text(), err)
	}
	return a
}

// do sends a command and returns its answer.
func (w *worker) do(cmd map[string]any) pyAnswer {
	w.t.Helper()
	w.send(cmd)
	return w.answer()
}

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
