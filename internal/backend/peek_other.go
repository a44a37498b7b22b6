//go:build !linux

package backend

import "net"

// peeker is Linux only (peek_linux.go); elsewhere a pooled connection is
// checked by the ping on checkout after validate_idle alone.
type peeker struct{}

func newPeeker(net.Conn) *peeker { return nil }

func (*peeker) serverClosed() bool { return false }
