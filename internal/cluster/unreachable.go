package cluster

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/redis/go-redis/v9"
)

// unreachable reports whether err says the command did not reach a node
// that serves its slot: the node is down or gone (refused, reset, EOF, a
// timeout), or it answered that the cluster cannot serve the slot right now
// (CLUSTERDOWN, TRYAGAIN). A reply about the command itself (a script error,
// NOSCRIPT, OOM) is not: the map is fine. Nor are MOVED, ASK and READONLY,
// on which go-redis reloads the map itself.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	// Checked before the context errors: a dial that timed out wraps
	// context.DeadlineExceeded, and a node that cannot be dialled is down.
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	// The caller's deadline or cancellation says nothing of the cluster.
	// context.DeadlineExceeded is also a net.Error, so this precedes that.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
		return true
	}
	return redis.IsClusterDownError(err) || redis.IsTryAgainError(err)
}

// Unreachable reports whether err says the command never reached a Redis
// that could serve it: see unreachable. Package pacer trips its outage
// circuit on the same errors, and on a Redis still loading its data or
// whose master is down (a replica that cannot serve).
func Unreachable(err error) bool {
	return unreachable(err) || redis.IsLoadingError(err) || redis.IsMasterDownError(err)
}
