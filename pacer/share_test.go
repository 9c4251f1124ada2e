package pacer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/redis/go-redis/v9"
)

// shareWorkerEnv, set, makes the test binary a worker of
// TestSlotsSharedByProcesses: its value is the worker's shareJob as JSON.
const shareWorkerEnv = "LLMPACER_SHARE_WORKER"

// shareJob is what one worker process runs: Goroutines loops of Acquire,
// a Call-long call, Settle, on a budget of Slots slots, from Start plus
// Index·Stagger (the first process gets a head start, as in issue 14) to
// Start + Warm + Window. Only admissions within [Start+Warm, Start+Warm+
// Window) count toward the share.
type shareJob struct {
	Kind, Name        string
	Addrs             []string
	Index, Goroutines int
	Slots             int64
	Call, Stagger     time.Duration
	Start             time.Time
	Warm, Window      time.Duration
}

// shareResult is what a worker reports.
type shareResult struct {
	Admitted int64         // admissions within the window
	Busy     time.Duration // their calls' time, from Acquire's return to Settle
	All      int64         // admissions over the whole run
	Scripts  int64         // script calls sent over the whole run (EVALSHA, EVAL)
	Others   int64         // other commands (pub/sub aside)
	Errors   []string
}

// With a concurrency limit, N processes of equal demand share the slots
// first come, first served: each process's share of the admissions is within
// ±20% of 1/N, whichever started first; and each admission costs at most
// three script calls (acquire denied and queued, acquire claiming, settle).
// The processes are this test binary run again as workers, on the real Redis
// and on the cluster.
func TestSlotsSharedByProcesses(t *testing.T) {
	if job := os.Getenv(shareWorkerEnv); job != "" {
		runShareWorker(t, job)
		return
	}
	if testing.Short() {
		t.Skip("starts worker processes for several seconds")
	}
	for _, lane := range []struct {
		name string
		get  func(testing.TB) redistest.Backend
	}{{"redis", redistest.Real}, {"cluster", redistest.Cluster}} {
		t.Run(lane.name, func(t *testing.T) {
			b := lane.get(t)
			for _, n := range []int{2, 4} {
				t.Run(fmt.Sprintf("%d processes", n), func(t *testing.T) { checkShare(t, b, n) })
			}
		})
	}
}

func checkShare(t *testing.T, b redistest.Backend, n int) {
	const slots = 4
	job := shareJob{
		Kind: b.Kind, Name: redistest.Name(t), Addrs: b.Addrs, Goroutines: 4, Slots: slots,
		Call: 5 * time.Millisecond, Stagger: 100 * time.Millisecond,
		// Process start-up on a loaded machine takes a few hundred ms.
		Start: time.Now().Add(700 * time.Millisecond),
		Warm:  time.Duration(n) * 100 * time.Millisecond, Window: 1500 * time.Millisecond,
	}
	res := make([]shareResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := job
			j.Index = i
			res[i] = startShareWorker(t, j)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var total, all, scripts, others int64
	var busy time.Duration
	for i, r := range res {
		for _, e := range r.Errors {
			t.Errorf("worker %d: %s", i, e)
		}
		total += r.Admitted
		all += r.All
		scripts += r.Scripts
		others += r.Others
		busy += r.Busy
	}
	if total == 0 || all == 0 {
		t.Fatalf("no admissions: %+v", res)
	}
	shares := make([]string, n)
	for i, r := range res {
		share := float64(r.Admitted) / float64(total)
		shares[i] = fmt.Sprintf("%.1f%%", 100*share)
		if want := 1 / float64(n); share < 0.8*want || share > 1.2*want {
			t.Errorf("process %d (started %v after the first) got %d of %d admissions, %.1f%%; want %.1f%% ± 20%%",
				i, time.Duration(i)*job.Stagger, r.Admitted, total, 100*share, 100*want)
		}
	}
	util := float64(busy) / float64(slots*job.Window)
	perCall := float64(scripts) / float64(all)
	t.Logf("%s, %d processes × %d goroutines, %d slots, %v calls: shares %s, %d admitted in %v, slot utilization %.1f%%, %.3f script calls per admitted call (%d / %d), %d other commands",
		job.Kind, n, job.Goroutines, slots, job.Call, strings.Join(shares, " "), total, job.Window, 100*util, perCall, scripts, all, others)
	// Three calls per admission when every call waits its turn: the
	// acquire that queues it, the one that claims its slot, the settle.
	// What goes above is a waiter's fallback timer firing before its grant
	// message arrived, which a loaded machine causes now and then.
	if perCall > 3.05 {
		t.Errorf("%.3f script calls per admitted call; want at most 3.05", perCall)
	}
}

// startShareWorker runs this test binary as a worker for job and returns
// its report.
func startShareWorker(t *testing.T, job shareJob) shareResult {
	js, err := json.Marshal(job)
	if err != nil {
		t.Error(err)
		return shareResult{}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSlotsSharedByProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), shareWorkerEnv+"="+string(js))
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("worker %d: %v\n%s", job.Index, err, out)
		return shareResult{}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(line, "share-result "); ok {
			var r shareResult
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Errorf("worker %d: %v in %q", job.Index, err, line)
			}
			return r
		}
	}
	t.Errorf("worker %d printed no result:\n%s", job.Index, out)
	return shareResult{}
}

// runShareWorker is one worker process: it runs the job and prints its
// result on a line of its own.
func runShareWorker(t *testing.T, js string) {
	var job shareJob
	if err := json.Unmarshal([]byte(js), &job); err != nil {
		t.Fatal(err)
	}
	var rdb redis.UniversalClient
	if job.Kind == "cluster" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: job.Addrs})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: job.Addrs[0]})
	}
	defer rdb.Close()
	var scripts, others atomic.Int64
	rdb.AddHook(commandCounter{&scripts, &others})
	p, err := pacer.New(rdb, pacer.Config{Name: job.Name, Limits: pacer.Limits{Concurrency: job.Slots}, MaxWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	from := job.Start.Add(job.Warm)
	to := from.Add(job.Window)
	time.Sleep(time.Until(job.Start.Add(time.Duration(job.Index) * job.Stagger)))
	var res shareResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range job.Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(to) {
				l, err := p.Acquire(ctx, pacer.Request{})
				if err != nil {
					mu.Lock()
					res.Errors = append(res.Errors, err.Error())
					mu.Unlock()
					return
				}
				at := time.Now()
				time.Sleep(job.Call)
				took := time.Since(at)
				err = l.Settle(ctx, 0)
				mu.Lock()
				res.All++
				if !at.Before(from) && at.Before(to) {
					res.Admitted++
					res.Busy += took
				}
				if err != nil {
					res.Errors = append(res.Errors, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Scripts, res.Others = scripts.Load(), others.Load()
	out, _ := json.Marshal(res)
	fmt.Printf("share-result %s\n", out)
}

// commandCounter counts the script calls a client sends, and its other
// commands.
type commandCounter struct{ scripts, others *atomic.Int64 }

func (commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "evalsha", "eval":
			h.scripts.Add(1)
		case "hello", "client", "cluster", "command":
			// the connection's own set-up
		default:
			h.others.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
