//go:build linux

package backend

import (
	"net"
	"syscall"
	"unsafe"
)

// peeker looks at a server connection's socket without blocking and
// without consuming anything (one non-blocking recv with MSG_PEEK, well
// under a microsecond, no allocation): see Conn.ServerClosed.
type peeker struct {
	rc     syscall.RawConn
	buf    [1]byte
	closed bool
	f      func(fd uintptr) bool
}

// newPeeker returns a peeker for nc's socket (under TLS, the socket the
// TLS connection runs on), or nil when nc is not a socket it can look at.
func newPeeker(nc net.Conn) *peeker {
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{rc: rc}
	p.f = p.peekFD
	return p
}

func (p *peeker) peekFD(fd uintptr) bool {
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.buf[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			p.closed = false // nothing to read: open and quiet
		case 0:
			p.closed = true // 0 bytes: the stream ended; 1: bytes nobody asked for
		default:
			p.closed = true // ECONNRESET and the like
		}
		return true // never wait for readiness
	}
}

// serverClosed reports whether the stream ended, the socket has an error,
// or bytes wait to be read.
func (p *peeker) serverClosed() bool {
	if err := p.rc.Read(p.f); err != nil {
		return true // closed on our side
	}
	return p.closed
}
