package classify

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"
)

// The interfaces below are how FromError reaches into SDK errors without
// importing the SDKs. Each names the SDK types known to satisfy it.
type (
	// httpResponder is implemented by errors that carry the response they
	// came from. No official SDK has it; it is the convention this package
	// offers to transports and wrappers that want full classification.
	httpResponder interface{ HTTPResponse() *http.Response }

	// responseDumper is implemented by openai-go's and anthropic-sdk-go's
	// *Error, whose status and response live in struct fields
	// (StatusCode, Response) that an interface cannot reach. Their
	// DumpResponse(false) writes the status line and headers;
	// DumpResponse(true) adds the body, read only when RawJSON lacks it.
	responseDumper interface{ DumpResponse(body bool) []byte }

	// rawJSONer is implemented by openai-go's and anthropic-sdk-go's Error.
	// anthropic-sdk-go returns the whole body; openai-go returns only the
	// object inside {"error": ...}, or "" when the body has none.
	rawJSONer interface{ RawJSON() string }

	// awsAPIError is the part of smithy-go's APIError interface needed here,
	// implemented by every modelled AWS exception (Bedrock's
	// ThrottlingException, ServiceQuotaExceededException, ...).
	awsAPIError interface {
		ErrorCode() string
		ErrorMessage() string
	}

	// httpStatusCoder is implemented by smithy-go's *http.ResponseError,
	// which the AWS SDK wraps around every service error.
	httpStatusCoder interface{ HTTPStatusCode() int }

	// statusCoder is the common Go spelling for the same thing in other
	// clients.
	statusCoder interface{ StatusCode() int }
)

// FromError classifies an error returned by a provider call. It accepts
// any error, nil included (the zero Verdict, OK).
//
// It looks, in this order, for:
//
//  1. net/http's per-attempt Client.Timeout (Transient), then the caller's
//     context ending (Canceled, never retried; see Canceled);
//  2. an HTTP response in the error chain: HTTPResponse() *http.Response,
//     openai-go and anthropic-sdk-go errors (DumpResponse, RawJSON), AWS
//     smithy errors (ErrorCode, HTTPStatusCode), classified as FromHTTP
//     would;
//  3. network failures: certificate errors are Permanent, resets, refused
//     connections, timeouts and unexpected EOFs are Transient;
//  4. as a last resort, the error text: a status and body as SDKs print
//     them (this is how google genai's APIError, which has only fields, is
//     read), then network phrases.
//
// Anything still unrecognised is Permanent, with the error text as Message.
func FromError(err error) Verdict {
	return fromErrorAt(err, time.Now())
}

// fromErrorAt is FromError with the clock passed in, for tests.
func fromErrorAt(err error, now time.Time) Verdict {
	if err == nil {
		return Verdict{}
	}
	text := errorText(err)
	plain := func(k Kind) Verdict {
		return Verdict{Kind: k, Provider: providerFromText(text), Message: cleanMessage(text)}
	}
	// Must be checked before the network check below: a *url.Error wrapping
	// the caller's context.DeadlineExceeded is also a net.Error.
	if k, ok := contextKind(err, text); ok {
		return plain(k)
	}
	if v, ok := fromAPIError(err, text, now); ok {
		return v
	}
	if k, ok := networkKind(err); ok {
		return plain(k)
	}
	if status, env := fromText(text); status != 0 || env.isError() {
		if env.message == "" {
			env.message = text
		}
		return decide(status, nil, env, now)
	}
	if mentionsNetwork(text) {
		return plain(Transient)
	}
	return plain(Permanent)
}

// fromAPIError gathers status, headers and body from the SDK shapes above.
// ok is false when the chain holds none of them.
func fromAPIError(err error, text string, now time.Time) (Verdict, bool) {
	status, h, env, found := sdkResponse(err)
	if otherCodes(err, &status, &env) {
		found = true
	}
	if !found {
		return Verdict{}, false
	}
	status, env = fillFromText(status, env, text)
	return decide(status, h, env, now), true
}

