package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Points in one traced call, in the order a call passes them.
const (
	cSend  = iota // client: Do called
	cWrote        // client: request written
	sIn           // lane server: handler entered
	rStart        // Redis: first command (the Acquire's) sent
	rWrite        // Redis: its write to the connection began
	rWrote        // Redis: its write returned
	rRead         // Redis: the read of its reply returned
	rEnd          // Redis: its reply read
	uRT           // upstream transport: RoundTrip entered
	uConn         // upstream transport: connection got
	uWrote        // upstream transport: request written
	pIn           // provider: handler entered
	pFlush        // provider: first flush done
	uHdr          // upstream transport: first response byte
	uRet          // upstream transport: RoundTrip returned
	bRead         // the upstream body's first Read called
	bGot          // the upstream body's first Read returned
	sWrite        // lane server: first body write to the client
	sFlush        // lane server: first flush to the client
	cHdr          // client: first response byte
	cFirst        // client: first body byte read
	nPoints
)

var pointNames = [nPoints]string{"c.send", "c.wrote", "s.in", "r.start", "r.write", "r.wrote", "r.read", "r.end", "u.rt", "u.conn", "u.wrote",
	"p.in", "p.flush", "u.hdr", "u.ret", "b.read", "b.got", "s.write", "s.flush", "c.hdr", "c.first"}

// stamps are the times one call passed each point (0: not passed).
type stamps struct {
	mu     sync.Mutex
	t      [nPoints]time.Time
	reused bool
	cmd    string // the first Redis command's name (and script)
	before int    // Redis commands sent before the upstream RoundTrip
}

func (s *stamps) mark(i int) {
	if s == nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	if s.t[i].IsZero() {
		s.t[i] = now
	}
	s.mu.Unlock()
}

type stampsKey struct{}

// tracer keeps the current call's stamps and every call's, by lane. The
// traced rounds make one call at a time, so the provider's handler and the
// Redis connections, which see no context of the call, mark the current
// one.
type tracer struct {
	mu   sync.Mutex
	cur  *stamps
	byLn map[string][]*stamps
}

// active holds the tracer of a -trace run, nil otherwise: the lanes are
// then built without any of the wrappers below. It is atomic because a
// call's background work (a header sync) may still read it as a run ends.
var active atomic.Pointer[tracer]

func tracing() *tracer { return active.Load() }

func (t *tracer) current() *stamps {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// traceLane marks the lane server's points, and puts the call's stamps in
// the request's context for the upstream transport and the Redis hook.
func traceLane(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := tracing().current()
		s.mark(sIn)
		h.ServeHTTP(&traceWriter{ResponseWriter: w, s: s, write: sWrite, flush: sFlush}, r.WithContext(context.WithValue(r.Context(), stampsKey{}, s)))
	})
}

// traceProvider marks the provider's points.
func traceProvider(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := tracing().current()
		s.mark(pIn)
		h.ServeHTTP(&traceWriter{ResponseWriter: w, s: s, write: -1, flush: pFlush}, r)
	})
}

type traceWriter struct {
	http.ResponseWriter
	s            *stamps
	write, flush int
	wrote        bool
}

func (w *traceWriter) Write(b []byte) (int, error) {
	if w.write >= 0 {
		w.s.mark(w.write)
	}
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *traceWriter) Flush() {
	http.NewResponseController(w.ResponseWriter).Flush()
	if w.wrote {
		w.s.mark(w.flush)
	}
}

func (w *traceWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// traceTransport marks the upstream transport's points.
type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s, _ := req.Context().Value(stampsKey{}).(*stamps)
	if s == nil {
		return t.base.RoundTrip(req)
	}
	s.mark(uRT)
	ct := &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			s.mark(uConn)
			s.reused = i.Reused
		},
		WroteRequest:         func(httptrace.WroteRequestInfo) { s.mark(uWrote) },
		GotFirstResponseByte: func() { s.mark(uHdr) },
	}
	resp, err := t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), ct)))
	s.mark(uRet)
	if err == nil {
		resp.Body = &traceBody{ReadCloser: resp.Body, s: s}
	}
	return resp, err
}

// traceRedis marks the first command of a traced call.
type traceRedis struct{}

func (traceRedis) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return c, err
		}
		return traceConn{c}, nil
	}
}

// traceConn marks the first command's write and reply on the connection.
type traceConn struct{ net.Conn }

// during returns the current call's stamps while its first Redis command
// is on its way.
func during() *stamps {
	s := tracing().current()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t[rStart].IsZero() || !s.t[rEnd].IsZero() {
		return nil
	}
	return s
}

func (c traceConn) Write(b []byte) (int, error) {
	s := during()
	s.mark(rWrite)
	n, err := c.Conn.Write(b)
	s.mark(rWrote)
	return n, err
}

