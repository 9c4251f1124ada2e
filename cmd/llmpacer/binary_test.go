package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmpacer/llmpacer/internal/redistest"
	"github.com/llmpacer/llmpacer/pacer"
)

// asMainEnv, set, makes the test binary the command itself: TestMain
// runs main, as TestBinary's processes need.
const asMainEnv = "CMD_LLMPACER_AS_MAIN"

// TestMain lets the test binary stand in for the built command (storm's
// and pacer's tests start their workers the same way). It is the same
// package main, built with the same flags (-race under README's command),
// so TestBinary needs no go build of its own: one took a minute and more
// of a loaded CI run, linking the SDKs again.
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// The command, run as an operator runs it (the test binary, see TestMain):
// exit codes, a stop the application's Pacer obeys, and -watch ended by an
// interrupt.
func TestBinary(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sends SIGINT")
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	redistest.Each(t, func(t *testing.T, b redistest.Backend) {
		f := newFixture(t, b)
		env := []string{asMainEnv + "=1"}
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
