package pacerhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/redis/go-redis/v9"
)

// The benchmarks below measure what the transport itself costs a call,
// beyond the transport it wraps. The provider answers from memory
// (memAnswer), so that neither the network nor a server's work hides the
// difference; the budget is on miniredis, in-process, with limits no call
// reaches, so nothing ever waits. docs/results.md gives the figures as
// ratios, paced over bare, and each benchmark reports:
//
//   - cpu-µs/op: user + system CPU of the whole process per call
//     (getrusage), which counts miniredis's side of each round trip too;
//   - scripts/op: the Redis script calls (EVALSHA, EVAL) the pacer sent
//     per call, counted by a go-redis hook;
//   - allocs/op and ns/op as usual.
//
// /pacer-only runs the same Acquire and Settle without any HTTP: the part
// of paced's cost that is the Redis round trips, so that paced - bare -
// pacer-only is what the transport's own work costs.

// chatBody is a small chat request, as openai-go marshals one.
const chatBody = `{"messages":[{"content":"Summarise the incident report for the on-call engineer.","role":"user"}],"model":"gpt-4o-mini","max_completion_tokens":256}`

// chatAnswer is a chat completion with its usage.
const chatAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1730000000,"model":"gpt-4o-mini-2024-07-18",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"All quiet.","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":19,"completion_tokens":4,"total_tokens":23,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`

// memAnswer is a RoundTripper that answers every request from memory with
// status 200, body and contentType, after reading the request's body as a
// server would.
type memAnswer struct {
	body        []byte
	contentType string
}

func (m memAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", m.contentType)
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(m.body)), ContentLength: int64(len(m.body)), Request: req,
	}, nil
}

// scriptCount counts the script calls a client sends.
type scriptCount struct{ n atomic.Int64 }

func (s *scriptCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scriptCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			s.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (s *scriptCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// benchPacer returns a Pacer on miniredis with limits no benchmark reaches,
// and the count of its script calls.
func benchPacer(b *testing.B) (*pacer.Pacer, *scriptCount) {
	b.Helper()
	rdb := redistest.Mini(b).Client(b)
	sc := &scriptCount{}
	rdb.AddHook(sc)
	p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(b), Limits: pacer.Limits{RPM: 1 << 40, TPM: 1 << 45}})
	if err != nil {
		b.Fatal(err)
	}
	return p, sc
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs op in b.Loop and reports CPU and script calls per op.
func measure(b *testing.B, sc *scriptCount, op func()) {
	b.ReportAllocs()
	var scripts0 int64
	if sc != nil {
		scripts0 = sc.n.Load()
	}
	cpu0 := cpuTime(b)
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	if sc != nil {
		b.ReportMetric(float64(sc.n.Load()-scripts0)/float64(b.N), "scripts/op")
	}
}

// call sends one chat request through rt and reads the whole answer, as an
// SDK does.
func call(b *testing.B, rt http.RoundTripper) {
	req, err := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader(chatBody))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
}

// BenchmarkTransport is one non-streaming chat call through a bare
// transport and through NewTransport around it (header sync has nothing to
// read: the answer carries no rate-limit headers), beside the pacer's own
// Acquire and Settle.
//
//	go test -run '^$' -bench Transport -benchtime 2s -count 3 ./pacerhttp
func BenchmarkTransport(b *testing.B) {
	mem := memAnswer{body: []byte(chatAnswer), contentType: "application/json"}
	b.Run("bare", func(b *testing.B) {
		measure(b, nil, func() { call(b, mem) })
	})
	b.Run("paced", func(b *testing.B) {
		p, sc := benchPacer(b)
		rt := pacerhttp.NewTransport(p, mem)
		call(b, rt) // load the scripts and the tokenizer first
		measure(b, sc, func() { call(b, rt) })
	})
	b.Run("pacer-only", func(b *testing.B) {
		p, sc := benchPacer(b)
		ctx := context.Background()
		measure(b, sc, func() {
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 300})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Settle(ctx, 23); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkStreamFirstByte is the time from RoundTrip's start to the first
// byte a caller reads of a streamed answer, served from memory: bare, and
// through NewTransport (which acquires before sending, and scans the
// stream for its usage as it passes), beside the pacer's Acquire alone.
// first-byte-µs is the mean.
//
//	go test -run '^$' -bench StreamFirstByte -benchtime 2s -count 3 ./pacerhttp
func BenchmarkStreamFirstByte(b *testing.B) {
	sse, err := os.ReadFile(filepath.Join("testdata", "streams", "openai_chat.sse"))
	if err != nil {
		b.Fatal(err)
	}
	mem := memAnswer{body: sse, contentType: "text/event-stream"}
	body := strings.Replace(chatBody, `"model"`, `"stream":true,"stream_options":{"include_usage":true},"model"`, 1)
	stream := func(b *testing.B, rt http.RoundTripper) time.Duration {
		req, err := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var one [1]byte
		t0 := time.Now()
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := resp.Body.Read(one[:]); n != 1 {
			b.Fatalf("first Read = %d, %v; want a byte", n, err)
		}
		d := time.Since(t0)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		return d
	}
	run := func(b *testing.B, rt http.RoundTripper, sc *scriptCount) {
		var total time.Duration
		measure(b, sc, func() { total += stream(b, rt) })
		b.ReportMetric(float64(total)/float64(time.Microsecond)/float64(b.N), "first-byte-µs")
	}
	b.Run("bare", func(b *testing.B) { run(b, mem, nil) })
	b.Run("paced", func(b *testing.B) {
		p, sc := benchPacer(b)
		rt := pacerhttp.NewTransport(p, mem)
		stream(b, rt)
		run(b, rt, sc)
	})
	// The Acquire that paced makes before sending, alone: the part of its
	// first-byte delay that is the Redis round trip.
	b.Run("acquire-only", func(b *testing.B) {
		p, sc := benchPacer(b)
		ctx := context.Background()
		var total time.Duration
		measure(b, sc, func() {
			t0 := time.Now()
			l, err := p.Acquire(ctx, pacer.Request{Tokens: 300})
			total += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Settle(ctx, 23); err != nil {
				b.Fatal(err)
			}
		})
		b.ReportMetric(float64(total)/float64(time.Microsecond)/float64(b.N), "first-byte-µs")
	})
}
