package pacerhttp

import (
	"bytes"

	"github.com/llmpacer/llmpacer/classify"
)

// maxEvent bounds the bytes the scanner holds for one SSE line, one
// event's data, or one JSON chunk. Usage and error events are a few
// hundred bytes; a longer one is a content chunk the scanner has no use
// for, so it is skipped whole instead of growing memory with the stream.
const maxEvent = 1 << 20

// maxLine bounds one SSE line: an event's worth of data plus room for
// the field name, so that a line holding a whole maxEvent of data fits.
const maxLine = maxEvent + 64

// maxEventName bounds the event field kept: every name the scanner
// matches is short.
const maxEventName = 64

// Stream modes, decided by the first byte that is not white space.
const (
	modeUnknown = iota // nothing but white space seen yet
	modeSSE            // server-sent events ("data:", "event:", ":" ...)
	modeJSON           // a JSON array of chunks (Gemini without alt=sse) or a plain JSON answer
)

// streamScanner reads an answer's stream as the transport passes its bytes
// to the caller, and keeps the usage and the first error it finds.
//
// It never blocks and never fails: the caller's bytes are the caller's,
// and a scanner that cannot make sense of them only reports no usage. It
// holds at most about 2×maxEvent bytes (a line and an event's data), and
// about 64 KiB between long events; an event longer than maxEvent is
// skipped, whatever else it held. Feeding the
// same bytes in any split gives the same Usage and Failure.
//
// It accepts server-sent events as the HTML spec defines them: lines end
// in \n, \r\n or \r; "data:" takes an optional single space; multi-line
// data is joined with \n; lines starting with ':' are comments; an event
// is dispatched at a blank line; a leading byte-order mark is skipped. A
// stream whose first byte is '[' or '{' is read as JSON instead: Gemini's
// streamGenerateContent without alt=sse streams one JSON array of chunks,
// and a server may answer a stream request with a plain JSON body.
//
// A streamScanner is not safe for concurrent use; the transport feeds it
// from the one goroutine that reads the body.
type streamScanner struct {
	api  api
	mode int

	// SSE state.
	line      []byte // the current line, when it spans Writes
	lineOver  bool   // the current line passed maxLine
	afterCR   bool   // the last byte was \r: a \n right after it ends nothing
	event     []byte // the current event's type
	data      []byte // the current event's data lines, joined with \n
	hasData   bool   // a data line was seen since the last dispatch
	eventOver bool   // the current event passed maxEvent: skip it

	// JSON state.
	depth      int    // nesting depth, outside strings
	inString   bool   // inside a JSON string
	escaped    bool   // the last byte in a string was a backslash
	base       int    // depth at which chunks start: 1 in an array, 0 alone
	collecting bool   // inside a chunk object
	chunk      []byte // the chunk so far
	chunkOver  bool   // the chunk passed maxEvent: skip it

	// Findings.
	ended  bool // the stream's own end marker passed: [DONE], message_stop
	acc    usageAcc
	fail   classify.Verdict
	failed bool
}

// newStreamScanner returns a scanner for an answer of endpoint a.
func newStreamScanner(a api) *streamScanner {
	return &streamScanner{api: a}
}

// Write scans p. It may be called with any split of the stream, including
// mid-line and mid-UTF-8, and keeps no reference to p.
func (s *streamScanner) Write(p []byte) {
	if s.mode == modeUnknown {
		p = s.detect(p)
	}
	switch s.mode {
	case modeSSE:
		s.writeSSE(p)
	case modeJSON:
		s.writeJSON(p)
	}
}

// detect skips leading white space and byte-order-mark bytes and picks
// the mode from the first byte after them. It returns the rest of p,
// starting at that byte.
func (s *streamScanner) detect(p []byte) []byte {
	for i, c := range p {
		switch c {
		case ' ', '\t', '\r', '\n', 0xEF, 0xBB, 0xBF:
			continue
		case '[':
			s.mode, s.base = modeJSON, 1
		case '{':
			s.mode, s.base = modeJSON, 0
		default:
			s.mode = modeSSE
		}
		return p[i:]
	}
	return nil
}

// Usage returns the usage found so far, and true once the provider sent
// it. For Anthropic that is from message_start on, with output_tokens
// growing as message_delta events arrive.
func (s *streamScanner) Usage() (usage, bool) {
	return s.acc.u, s.acc.ok
}

// Done reports whether the stream said it is whole: its end marker
// ([DONE], message_stop) or its final usage passed. A caller that closes
// the body right after it (SDKs stop reading at [DONE]) closed a whole
// answer, not a cut one.
func (s *streamScanner) Done() bool {
	return s.ended || s.acc.final
}

