package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmpacer/llmpacer/internal/redistest"
)

// Credentials on the command line are refused, and the refusal never
// repeats them.
func TestCredentialsOnCommandLine(t *testing.T) {
	for _, args := range [][]string{
		{"-redis", "redis://user:s3cret@127.0.0.1:1"},
		{"-redis", "redis://:s3cret@127.0.0.1:1"},
		{"-redis", "rediss://user@127.0.0.1:1"},
		{"-redis", "redis://127.0.0.1:1?password=s3cret"},
		{"-redis", "user:s3cret@127.0.0.1:1"},
		{"-redis", "unix://:s3cret@/tmp/redis.sock"},
		{"-cluster", "127.0.0.1:1,redis://:s3cret@127.0.0.1:2"},
		{"stop", "-for", "1m", "x", "-redis", "redis://:s3cret@127.0.0.1:1"},
	} {
		r := runWith(t, nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, envURL) || !strings.Contains(r.stderr, "shell history") || strings.Contains(r.stderr, "s3cret") {
			t.Errorf("llmpacer %q: exit %d, %q; want exit 2 pointing to %s, without the password", args, r.code, r.stderr, envURL)
		}
	}
}

// Credentials come from the URL in the environment, or from
// LLMPACER_REDIS_PASSWORD beside a URL or a flag without them.
func TestCredentialsFromEnvironment(t *testing.T) {
	m := miniredis.RunT(t)
	m.RequireUserAuth("ops", "s3cret")
	addr := m.Addr()
	for _, c := range []struct {
		env  map[string]string
		args []string
		code int
	}{
		{map[string]string{envURL: "redis://ops:s3cret@" + addr}, nil, exitOK},
		{map[string]string{envURL: "redis://" + addr, envUsername: "ops", envPassword: "s3cret"}, nil, exitOK},
		{map[string]string{envUsername: "ops", envPassword: "s3cret"}, []string{"-redis", addr}, exitOK},
		{map[string]string{envUsername: "ops", envPassword: "s3cret"}, []string{"-redis", "redis://" + addr + "/0"}, exitOK},
		{map[string]string{envURL: "redis://ops:wrong@" + addr}, nil, exitFailed},
		{map[string]string{envURL: "redis://" + addr}, nil, exitFailed},
		{map[string]string{envURL: "redis://ops:s3cret@" + addr, envPassword: "s3cret"}, nil, exitUsage},
		{map[string]string{envURL: "redis://" + addr, envCluster: addr}, nil, exitUsage},
		{map[string]string{envCluster: "redis://ops:a@127.0.0.1:1,redis://ops:b@127.0.0.1:2"}, nil, exitUsage},
		{map[string]string{envURL: "http://" + addr}, nil, exitUsage},
		{map[string]string{envURL: "redis://ops:s3cret@" + addr + "/notadb"}, nil, exitUsage},
		{nil, nil, exitUsage},
	} {
		r := runWith(t, c.env, append(c.args, "-prefix", "nothing-here", "-timeout", "5s")...)
		if r.code != c.code || strings.Contains(r.stderr+r.stdout, "s3cret") {
			t.Errorf("env %v, args %q: exit %d, %s%s; want exit %d, never the password", c.env, c.args, r.code, r.stdout, r.stderr, c.code)
		}
	}
}

// Reading works against any host; a change to a Redis off loopback needs
// -allow-remote, asked before anything is dialled.
func TestRemote(t *testing.T) {
	for _, cmd := range [][]string{{"stop", "-for", "1m", "x"}, {"pause", "-for", "1s", "x"}, {"resume", "x"}} {
		for _, env := range []map[string]string{
			{envURL: "rediss://redis.prod.internal:6380"},
			{envURL: "redis://10.1.2.3:6379"},
			{envCluster: "127.0.0.1:7000,10.1.2.3:7001"},
		} {
			r := runWith(t, env, cmd...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "-allow-remote") {
				t.Errorf("%q against %v: exit %d, %q; want exit 2 asking for -allow-remote", cmd, env, r.code, r.stderr)
			}
		}
	}
	for _, c := range []struct {
		addrs   []string
		network string
		local   bool
	}{
		{[]string{"127.0.0.1:6379"}, "tcp", true},
		{[]string{"127.9.9.9:6379"}, "tcp", true},
		{[]string{"[::1]:6379"}, "tcp", true},
		{[]string{"localhost:6379"}, "tcp", true},
		{[]string{"/run/redis.sock"}, "unix", true},
		{[]string{"127.0.0.1:7000", "127.0.0.1:7001"}, "tcp", true},
		{[]string{"127.0.0.1:7000", "10.0.0.1:7001"}, "tcp", false},
		{[]string{"redis.local:6379"}, "tcp", false},
		{[]string{"0.0.0.0:6379"}, "tcp", false},
		{[]string{"[::ffff:10.0.0.1]:6379"}, "tcp", false},
	} {
		if got := (endpoint{addrs: c.addrs, network: c.network}).local(); got != c.local {
			t.Errorf("endpoint %v local() = %v; want %v", c.addrs, got, c.local)
		}
	}
	// Reading a remote Redis asks nothing more; a password sent there in
	// clear text is warned of.
	var errb bytes.Buffer
	o := options{cmd: "list"}
	c, where, err := connect(o, func(k string) string { return map[string]string{envURL: "redis://:pw@10.1.2.3:6379"}[k] }, &errb)
	if err != nil {
		t.Fatalf("connect for list to a remote Redis = %v", err)
	}
	c.Close()
	if where != "redis://10.1.2.3:6379" || !strings.Contains(errb.String(), "clear text") {
		t.Errorf("connect: where %q, stderr %q; want the address without credentials and a clear-text warning", where, errb.String())
	}
}

// rediss:// speaks TLS and checks the server's certificate against the
// system's authorities or LLMPACER_REDIS_CA_FILE's.
func TestTLS(t *testing.T) {
	redistest.QuietRedisLog(t)
	caFile, cert := selfSigned(t)
	m, err := miniredis.RunTLS(&tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	url := "rediss://" + m.Addr()
	if r := runWith(t, map[string]string{envURL: url, envCAFile: caFile}); r.code != exitOK || !strings.Contains(r.stdout, "rediss://"+m.Addr()) {
		t.Errorf("list over TLS with the CA: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	if r := runWith(t, map[string]string{envURL: url, envCAFile: caFile}, "-redis", url); r.code != exitOK {
		t.Errorf("list over TLS, -redis rediss://: exit %d, %s", r.code, r.stderr)
	}
	if r := runWith(t, map[string]string{envURL: url}, "-timeout", "5s"); r.code != exitFailed || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("list over TLS without the CA: exit %d, %q; want exit 1, a certificate error", r.code, r.stderr)
	}
	if r := runWith(t, map[string]string{envURL: "redis://" + m.Addr()}, "-timeout", "2s"); r.code != exitFailed {
		t.Errorf("list in clear text to a TLS server: exit %d; want 1", r.code)
	}
	if r := runWith(t, map[string]string{envURL: url, envCAFile: filepath.Join(t.TempDir(), "none.pem")}); r.code != exitUsage {
		t.Errorf("a missing CA file: exit %d; want 2", r.code)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and returns
// its PEM file and the server's key pair.
func selfSigned(t *testing.T) (string, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llmpacer test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
