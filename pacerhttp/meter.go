package pacerhttp

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpacer/llmpacer/classify"
	"github.com/llmpacer/llmpacer/pacer"
)

// maxAnswer bounds the JSON answer kept to read its usage: larger answers
// (a big batch of embeddings) keep their reservation instead.
const maxAnswer = 32 << 20

// maxUsage caps a usage figure an answer reports: the most a lease takes.
const maxUsage = 1 << 50

// meter is a successful answer's body as the caller reads it: every byte
// passes through unchanged as it arrives, while the usage is read on the
// side (a stream's events as they pass, a JSON answer at its end). The
// lease ends once, when the body ends or is closed: settled with the usage
// if the answer reported it, released (its whole reservation kept) if not.
type meter struct {
	t      *transport
	p      *pacer.Pacer // the budget the call was admitted on
	ctx    context.Context
	l      *pacer.Lease
	k      *keeper
	a      api
	tokens int64
	rc     io.ReadCloser

	mu   sync.Mutex
	scan *streamScanner // nil for a JSON answer
	buf  []byte         // a JSON answer so far
	over bool           // the JSON answer outgrew maxAnswer
	done bool
	// end is the body's end (io.EOF, or the error that cut it) when it
	// came with the last bytes: those go to the caller first, and the
	// next Read ends the lease and returns it.
	end error
	// rl are the answer's rate-limit headers, not yet synced (nil once
	// they are, or with header sync off), and read says the caller has
	// had some of the body.
	rl   *classify.RateLimits
	read bool
}

// sync hands the answer's rate-limit headers to the budget's syncer, once.
// Read calls it once the caller has had the body's first bytes, finish
// at the latest.
func (m *meter) sync() {
	m.mu.Lock()
	rl := m.rl
	m.rl = nil
	m.mu.Unlock()
	if rl != nil {
		m.t.syncer(m.p).push(*rl)
	}
}

// Read passes the answer through and reads its usage on the side.
//
// The lease ends on the Read after the body's last bytes, not on the one
// that returns them: ending it is a Redis round trip, and a short answer
// (a JSON body, or a stream the provider sent at once) often arrives whole
// with its end in one read. A proxy in front (`llmpacer proxy`) then
// passes the bytes on before the round trip, not after it.
func (m *meter) Read(p []byte) (int, error) {
	m.mu.Lock()
	end, syncNow := m.end, m.read && m.rl != nil
	m.mu.Unlock()
	if syncNow {
		m.sync()
	}
	if end != nil {
		m.finish(end == io.EOF)
		return 0, end
	}
	n, err := m.rc.Read(p)
	if n > 0 {
		m.k.touch()
		m.mu.Lock()
		switch {
		case m.done:
		case m.scan != nil:
			m.scan.Write(p[:n])
		case !m.over && len(m.buf)+n <= maxAnswer:
			m.buf = append(m.buf, p[:n]...)
		default:
			m.over, m.buf = true, nil
		}
		if err != nil {
			m.end, err = err, nil
		}
		m.read = true
		m.mu.Unlock()
	}
	if err != nil {
		m.finish(err == io.EOF)
	}
	return n, err
}

// Close closes the answer and ends the lease if the body did not end. A
// body whose end was read with its last bytes ended there, whether or not
// the caller read on to see it.
func (m *meter) Close() error {
	err := m.rc.Close()
	m.mu.Lock()
	eof := m.end == io.EOF
	m.mu.Unlock()
	m.finish(eof)
	return err
}

