package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The environment variables the command reads.
const (
	envURL      = "LLMPACER_REDIS_URL"
	envCluster  = "LLMPACER_REDIS_CLUSTER"
	envUsername = "LLMPACER_REDIS_USERNAME"
	envPassword = "LLMPACER_REDIS_PASSWORD"
	envCAFile   = "LLMPACER_REDIS_CA_FILE"
)

// endpoint is where to connect, before a client is made.
type endpoint struct {
	addrs              []string // host:port, or a socket path with network unix
	network            string   // "tcp" or "unix"
	db                 int
	username, password string
	tls                bool
	cluster            bool
	source             string // where the address came from, for messages
}

// connect returns a client of the Redis that the flags or env name, and
// how to name it in output (never with credentials).
func connect(o options, env func(string) string, stderr io.Writer) (redis.UniversalClient, string, error) {
	e, err := resolve(o, env)
	if err != nil {
		return nil, "", err
	}
	where := e.describe()
	if !e.local() {
		if (o.cmd == "pause" || o.cmd == "stop" || o.cmd == "resume") && !o.allowRemote {
			return nil, "", usagef("%s names %s, which is not on loopback: add -allow-remote to %s a budget there (the flag is asked for each change, so that an environment left pointing at production cannot change it by accident)", e.source, where, o.cmd)
		}
		if !e.tls && e.password != "" {
			fmt.Fprintf(stderr, "llmpacer: warning: the password goes to %s in clear text; use rediss:// (TLS) for a Redis off this machine\n", where)
		}
	}
	var tc *tls.Config
	if e.tls {
		if tc, err = tlsConfig(e, env(envCAFile)); err != nil {
			return nil, "", err
		}
	}
	// ContextTimeoutEnabled makes every command end at -timeout's
	// deadline, not only at the client's own read timeout.
	if e.cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: e.addrs, Username: e.username, Password: e.password, TLSConfig: tc,
			DialTimeout: 5 * time.Second, ContextTimeoutEnabled: true,
		}), where, nil
	}
	return redis.NewClient(&redis.Options{
		Network: e.network, Addr: e.addrs[0], DB: e.db, Username: e.username, Password: e.password, TLSConfig: tc,
		DialTimeout: 5 * time.Second, ContextTimeoutEnabled: true,
	}), where, nil
}

// resolve reads the endpoint from the flags, else the environment.
func resolve(o options, env func(string) string) (endpoint, error) {
	var e endpoint
	var err error
	switch {
	case o.redis != "":
		e, err = parseNodes("-redis", o.redis, false, true)
	case o.cluster != "":
		e, err = parseNodes("-cluster", o.cluster, true, true)
	case env(envURL) != "" && env(envCluster) != "":
		return e, usagef("both %s and %s are set: unset the one you do not mean", envURL, envCluster)
	case env(envURL) != "":
		e, err = parseNodes(envURL, env(envURL), false, false)
	case env(envCluster) != "":
		e, err = parseNodes(envCluster, env(envCluster), true, false)
	default:
		return e, usagef("no Redis given: set %s=redis://127.0.0.1:6379 (rediss:// for TLS), or %s=host:port,host:port for a cluster; credentials go in the URL or in %s", envURL, envCluster, envPassword)
	}
	if err != nil {
		return e, err
	}
	// Credentials apart from the URL, for secrets injected one by one.
	if u, p := env(envUsername), env(envPassword); u != "" || p != "" {
		if e.username != "" || e.password != "" {
			return e, usagef("%s carries credentials and %s or %s is set too: give them once", e.source, envUsername, envPassword)
		}
		e.username, e.password = u, p
	}
	return e, nil
}

