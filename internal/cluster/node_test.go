package cluster

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// node is a Redis stand-in on a loopback port: it answers each command with
// what answer returns, raw RESP. An empty answer closes the connection and
// "hang" never answers. HELLO and CLIENT are refused, as by an old server,
// so that go-redis talks RESP2 without preamble.
type node struct {
	ln     net.Listener
	answer func(cmd []string) string
	mu     sync.Mutex
	counts map[string]int
}

func newNode(t *testing.T, answer func(cmd []string) string) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{ln: ln, answer: answer, counts: map[string]int{}}
	var conns sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { n.serve(c) })
			go func() { <-t.Context().Done(); _ = c.Close() }()
		}
	}()
	return n
}

func (n *node) Addr() string { return n.ln.Addr().String() }

// Count returns how many commands named name (upper case, with their
// subcommand: "CLUSTER SLOTS") the node has received.
func (n *node) Count(name string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.counts[name]
}

func (n *node) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		name := strings.ToUpper(cmd[0])
		if name == "CLUSTER" && len(cmd) > 1 {
			name += " " + strings.ToUpper(cmd[1])
		}
		n.mu.Lock()
		n.counts[name]++
		n.mu.Unlock()
		a := "-ERR unknown command\r\n"
		if name != "HELLO" && !strings.HasPrefix(name, "CLIENT") {
			a = n.answer(cmd)
		}
		switch a {
		case "":
			return
		case "hang":
			_, _ = io.Copy(io.Discard, r)
			return
		}
		if _, err := io.WriteString(c, a); err != nil {
			return
		}
	}
}

// readCommand reads one command as clients send it: an array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readHeader(r, '*')
	if err != nil {
		return nil, err
	}
	cmd := make([]string, n)
	for i := range cmd {
		size, err := readHeader(r, '$')
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		cmd[i] = string(b[:size])
	}
	return cmd, nil
}

func readHeader(r *bufio.Reader, kind byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 3 || line[0] != kind {
		return 0, io.ErrUnexpectedEOF
	}
	return strconv.Atoi(strings.TrimRight(line[1:], "\r\n"))
}
