package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// contextKind classifies the caller's own context ending.
//
// context.Canceled and context.DeadlineExceeded are Canceled, never retried:
// the caller gave up, and a retry would outlive its intent (a Run loop that
// retried a deadline would sleep past it and fail anyway).
//
// One exception: net/http's Client.Timeout is a per-attempt timeout, and
// its error also matches context.DeadlineExceeded (net/http's timeoutError
// implements Is). A fresh attempt gets a fresh timeout, so it is Transient.
// The error isn't typed specifically (timeoutError is unexported), so we
// resort to matching on the error string. A per-attempt timeout set through
// context.WithTimeout (as the SDKs' request-timeout options do) cannot be
// told from the caller's deadline and is Canceled; a caller that uses one
// should retry when its own ctx.Err() is nil.
func contextKind(err error, text string) (Kind, bool) {
	if strings.Contains(text, "Client.Timeout") {
		return Transient, true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled, true
	}
	return OK, false
}

// networkKind classifies errors from dialing, TLS and the connection.
// Certificate errors are Permanent: a bad certificate will be just as bad on
// the next attempt. Everything else that failed below HTTP (resets, refused
// connections, timeouts, a connection closed mid-body) is Transient.
//
// Must be checked after contextKind: a *url.Error wrapping the caller's
// context.DeadlineExceeded is also a net.Error with Timeout() true.
func networkKind(err error) (Kind, bool) {
	var (
		certVerify *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		badCert    x509.CertificateInvalidError
		badHost    x509.HostnameError
	)
	if errors.As(err, &certVerify) || errors.As(err, &unknownCA) ||
		errors.As(err, &badCert) || errors.As(err, &badHost) {
		return Permanent, true
	}
	var (
		opErr  *net.OpError
		dnsErr *net.DNSError
		netErr net.Error
	)
	// Not any net.Error: *url.Error is one whatever it wraps, including
	// "unsupported protocol scheme", which no retry fixes. Its Timeout
	// reports the wrapped error's.
	switch {
	case errors.As(err, &opErr),
		errors.As(err, &dnsErr),
		errors.As(err, &netErr) && netErr.Timeout(),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF), // the server closed the connection before answering
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH):
		return Transient, true
	}
	return OK, false
}

// networkPhrases are fragments of network error texts, for errors that were
// flattened to a string (fmt.Errorf with %v, or an SDK that re-creates
// errors) and so lost the types networkKind looks for. These errors aren't
// typed any more, so we resort to matching on the error string.
var networkPhrases = []string{
	"connection reset",
	"connection refused",
	"broken pipe",
	"unexpected EOF",
	"i/o timeout",
	"TLS handshake timeout",
	"server sent GOAWAY",
	"http2: client connection lost",
	"use of closed network connection",
	"no such host",
}

// mentionsNetwork reports whether s contains one of networkPhrases.
func mentionsNetwork(s string) bool {
	for _, p := range networkPhrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