// Final reports whether the usage found is the call's whole usage: the
// stream's last usage event has passed (OpenAI's usage chunk, a terminal
// Responses event, Anthropic's message_delta, the Gemini chunk that
// finishes), not only a figure sent on the way.
func (s *streamScanner) Final() bool {
	return s.acc.final
}

// Failure returns the first error event found inside the stream, which a
// provider sends after its 200 when the call fails midway (Anthropic's
// overloaded_error, an OpenAI or Gemini {"error": ...} chunk, a Responses
// error or response.failed event), classified as classify.FromHTTP
// classifies an error body.
func (s *streamScanner) Failure() (classify.Verdict, bool) {
	return s.fail, s.failed
}

// writeSSE splits p into lines and handles each.
func (s *streamScanner) writeSSE(p []byte) {
	if s.afterCR && len(p) > 0 {
		s.afterCR = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.appendLine(p)
			return
		}
		if len(s.line) == 0 && !s.lineOver {
			s.handleLine(p[:i], i > maxLine)
		} else {
			s.appendLine(p[:i])
			s.handleLine(s.line, s.lineOver)
			s.line, s.lineOver = reuse(s.line), false
		}
		if p[i] == '\r' {
			if i+1 == len(p) {
				s.afterCR = true
			} else if p[i+1] == '\n' {
				i++
			}
		}
		p = p[i+1:]
	}
}

// appendLine adds part of a line that spans Writes, up to maxLine.
func (s *streamScanner) appendLine(b []byte) {
	if s.lineOver {
		return
	}
	if len(s.line)+len(b) > maxLine {
		s.line, s.lineOver = nil, true
		return
	}
	s.line = appendBounded(s.line, b, maxLine)
}

// handleLine handles one complete line, without its ending.
func (s *streamScanner) handleLine(line []byte, over bool) {
	switch {
	case over:
		s.eventOver = true
		return
	case len(line) == 0:
		s.dispatch()
		return
	case line[0] == ':':
		return // a comment, such as a keep-alive
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(field) {
	case "data":
		if s.eventOver {
			return
		}
		extra := len(value)
		if s.hasData {
			extra++
		}
		if len(s.data)+extra > maxEvent {
			s.eventOver, s.data = true, nil
			return
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data, s.hasData = appendBounded(s.data, value, maxEvent), true
	case "event":
		s.event = append(s.event[:0], value[:min(len(value), maxEventName)]...)
	}
}

// dispatch ends the current event: it handles its data unless the event
// was too long, and starts the next.
func (s *streamScanner) dispatch() {
	if s.hasData && !s.eventOver {
		s.handleEvent(s.event, s.data)
	}
	s.event, s.data = s.event[:0], reuse(s.data)
	s.hasData, s.eventOver = false, false
}

// writeJSON follows the JSON nesting of p and hands each complete chunk
// object at the base depth to handleChunk.
func (s *streamScanner) writeJSON(p []byte) {
	start := -1 // where the part of the current chunk inside p begins
	if s.collecting {
		start = 0
	}
	for i, c := range p {
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		switch c {
		case '"':
			s.inString = true
		case '{', '[':
			if s.depth == s.base && c == '{' && !s.collecting {
				s.collecting, s.chunk, s.chunkOver, start = true, s.chunk[:0], false, i
			}
			s.depth++
		case '}', ']':
			if s.depth > 0 {
				s.depth--
			}
			if s.depth == s.base && s.collecting {
				s.appendChunk(p[start : i+1])
				if !s.chunkOver {
					s.handleChunk(s.chunk)
				}
				s.collecting, s.chunk, start = false, reuse(s.chunk), -1
			}
		}
	}
	if s.collecting && start >= 0 {
		s.appendChunk(p[start:])
	}
}

// appendChunk adds to the current chunk, up to maxEvent.
func (s *streamScanner) appendChunk(b []byte) {
	if s.chunkOver {
		return
	}
	if len(s.chunk)+len(b) > maxEvent {
		s.chunk, s.chunkOver = nil, true
		return
	}
	s.chunk = appendBounded(s.chunk, b, maxEvent)
}

// keepBuffer is the largest buffer kept for the next line, event or
// chunk. A stream usually needs a few KiB; one long event should not pin
// a mebibyte for the rest of a long stream.
const keepBuffer = 64 << 10

// appendBounded appends src to dst, whose caller has checked that the
// result fits in limit, and never grows dst's capacity past limit:
// append's own growth could overshoot the bound by a quarter.
func appendBounded(dst, src []byte, limit int) []byte {
	if need := len(dst) + len(src); need > cap(dst) {
		grown := make([]byte, len(dst), min(max(2*cap(dst), need, 512), limit))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, src...)
}

// reuse returns b emptied for reuse, or nil when it grew past keepBuffer.
func reuse(b []byte) []byte {
	if cap(b) > keepBuffer {
		return nil
	}
	return b[:0]
}
