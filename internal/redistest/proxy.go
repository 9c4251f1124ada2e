package redistest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy sits between a client and a Redis and can delay or drop what Redis
// answers: a Redis that is slow, hung or gone, for failure tests.
type Proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // ns added before each answer chunk is passed on
	hang   atomic.Bool  // swallow answers
	drop   atomic.Bool  // discard requests: Redis never sees them
	mu     sync.Mutex
	conns  []net.Conn
}

// NewProxy starts a proxy to target on a loopback port, closed when the
// test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Delay makes every answer arrive d late.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// Hang makes answers never arrive (until Hang(false)).
func (p *Proxy) Hang(on bool) { p.hang.Store(on) }

// Drop makes requests vanish before they reach Redis (until Drop(false)):
// a Redis so stuck that it runs nothing, not even the call whose answer
// the client waits for.
func (p *Proxy) Drop(on bool) { p.drop.Store(on) }

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		r, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, r)
		p.mu.Unlock()
		go p.requests(c, r)
		go p.answers(c, r)
	}
}

func (p *Proxy) requests(c, r net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && !p.drop.Load() {
			if _, werr := r.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = r.Close()
			return
		}
	}
}

func (p *Proxy) answers(c, r net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			for p.hang.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = c.Close()
			return
		}
	}
}
