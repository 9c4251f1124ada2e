package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// The built command, run as an operator runs it: exit codes, a stop the
// application's Pacer obeys, and -watch ended by an interrupt.
func TestBinary(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sends SIGINT")
	}
	bin := filepath.Join(t.TempDir(), "llmpacer")
	args := append(append([]string{"build"}, raceFlags...), "-o", bin, ".")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		f := newFixture(t, b)
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LLMPACER_") {
				env = append(env, kv)
			}
		}
		for k, v := range envOf(b) {
			env = append(env, k+"="+v)
		}
		exe := func(args ...string) (string, int) {
			t.Helper()
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return string(out), ee.ExitCode()
			}
			if err != nil {
				t.Fatal(err)
			}
			return string(out), 0
		}
		if out, code := exe("-prefix", f.prefix); code != exitOK || !strings.Contains(out, f.defined.Config().Name) {
			t.Errorf("llmpacer list: exit %d\n%s", code, out)
		}
		if out, code := exe("show", "-prefix", f.prefix, "nosuch"); code != exitNotFound {
			t.Errorf("llmpacer show nosuch: exit %d\n%s", code, out)
		}
		if out, code := exe("-redis", "redis://:pw@127.0.0.1:1"); code != exitUsage || strings.Contains(out, "pw@") {
			t.Errorf("llmpacer -redis with a password: exit %d\n%s", code, out)
		}
		if out, code := exe("stop", "-prefix", f.prefix, "-for", "1m", f.defined.Config().Name); code != exitOK {
			t.Errorf("llmpacer stop: exit %d\n%s", code, out)
		}
		if _, err := f.defined.TryAcquire(context.Background(), pacer.Request{Tokens: 1}); !errors.Is(err, pacer.ErrStopped) {
			t.Errorf("TryAcquire after llmpacer stop = %v; want ErrStopped", err)
		}

		cmd := exec.Command(bin, "-watch", "-interval", "100ms", "-prefix", f.prefix)
		cmd.Env = env
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Two refreshes, then an interrupt.
		sc := bufio.NewScanner(stdout)
		for n := 0; n < 2 && sc.Scan(); {
			if strings.Contains(sc.Text(), "STOPPED by an operator") {
				n++
			}
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		go func() {
			for sc.Scan() {
			}
		}()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("llmpacer -watch after an interrupt: %v; want exit 0", err)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("llmpacer -watch still runs 20 s after an interrupt")
		}
	})
}