// parseNodes parses s, one address or (for a cluster) a comma-separated
// list: each host:port or a redis://, rediss:// or (one server) unix://
// URL. From a flag (fromFlag) it refuses any credentials.
func parseNodes(source, s string, cluster, fromFlag bool) (endpoint, error) {
	e := endpoint{network: "tcp", cluster: cluster, source: source}
	parts := []string{s}
	if cluster {
		parts = strings.Split(s, ",")
	}
	for i, part := range parts {
		part = strings.TrimSpace(part)
		if part == "" {
			return e, usagef("%s has an empty address: give host:port or redis://host:port", source)
		}
		n, err := parseNode(source, part, fromFlag)
		if err != nil {
			return e, err
		}
		if i == 0 {
			e.network, e.db, e.username, e.password, e.tls = n.network, n.db, n.username, n.password, n.tls
		} else if n.url && (n.tls != e.tls || n.username != e.username || n.password != e.password) {
			// One client has one set of options: a node that asks for
			// others would silently get the first's.
			return e, usagef("%s: node %d asks for other TLS or credentials than the first; give them once, in the first node's URL", source, i+1)
		}
		if cluster && n.network == "unix" {
			return e, usagef("%s: a cluster's nodes are host:port addresses, not unix sockets", source)
		}
		e.addrs = append(e.addrs, n.addrs[0])
	}
	return e, nil
}

// node is one parsed address.
type node struct {
	endpoint
	url bool // given as a URL, not a bare host:port
}

func parseNode(source, s string, fromFlag bool) (node, error) {
	var n node
	n.network = "tcp"
	if !strings.Contains(s, "://") {
		if strings.Contains(s, "@") {
			return n, credentialsErr(source, fromFlag)
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return n, usagef("%s: %q is not host:port or a redis:// URL", source, s)
		}
		n.addrs = []string{s}
		return n, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's error repeats the URL, password and all: name the
		// source only.
		return n, usagef("%s is not a valid URL: use redis://host:port, rediss://host:port or unix:///path", source)
	}
	q := u.Query()
	if u.User != nil || q.Has("password") || q.Has("username") {
		if fromFlag {
			return n, credentialsErr(source, fromFlag)
		}
	}
	n.url = true
	switch u.Scheme {
	case "redis", "rediss":
		o, err := redis.ParseURL(s)
		if err != nil {
			return n, usagef("%s: %v", source, redact(err, u))
		}
		n.addrs, n.db, n.username, n.password, n.tls = []string{o.Addr}, o.DB, o.Username, o.Password, o.TLSConfig != nil
	case "unix":
		o, err := redis.ParseURL(s)
		if err != nil {
			return n, usagef("%s: %v", source, redact(err, u))
		}
		n.network, n.addrs, n.db, n.username, n.password = "unix", []string{o.Addr}, o.DB, o.Username, o.Password
	default:
		return n, usagef("%s: scheme %q: use redis://, rediss:// (TLS) or unix://", source, u.Scheme)
	}
	return n, nil
}

// credentialsErr refuses credentials given on the command line.
func credentialsErr(source string, fromFlag bool) error {
	if !fromFlag {
		return usagef("%s: credentials belong in the URL's user:password@ part", source)
	}
	return usagef("%s carries credentials: a password on the command line is kept in shell history and shown by ps; put the URL in %s (or the password in %s) and leave it out of the flag", source, envURL, envPassword)
}

// redact returns err's text without u's password.
func redact(err error, u *url.URL) string {
	msg := err.Error()
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}

// describe names the endpoint for output, without credentials.
func (e endpoint) describe() string {
	scheme := "redis"
	if e.tls {
		scheme = "rediss"
	}
	if e.network == "unix" {
		return "unix://" + e.addrs[0]
	}
	if e.cluster {
		return "cluster " + scheme + "://" + strings.Join(e.addrs, ",")
	}
	return scheme + "://" + e.addrs[0]
}

// local reports whether every address is on this machine: a unix socket,
// "localhost" or a loopback IP. Names are not resolved: a name that
// resolves to loopback counts as remote, the safe side.
func (e endpoint) local() bool {
	if e.network == "unix" {
		return true
	}
	for _, a := range e.addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return false
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return false
		}
	}
	return true
}

// tlsConfig returns the TLS settings: the server's name checked against
// its certificate, by the system's authorities or those of caFile.
func tlsConfig(e endpoint, caFile string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(e.addrs[0])
	if err != nil {
		return nil, usagef("%s: %q is not host:port", e.source, e.addrs[0])
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, usagef("%s: %v", envCAFile, err)
	}
	c.RootCAs = x509.NewCertPool()
	if !c.RootCAs.AppendCertsFromPEM(pem) {
		return nil, usagef("%s=%s holds no PEM certificate", envCAFile, caFile)
	}
	return c, nil
}
