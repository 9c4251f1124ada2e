// Package wire is the Go side of the scripts' calling convention: what a
// caller computes and sends (each bucket's charge, allowance and
// corrections in microseconds), how it runs a script bounded by its
// context, and how it checks a reply. Package pacer, the proxy and the
// reference model in internal/model all call these functions, so the
// model's fuzzer checks the arithmetic that production sends, not a copy.
//
// docs/lua-contract.md states the same convention for workers in other
// languages.
package wire
