package pacerhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
	"github.com/llmpacer/llmpacer/pacerhttp"
	"github.com/redis/go-redis/v9"
)

// wholeAnswer is a RoundTripper whose answer arrives whole: its body's
// one Read returns every byte with io.EOF, as a short answer already in a
// connection's buffer does. The answer carries OpenAI's rate-limit headers.
type wholeAnswer struct{}

func (wholeAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Ratelimit-Limit-Requests", "1000")
	h.Set("X-Ratelimit-Remaining-Requests", "999")
	h.Set("X-Ratelimit-Limit-Tokens", "1000000")
	h.Set("X-Ratelimit-Remaining-Tokens", "999000")
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(iotest.DataErrReader(bytes.NewReader([]byte(chatAnswer)))), ContentLength: int64(len(chatAnswer)), Request: req,
	}, nil
}

// sendWhole sends a chat call through a transport on p to wholeAnswer.
func sendWhole(t *testing.T, p *pacer.Pacer) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := pacerhttp.NewTransport(p, wholeAnswer{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// An answer that arrives whole reaches the caller before its lease ends:
// the Redis round trips that end it (the settle, the header sync) wait for
// the caller's next Read, so a proxy in front passes the bytes on first.
// Read on to the end, the lease settles the answer's usage.
func TestLastBytesBeforeTheLeaseEnds(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		rdb := b.Client(t)
		scripts := &scriptsRun{}
		rdb.AddHook(scripts)
		ev := &events{}
		p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: wide, Observe: ev.observe})
		if err != nil {
			t.Fatal(err)
		}
		resp := sendWhole(t, p)
		defer resp.Body.Close()
		if n := scripts.n.Load(); n != 1 {
			t.Fatalf("%d Redis scripts before the answer's headers; want 1, the acquire", n)
		}
		buf := make([]byte, 4096)
		n, err := resp.Body.Read(buf)
		if n != len(chatAnswer) || err != nil {
			t.Fatalf("first Read = %d, %v; want the whole answer (%d bytes) and no error yet", n, err, len(chatAnswer))
		}
		if got := ev.of(pacer.Ended); len(got) != 0 {
			t.Errorf("the lease ended before the caller had the answer: %v", got)
		}
		if n := scripts.n.Load(); n != 1 {
			t.Errorf("%d Redis scripts by the time the caller has the answer; want 1, the acquire", n)
		}
		if n, err := resp.Body.Read(buf); n != 0 || err != io.EOF {
			t.Fatalf("second Read = %d, %v; want 0, EOF", n, err)
		}
		settled(t, ev, 1, 23, "whole answer, read to EOF")
		waitScripts(t, scripts, 3) // the acquire, the settle, the header sync
	})
}

// A caller that reads the answer's bytes and closes the body without
// reading on to EOF read it whole: the lease settles the usage, as when
// the EOF came with the bytes, never keeps the reservation.
func TestClosedAfterTheLastBytesSettles(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		ev := &events{}
		p, err := pacer.New(b.Client(t), pacer.Config{Name: redistest.Name(t), Limits: wide, Observe: ev.observe})
		if err != nil {
			t.Fatal(err)
		}
		resp := sendWhole(t, p)
		buf := make([]byte, len(chatAnswer))
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		settled(t, ev, 1, 23, "whole answer, closed after its last byte")
		if n, err := resp.Body.Read(buf); n != 0 || err == nil {
			t.Errorf("Read after Close = %d, %v; want 0 and an error", n, err)
		}
	})
}

// The header sync of a success waits for the caller to have the first
// bytes, and still happens when the caller closes the body unread.
func TestHeaderSyncAfterTheFirstBytes(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		rdb := b.Client(t)
		scripts := &scriptsRun{}
		rdb.AddHook(scripts)
		ev := &events{}
		p, err := pacer.New(rdb, pacer.Config{Name: redistest.Name(t), Limits: wide, Observe: ev.observe})
		if err != nil {
			t.Fatal(err)
		}
		resp := sendWhole(t, p)
		if n := scripts.n.Load(); n != 1 {
			t.Fatalf("%d Redis scripts before the body is read; want 1, the acquire", n)
		}
		resp.Body.Close() // unread: released, and synced
		ev.ended(t, 1)
		waitScripts(t, scripts, 3) // acquire, release, sync
	})
}

// scriptsRun counts the scripts a client runs: a script's EVALSHA that
// meets NOSCRIPT, and is then sent again as EVAL, counts once.
type scriptsRun struct{ n atomic.Int64 }

func (s *scriptsRun) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scriptsRun) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && (err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT")) {
			s.n.Add(1)
		}
		return err
	}
}

func (s *scriptsRun) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// waitScripts waits up to 5 s for n scripts to have run.
func waitScripts(t *testing.T, s *scriptsRun, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.n.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Redis scripts within 5 s; want %d", s.n.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
