package pacerhttp

import (
	"bytes"
	"encoding/json"
)

// includeUsage is the member withIncludeUsage adds.
const includeUsage = `"include_usage":true`

// withIncludeUsage returns body with stream_options.include_usage set to
// true, and whether it changed anything. Without it an OpenAI chat or
// legacy completions stream reports no usage, and the transport could
// only settle its estimate.
//
// It edits the bytes in place of re-encoding them, so every other field,
// every other stream_options member, and the caller's key order and
// number spelling reach the provider unchanged. A body that is not a JSON
// object, or that already asks for usage, is returned as it is.
func withIncludeUsage(body []byte) ([]byte, bool) {
	if !isObject(body) || !json.Valid(body) {
		return body, false
	}
	top, ok := members(body)
	if !ok {
		return body, false
	}
	opts, found := top.last("stream_options")
	if !found {
		// Add the member after the last one, or inside an empty object.
		at, sep := top.open+1, ""
		if n := len(top.list); n > 0 {
			at, sep = top.list[n-1].end, ","
		}
		return splice(body, at, at, sep+`"stream_options":{`+includeUsage+`}`), true
	}
	val := body[opts.start:opts.end]
	if val[0] != '{' {
		// null, or a value the API would refuse anyway: replace it.
		return splice(body, opts.start, opts.end, `{`+includeUsage+`}`), true
	}
	inner, ok := members(val)
	if !ok {
		return body, false
	}
	iu, found := inner.last("include_usage")
	if !found {
		at, ins := opts.start+inner.open+1, includeUsage
		if len(inner.list) > 0 {
			ins += ","
		}
		return splice(body, at, at, ins), true
	}
	if string(val[iu.start:iu.end]) == "true" {
		return body, false
	}
	return splice(body, opts.start+iu.start, opts.start+iu.end, "true"), true
}

// member is one member of a JSON object: its key and its value's span.
type member struct {
	key        string
	start, end int // body[start:end] is the value
}

// object is the layout of a JSON object: where '{' is, and its members.
type object struct {
	open int
	list []member
}

// last returns the last member named key: encoding/json and the
// providers' own parsers let a repeated key's last value win.
func (o object) last(key string) (member, bool) {
	for i := len(o.list) - 1; i >= 0; i-- {
		if o.list[i].key == key {
			return o.list[i], true
		}
	}
	return member{}, false
}

// members lays out the valid JSON object b. It reports false if b is not
// an object.
func members(b []byte) (object, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return object{}, false
	}
	o := object{open: int(dec.InputOffset()) - 1}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey {
			return object{}, false
		}
		// The decoder stops after the key; the value starts after the
		// colon and any space.
		start := int(dec.InputOffset())
		for start < len(b) && (b[start] == ':' || isSpace(b[start])) {
			start++
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return object{}, false
		}
		o.list = append(o.list, member{key: key, start: start, end: int(dec.InputOffset())})
	}
	return o, true
}

// splice returns b with b[from:to] replaced by s, in a new slice: the
// caller's body is never written to.
func splice(b []byte, from, to int, s string) []byte {
	out := make([]byte, 0, len(b)-(to-from)+len(s))
	out = append(out, b[:from]...)
	out = append(out, s...)
	return append(out, b[to:]...)
}

// isSpace reports whether c is JSON white space.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}