// finish ends the lease once: eof says the whole answer was read.
func (m *meter) finish(eof bool) {
	m.mu.Lock()
	if m.done {
		m.mu.Unlock()
		return
	}
	m.done = true
	var (
		u       usage
		ok      bool
		v       classify.Verdict
		failure bool
	)
	if m.scan != nil {
		u, ok = m.scan.Usage()
		// A stream cut or closed before its last usage event has only a
		// figure from on the way (Anthropic's message_start, an early
		// Gemini chunk): the provider may have counted more.
		ok = ok && (eof || m.scan.Final())
		v, failure = m.scan.Failure()
		// Closed after its end marker, a stream was read whole.
		eof = eof || m.scan.Done()
	} else if eof && !m.over {
		u, ok = usageFromJSON(m.a, m.buf)
	}
	m.buf = nil
	m.mu.Unlock()
	m.sync()
	m.k.stop()
	switch {
	case failure && !ok:
		// An error event inside a 200 stream: answered as the same error
		// before the stream began would be.
		m.t.answer(m.ctx, v, m.p, m.l, v.Status)
	case ok:
		// Input is all the prompt the provider processed (cache reads and
		// writes included), so that input and output add up to the total;
		// a figure past any real call's (a broken server's) is capped.
		total := min(max(u.Total, 0), maxUsage)
		out := min(max(u.Output, 0), total)
		used := pacer.Usage{Input: total - out, Output: out}
		// Read from the provider's cache, priced apart by Spend rates.
		used.CachedInput = min(max(u.Cached, u.CacheRead, 0), used.Input)
		settle(m.ctx, m.l, func(ctx context.Context) error { return m.l.SettleUsage(ctx, used) })
	case eof && !failure:
		// A whole answer that reports no usage: the call succeeded, and
		// the provider may have counted all it reserved. Settled at the
		// reservation (never 0), so that a stopped budget's probe counts
		// as the success it is.
		settle(m.ctx, m.l, func(ctx context.Context) error { return m.l.Settle(ctx, m.l.Info().Tokens) })
	default:
		// A stream cut or closed early: the provider may have counted
		// everything. Keep the reservation: a failure nothing is known
		// of, which tells the budget nothing.
		_ = m.l.Fail(m.ctx, classify.Verdict{}, nil)
	}
}

// keeper keeps a lease alive while its call runs: while the request waits
// for its answer, and then while the caller reads the body. A body the
// caller stops reading without closing it stops renewing after two idle
// renewal periods, and the lease then expires (its reservation kept). The
// loop is the lease's own (Lease.KeepAlive); the idle rule is the
// transport's, told to it by canceling the loop's context.
type keeper struct {
	stopLoop func()
	cancel   context.CancelFunc // ends the loop: the caller went idle
	idle     time.Duration      // two renewal periods
	last     atomic.Int64       // when the caller last read, in Unix ns
	mu       sync.Mutex         // guards timer and done
	timer    *time.Timer        // the idle rule's, from the answer on
	done     bool               // stopped: the idle timer arms no more
}

// keep starts keeping l alive.
func keep(l *pacer.Lease) *keeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &keeper{cancel: cancel, idle: 2 * max(time.Until(l.Info().Expiry)/3, 10*time.Millisecond)}
	k.stopLoop = l.KeepAlive(ctx)
	return k
}

// answered records that the answer's headers have arrived: from now on
// only the caller's reading keeps the lease alive. A slow model may take
// minutes to answer: until then the lease is never idle.
func (k *keeper) answered() {
	k.touch()
	k.mu.Lock()
	if !k.done {
		k.timer = time.AfterFunc(k.idle, k.check)
	}
	k.mu.Unlock()
}

// touch records that the body is being read.
func (k *keeper) touch() { k.last.Store(time.Now().UnixNano()) }

// check runs when the idle bound may have passed: it ends the loop if the
// caller has not read since, or looks again when it would have.
func (k *keeper) check() {
	left := k.idle - time.Since(time.Unix(0, k.last.Load()))
	if left <= 0 {
		k.cancel()
		return
	}
	k.mu.Lock()
	if !k.done {
		k.timer.Reset(left)
	}
	k.mu.Unlock()
}

// stop stops keeping the lease alive, and waits for the loop to end.
func (k *keeper) stop() {
	k.mu.Lock()
	k.done = true
	if k.timer != nil {
		k.timer.Stop()
	}
	k.mu.Unlock()
	k.cancel()
	k.stopLoop()
}
