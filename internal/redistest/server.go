package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process of the test's own, on a free loopback
// port, that the test may kill and start again: Redis going away and
// coming back, for outage tests. It keeps nothing on disk, so it comes
// back empty, and it is killed when the test ends.
type Server struct {
	Addr string
	t    testing.TB
	dir  string
	cmd  *exec.Cmd
}

// NewServer starts a redis-server for the test. It runs only where the
// real lane runs (LLMPACER_REDIS_ADDR set, so redis-server is installed);
// it skips otherwise, and fails under CI=true.
func NewServer(t testing.TB) *Server {
	t.Helper()
	quiet()
	if os.Getenv("LLMPACER_REDIS_ADDR") == "" {
		missing(t, "Redis (LLMPACER_REDIS_ADDR unset; a test that starts its own redis-server runs only in the real lane)", nil, false)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing(t, "redis-server", err, false)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s := &Server{Addr: addr, t: t, dir: t.TempDir()}
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

// Start starts the server on its address and returns when it answers,
// with the moment it first answered a PING (polled every 2 ms).
func (s *Server) Start() time.Time {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", "")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server on %s: %v", s.Addr, err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return time.Now()
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s does not answer: %v", s.Addr, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Kill kills the server (SIGKILL: no shutdown, as a crash) and waits for
// it to exit. Killing a server that is not running does nothing.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