// sdkResponse reads what an SDK's error holds of the response: its status
// and headers, and the error body's envelope. found is false when the
// chain holds none of them.
func sdkResponse(err error) (status int, h http.Header, env envelope, found bool) {
	var (
		hr httpResponder
		rd responseDumper
		rj rawJSONer
	)
	if errors.As(err, &hr) {
		var r *http.Response
		guard(func() { r = hr.HTTPResponse() })
		if r != nil {
			status, h, found = r.StatusCode, r.Header, true
		}
	}
	if !found && errors.As(err, &rd) {
		var dump []byte
		guard(func() { dump = rd.DumpResponse(false) })
		if s, hh, _, ok := parseDump(dump); ok {
			status, h, found = s, hh, true
		}
	}
	var raw string
	if errors.As(err, &rj) {
		guard(func() { raw = rj.RawJSON() })
		if raw != "" {
			env, found = parseRawJSON(raw), true
		}
	}
	// openai-go leaves RawJSON empty when the body has no "error" member:
	// Mistral's flat error, a proxy's HTML page, plain text. The body is then
	// only in the response. Both SDKs read an error status's body whole and
	// put it back in memory before they return, so reading it cannot block.
	// A stream error arrives after a 2xx, and its body is the live stream:
	// that one is never read.
	if raw == "" && status >= 400 && rd != nil {
		var dump []byte
		guard(func() { dump = rd.DumpResponse(true) })
		if _, _, body, ok := parseDump(dump); ok && len(body) > 0 {
			env = parseBody(body)
		}
	}
	return status, h, env, found
}

// otherCodes reads the codes an error states without a response (an AWS
// API error's code and message, a status method) into status and env
// where they are still empty, and reports whether it found one.
func otherCodes(err error, status *int, env *envelope) bool {
	var (
		ae    awsAPIError
		hs    httpStatusCoder
		sc    statusCoder
		found bool
	)
	if errors.As(err, &ae) {
		var code, msg string
		guard(func() { code, msg = ae.ErrorCode(), ae.ErrorMessage() })
		if env.awsType == "" {
			env.awsType = awsCode(code)
		}
		if env.message == "" {
			env.message = msg
		}
		found = code != ""
	}
	if *status == 0 && errors.As(err, &hs) {
		guard(func() { *status = hs.HTTPStatusCode() })
		found = found || *status != 0
	}
	if *status == 0 && errors.As(err, &sc) {
		guard(func() { *status = sc.StatusCode() })
		found = found || *status != 0
	}
	return found
}

// fillFromText completes status and env from the error's text where the
// SDK's fields left them empty.
func fillFromText(status int, env envelope, text string) (int, envelope) {
	if !env.isError() {
		// No error in RawJSON or the body: anthropic-sdk-go also prints the
		// body at the end of its error text, and so may other wrappers.
		ts, te := fromText(text)
		te.awsType = firstNonEmpty(env.awsType, te.awsType)
		te.message = firstNonEmpty(env.message, te.message)
		env = te
		if status == 0 {
			status = ts
		}
	}
	if status == 0 {
		status = textStatus(text)
	}
	if env.hint == "" {
		env.hint = providerFromText(text)
	}
	if env.awsType != "" && env.hint == "" {
		env.hint = ProviderBedrock // an AWS exception on an LLM call is Bedrock's
	}
	if env.message == "" {
		env.message = text
	}
	return status, env
}

// parseDump reads an httputil.DumpResponse output: its status, headers and
// at most MaxBodyBytes of its body. A dump that does not parse whole (cut
// short, odd framing) still yields its status line.
func parseDump(b []byte) (status int, h http.Header, body []byte, ok bool) {
	if len(b) == 0 {
		return 0, nil, nil, false
	}
	// Status line and headers are a few hundred bytes, so twice
	// MaxBodyBytes leaves the body all it may use.
	if len(b) > 2*MaxBodyBytes {
		b = b[:2*MaxBodyBytes]
	}
	if resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil); err == nil {
		// A body cut short by the caller's limit ends in an error; what was
		// read before it is kept.
		body, _ = io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
		resp.Body.Close()
		return resp.StatusCode, resp.Header, body, true
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	if _, rest, ok := bytes.Cut(line, []byte(" ")); ok {
		if n := leadingStatus(string(rest)); n != 0 {
			return n, nil, nil, true
		}
	}
	return 0, nil, nil, false
}

// errorText is err.Error(), or "" if that panics.
func errorText(err error) string {
	var s string
	guard(func() { s = err.Error() })
	return s
}

// guard runs f and swallows a panic. SDK error methods dereference their
// Request and Response fields without nil checks (openai-go's DumpResponse
// does), and a classifier running on the error path must not turn
// a hand-built or half-filled error into a crash.
func guard(f func()) {
	defer func() { _ = recover() }()
	f()
}

// firstNonEmpty returns a if it is not empty, else b.
func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