func (c traceConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	during().mark(rRead)
	return n, err
}

func (traceRedis) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s, _ := ctx.Value(stampsKey{}).(*stamps)
		first := false
		if s != nil {
			s.mu.Lock()
			first = s.t[rStart].IsZero()
			if s.t[uRT].IsZero() {
				s.before++
			}
			s.mu.Unlock()
		}
		if first {
			s.mark(rStart)
			s.cmd = cmd.Name()
			if a := cmd.Args(); len(a) > 1 && s.cmd == "evalsha" {
				sha := fmt.Sprint(a[1])
				s.cmd += " " + sha[:min(8, len(sha))]
			}
		}
		err := next(ctx, cmd)
		if first {
			s.mark(rEnd)
		}
		return err
	}
}

func (traceRedis) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// tracedCall calls l with stamps and keeps them.
func (l lane) tracedCall(ctx context.Context, body string) error {
	tr := tracing()
	s := &stamps{}
	tr.mu.Lock()
	tr.cur = s
	tr.mu.Unlock()
	ct := &httptrace.ClientTrace{
		WroteRequest:         func(httptrace.WroteRequestInfo) { s.mark(cWrote) },
		GotFirstResponseByte: func() { s.mark(cHdr) },
	}
	ctx = httptrace.WithClientTrace(ctx, ct)
	req, err := http.NewRequestWithContext(ctx, "POST", l.base+"/openai/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	s.mark(cSend)
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return err
	}
	s.mark(cFirst)
	_, err = io.Copy(io.Discard, resp.Body)
	tr.mu.Lock()
	tr.cur = nil
	tr.byLn[l.name] = append(tr.byLn[l.name], s)
	tr.mu.Unlock()
	return err
}

// traceRounds runs n traced stream rounds and prints the median of each
// step between consecutive points passed, by lane.
func (s *setup) traceRounds(ctx context.Context, out io.Writer, n int, body string) error {
	tr := tracing()
	for _, l := range s.lanes {
		if err := l.tracedCall(ctx, body); err != nil {
			return err
		}
	}
	tr.byLn = map[string][]*stamps{}
	order := s.order()
	for range n {
		for _, j := range order() {
			l := s.lanes[j]
			if err := l.tracedCall(ctx, body); err != nil {
				fmt.Fprintln(s.log, err)
			}
		}
	}
	fmt.Fprintf(out, "\ntraced stream calls, %d rounds: median µs of each step (from the previous point passed)\n| step |", n)
	for _, l := range s.lanes {
		fmt.Fprintf(out, " %s |", l.name)
	}
	fmt.Fprintln(out)
	for i := 1; i < nPoints; i++ {
		fmt.Fprintf(out, "| %s |", pointNames[i])
		for _, l := range s.lanes {
			var d []time.Duration
			for _, st := range tr.byLn[l.name] {
				if st.t[i].IsZero() {
					continue
				}
				prev := i - 1
				for prev > 0 && st.t[prev].IsZero() {
					prev--
				}
				d = append(d, st.t[i].Sub(st.t[prev]))
			}
			if len(d) == 0 {
				fmt.Fprint(out, " |")
				continue
			}
			slices.Sort(d)
			fmt.Fprintf(out, " %s |", us(pct(d, 0.5)))
		}
		fmt.Fprintln(out)
	}
	row := func(title string, cell func(calls []*stamps) string) {
		fmt.Fprintf(out, "| %s |", title)
		for _, l := range s.lanes {
			fmt.Fprintf(out, " %s |", cell(tr.byLn[l.name]))
		}
		fmt.Fprintln(out)
	}
	row("total, c.send to c.first", func(calls []*stamps) string {
		var d []time.Duration
		for _, st := range calls {
			d = append(d, st.t[cFirst].Sub(st.t[cSend]))
		}
		slices.Sort(d)
		return us(pct(d, 0.5))
	})
	row("upstream connection reused", func(calls []*stamps) string {
		n := 0
		for _, st := range calls {
			if st.reused {
				n++
			}
		}
		return fmt.Sprintf("%d of %d", n, len(calls))
	})
	row("Redis commands before the upstream send", func(calls []*stamps) string {
		by := map[string]int{}
		for _, st := range calls {
			by[fmt.Sprintf("%d %s", st.before, st.cmd)]++
		}
		var cells []string
		for k, n := range by {
			cells = append(cells, fmt.Sprintf("%s: %d calls", strings.TrimSpace(k), n))
		}
		slices.Sort(cells)
		return strings.Join(cells, "; ")
	})
	return nil
}

// traceBody marks the upstream body's first Read.
type traceBody struct {
	io.ReadCloser
	s *stamps
}

func (b *traceBody) Read(p []byte) (int, error) {
	b.s.mark(bRead)
	n, err := b.ReadCloser.Read(p)
	b.s.mark(bGot)
	return n, err
}
