package classify

import (
	"bytes"
	"encoding/json"
	"strings"
)

// MaxBodyBytes is how much of a response body this package reads. Provider
// error bodies are a few hundred bytes; a larger body is an HTML page or a
// misbehaving proxy, and its prefix says all there is to say. Callers that
// read bodies themselves can stop at this many bytes.
const MaxBodyBytes = 64 << 10

const (
	// maxDepth bounds how deep the walker tracks JSON paths; deeper values
	// are still read (so the walk stays in sync) but never matched.
	maxDepth = 16
	// maxQuotaIDs bounds how many Gemini quota violations are kept.
	maxQuotaIDs = 16
)

// envelope is the provider-neutral evidence found in an error body (or an
// error value): every field is optional.
type envelope struct {
	rootType   string   // top-level "type": Anthropic sends "error"
	rootObject string   // top-level "object": Mistral sends "error"
	rootCode   string   // top-level "code"
	errType    string   // error.type (OpenAI, Anthropic)
	errCode    string   // error.code as text (OpenAI string, Gemini/Azure number)
	detailCode string   // error.details.error_code (Anthropic spend limit)
	rpcStatus  string   // error.status, a google.rpc.Code name (Gemini)
	awsType    string   // __type or x-amzn-errortype, namespace stripped
	message    string   // error.message, or a root message
	retryDelay string   // google.rpc.RetryInfo.retryDelay
	quotaIDs   []string // google.rpc.QuotaFailure quotaId and quotaMetric
	hint       string   // provider guessed from something other than the shape
}

// isError reports whether the envelope holds any error-looking field.
func (e envelope) isError() bool {
	return e.errType != "" || e.errCode != "" || e.detailCode != "" ||
		e.rpcStatus != "" || e.awsType != "" || e.rootType == "error"
}

// codes lists the codes found, most specific first. A numeric error.code
// (Gemini's 429, Azure's "429") only restates the status, so it comes last.
func (e envelope) codes() []string {
	code, numeric := e.errCode, isDigits(e.errCode)
	if numeric {
		code = ""
	}
	var out []string
	for _, c := range []string{e.detailCode, code, e.errType, e.rpcStatus, e.awsType} {
		if c != "" {
			out = append(out, c)
		}
	}
	if numeric {
		out = append(out, e.errCode)
	}
	return out
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseBody extracts an envelope from at most MaxBodyBytes of body. It
// understands JSON objects and arrays (Gemini wraps stream errors in one),
// server-sent events ("event: error\ndata: {...}") and, for anything else
// such as a proxy's HTML page, keeps the page title or text as the message.
func parseBody(body []byte) envelope {
	if len(body) > MaxBodyBytes {
		body = body[:MaxBodyBytes]
	}
	trimmed := bytes.TrimSpace(body)
	if i := jsonStart(trimmed); i >= 0 {
		if env := parseJSON(trimmed[i:]); env.isError() || env.message != "" {
			return env
		}
	}
	return envelope{message: textMessage(trimmed)}
}

// parseRawJSON extracts an envelope from an SDK error's RawJSON.
// anthropic-sdk-go returns the whole body there, but openai-go returns only
// the object inside {"error": ...}. Read as a body, that object's code and
// type sit at the root, where they mean nothing, and insufficient_quota or
// billing_hard_limit_reached would go unseen. So an object that holds no
// error is read again as the inside of the wrapper it came from.
func parseRawJSON(raw string) envelope {
	if len(raw) > MaxBodyBytes {
		raw = raw[:MaxBodyBytes]
	}
	env := parseBody([]byte(raw))
	trimmed := strings.TrimSpace(raw)
	if env.isError() || !strings.HasPrefix(trimmed, "{") {
		return env
	}
	if inner := parseJSON([]byte(`{"error":` + trimmed + `}`)); inner.isError() {
		return inner
	}
	return env
}

// parseJSON extracts an envelope from JSON that may be cut short.
func parseJSON(b []byte) envelope {
	var env envelope
	walkJSON(b, &env)
	// A flat {"object":"error","type":..,"code":..} body (Mistral). Root
	// "type" and "code" mean nothing otherwise: a successful Anthropic
	// message has "type":"message".
	if env.rootObject == "error" {
		env.errType = firstNonEmpty(env.errType, env.rootType)
		env.errCode = firstNonEmpty(env.errCode, env.rootCode)
	}
	return env
}

// jsonStart finds where JSON starts: at once for a JSON body, after "data:"
// for an event stream, or -1.
func jsonStart(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	if b[0] == '{' || b[0] == '[' {
		return 0
	}
	if i := bytes.Index(b, []byte("data:")); i >= 0 {
		if j := bytes.IndexByte(b[i:], '{'); j >= 0 {
			return i + j
		}
	}
	return -1
}

// walkJSON reads JSON tokens one at a time and records the fields it knows,
// by path. Unlike json.Unmarshal it keeps what it read before a syntax
// error, so a body cut at MaxBodyBytes (or by the network) still yields its
// leading fields.
func walkJSON(b []byte, env *envelope) {
	type frame struct {
		object, wantKey bool
		key             string
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []frame
	path := func() string {
		var p strings.Builder
		for _, f := range stack {
			if f.object {
				if p.Len() > 0 {
					p.WriteByte('.')
				}
				p.WriteString(f.key)
			}
		}
		return p.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, frame{object: t == '{', wantKey: t == '{'})
			case '}', ']':
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
				valueDone()
			}
			continue
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
				stack[n-1].key, stack[n-1].wantKey = t, false
				continue
			}
			if len(stack) <= maxDepth {
				env.record(path(), t)
			}
		case json.Number:
			if len(stack) <= maxDepth {
				env.record(path(), t.String())
			}
		}
		valueDone()
	}
}

// record keeps value if path is a field the classifier reads. The first
// occurrence wins, except for quota ids, which accumulate.
func (e *envelope) record(path, value string) {
	set := func(dst *string) {
		if *dst == "" {
			*dst = value
		}
	}
	switch path {
	case "type":
		set(&e.rootType)
	case "object":
		set(&e.rootObject)
	case "code":
		set(&e.rootCode)
	case "error.type":
		set(&e.errType)
	case "error.code":
		set(&e.errCode)
	case "error.details.error_code":
		set(&e.detailCode)
	case "error.status":
		set(&e.rpcStatus)
	case "__type":
		set(&e.awsType)
		e.awsType = awsCode(e.awsType)
	case "error.message", "message", "Message", "error":
		set(&e.message)
	case "error.details.retryDelay":
		set(&e.retryDelay)
	case "error.details.violations.quotaId", "error.details.violations.quotaMetric":
		if len(e.quotaIDs) < maxQuotaIDs {
			e.quotaIDs = append(e.quotaIDs, value)
		}
	}
}

// awsCode strips the decorations AWS puts around an error code: the
// namespace of "com.amazon.coral.service#ThrottlingException" and the URL
// of "ThrottlingException:http://internal.amazon.com/coral/...".
func awsCode(s string) string {
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// textMessage makes a message out of a body that is not a provider error:
// the <title> of an HTML page when it has one, else the text itself.
func textMessage(b []byte) string {
	lower := asciiLower(b)
	if i := bytes.Index(lower, []byte("<title>")); i >= 0 {
		start := i + len("<title>")
		if j := bytes.Index(lower[start:], []byte("</title>")); j >= 0 {
			return clip(string(b[start:start+j]), MaxMessageLen)
		}
	}
	return clip(string(b), MaxMessageLen)
}

// asciiLower lower-cases ASCII letters only. Unlike bytes.ToLower it never
// changes the length, so an index found in the result is valid in b.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}
