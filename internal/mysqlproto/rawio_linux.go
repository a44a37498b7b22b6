//go:build linux && !race && !msan && !asan

package mysqlproto

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a plain TCP or Unix socket with raw system calls
// from inside syscall.RawConn's Read and Write, which keep the poller's
// semantics (readiness waits, deadlines, Close waking a blocked call).
//
// Why: net.Conn's Read and Write enter the scheduler's "in system call"
// state around every call (entersyscall/exitsyscall). On loopback a small
// write carries the receiver's whole TCP receive path and, on the
// virtualised 2-core machines we measure on, takes 10–20 µs, long enough
// for the runtime's monitor thread to take the P away and hand it to
// another thread (a futex wake-up), after which the writer must find a P
// again. Under sysbench point selects that cost showed as ~10 % of Vigil's
// CPU (sysmon's nanosleep, futex, exitsyscall). The sockets are
// non-blocking, so these calls never block: a raw call keeps the P for its
// few microseconds and nobody is woken (calls are bounded by rawMax).
//
// Not built with the race detector or the memory sanitizers: RawSyscall
// is invisible to them, so those builds use net.Conn (rawio_other.go) and
// keep checking the buffers. docs/design.md ("raw socket I/O")
// has the measurements.
type rawIO struct {
	rc syscall.RawConn
	nc net.Conn // for error reporting

	rb    []byte // read: the destination, then the result
	rn    int
	rerr  syscall.Errno
	rfunc func(fd uintptr) bool

	idle  *Conn // readIdle's connection
	ifunc func(fd uintptr) bool

	wb    []byte // write: what is left to send
	werr  syscall.Errno
	wzero bool // a write returned 0 without an error
	wfunc func(fd uintptr) bool

	// flushAwait's state: sent once the write is whole (then wait for
	// the answer), wblocked when the socket took only part of it.
	sent, wblocked bool
	afunc          func(fd uintptr) bool
}

// newRawIO returns raw I/O for nc, or nil when nc is not a plain socket
// (TLS, test pipes).
func newRawIO(nc net.Conn) *rawIO {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawIO{rc: rc, nc: nc}
	r.rfunc = r.readFD
	r.ifunc = r.readIdleFD
	r.wfunc = r.writeFD
	r.afunc = r.awaitFD
	return r
}

func (r *rawIO) readFD(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(r.rb))), uintptr(len(r.rb)))
		switch e {
		case 0:
			r.rn, r.rerr = int(n), 0
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait for readiness, then try again
		default:
			r.rn, r.rerr = 0, e
			return true
		}
	}
}

func (r *rawIO) writeFD(fd uintptr) bool {
	for len(r.wb) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(r.wb))), uintptr(len(r.wb)))
		switch e {
		case 0:
			if n == 0 {
				r.wzero = true
				return true
			}
			r.wb = r.wb[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // the send buffer is full: wait until writable
		default:
			r.werr = e
			return true
		}
	}
	return true
}

// read is net.Conn.Read: at least one byte, or an error (io.EOF at the
// end of the stream).
func (r *rawIO) read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.rb = b
	err := r.rc.Read(r.rfunc)
	r.rb = nil
	return r.readResult(err)
}

// readResult is what a finished RawConn.Read of readFD means, as
// net.Conn.Read would say it.
func (r *rawIO) readResult(err error) (int, error) {
	if err != nil {
		return 0, err // deadline, closed
	}
	if r.rerr != 0 {
		return 0, r.opError("read", r.rerr)
	}
	if r.rn == 0 {
		return 0, io.EOF
	}
	return r.rn, nil
}

// readIdle reads into c's empty read buffer like read, but when nothing
// has arrived it gives c's buffers back to the pool before waiting, and
// takes a read buffer again when the connection becomes readable
// (Conn.ReadCommand).
func (r *rawIO) readIdle(c *Conn) (int, error) {
	r.idle = c
	err := r.rc.Read(r.ifunc)
	r.idle, r.rb = nil, nil
	if c.rbuf == nil {
		c.getRead() // closed or deadline while waiting
	}
	return r.readResult(err)
}

func (r *rawIO) readIdleFD(fd uintptr) bool {
	c := r.idle
	if c.rbuf == nil {
		c.getRead()
	}
	r.rb = c.rbuf[c.w:]
	if r.readFD(fd) {
		return true
	}
	// Nothing yet: wait without buffers.
	c.idleReleases++
	c.putRead()
	if len(c.wbuf) == 0 {
		c.putWrite()
	}
	return false
}

// write is net.Conn.Write: all of b, or an error.
func (r *rawIO) write(b []byte) (int, error) {
	r.wb, r.werr, r.wzero = b, 0, false
	err := r.rc.Write(r.wfunc)
	left := len(r.wb)
	r.wb = nil
	if err == nil && r.werr != 0 {
		err = r.opError("write", r.werr)
	}
	if err == nil && r.wzero {
		err = io.ErrUnexpectedEOF // as internal/poll reports it
	}
	return len(b) - left, err
}

// flushAwait writes wb and then waits, in the same RawConn.Read, for the
// peer's answer, read into rb: the read readiness is armed before the
// write, so the answer's arrival wakes the wait and no read is tried
// before it can have come. It returns the bytes read, whether it waited,
// the write's error and a read error met after the write was whole. When
// the socket takes only part of the write, the rest goes through write
// (waiting until writable) and nothing is read.
func (r *rawIO) flushAwait(wb, rb []byte) (n int, awaited bool, werr, rerr error) {
	r.wb, r.werr, r.wzero, r.sent, r.wblocked = wb, 0, false, false, false
	r.rb, r.rn, r.rerr = rb, 0, 0
	err := r.rc.Read(r.afunc)
	r.rb = nil
	switch {
	case !r.sent && r.werr == 0 && !r.wzero && !r.wblocked:
		// Closed or past the deadline before the write.
		r.wb = nil
		return 0, false, err, nil
	case r.werr != 0:
		r.wb = nil
		return 0, false, r.opError("write", r.werr), nil
	case r.wzero:
		r.wb = nil
		return 0, false, io.ErrUnexpectedEOF, nil
	case r.wblocked:
		rest := r.wb
		r.wb = nil
		_, werr = r.write(rest)
		return 0, false, werr, nil
	}
	r.wb = nil
	n, rerr = r.readResult(err)
	return n, true, nil, rerr
}

func (r *rawIO) awaitFD(fd uintptr) bool {
	if !r.sent {
		if !r.writeFD(fd) {
			r.wblocked = true
			return true
		}
		if r.werr != 0 || r.wzero {
			return true
		}
		r.sent = true
		return false // whole: wait for the answer
	}
	return r.readFD(fd)
}

func (r *rawIO) opError(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: r.nc.LocalAddr().Network(), Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: os.NewSyscallError(op, e)}
}
