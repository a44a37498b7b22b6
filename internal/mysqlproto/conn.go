// Package mysqlproto owns the MySQL client/server protocol as Vigil speaks
// it on both sides: packet framing with pooled buffers, OK/ERR/EOF packets,
// the v10 handshake and authentication (server side for clients, client side
// for backends), and *SQLError, the typed error every layer returns to a
// client.
//
// Framing is hand-written rather than taken from go-mysql's packet package:
// the proxy forwards result sets frame by frame without decoding rows, and
// needs to see frames in its own read buffer (zero copies, zero allocations
// per query) and to batch writes; go-mysql's packet.Conn allocates a fresh
// slice per packet. Constants and password scrambles come from go-mysql.
package mysqlproto

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// MaxPayload is the largest payload of one frame; a packet of this size or
// more continues in the next frame.
const MaxPayload = 1<<24 - 1

const (
	defaultReadBuf  = 16 << 10
	defaultWriteBuf = 16 << 10
	// flushAt: a pending write buffer larger than this is sent at once.
	flushAt = 64 << 10
	// rawMax bounds one raw system call (rawio_linux.go): a raw call keeps
	// its P and cannot be preempted, so bigger writes go through net.Conn
	// and reads are cut to this size.
	rawMax = 256 << 10
)

// ErrMalformed marks bytes that are not a valid packet.
var ErrMalformed = errors.New("malformed packet")

// ErrPacketTooLarge is returned when a logical packet exceeds the limit
// given to the connection.
var ErrPacketTooLarge = errors.New("packet larger than max_allowed_packet")

// Conn frames MySQL packets over a net.Conn. It is not safe for concurrent
// use: one goroutine reads and writes a Conn at a time (the session that
// owns it, or the pool while it validates it).
type Conn struct {
	nc net.Conn
	// raw does the socket I/O of a plain TCP or Unix connection without
	// the scheduler's system-call bookkeeping (rawio_linux.go); nil for
	// TLS and other transports.
	raw *rawIO
	// idleRelease: inside ReadCommand; idleReleases counts the waits
	// that gave the buffers back (tests).
	idleRelease  bool
	idleReleases int
	// rbox, wbox: the pool boxes of rbuf and wbuf (nil when they are not
	// from the pool or are given back).
	rbox, wbox *[]byte

	rbuf []byte
	r, w int // unread bytes are rbuf[r:w]

	wbuf []byte
	// hdr and vec: a large packet's frame header and write vector
	// (writeLarge), kept to allocate nothing per frame.
	hdr [4]byte
	vec [][]byte

	// big holds a logical packet assembled from several frames, or a frame
	// that does not fit rbuf; reused between calls.
	big []byte

	// MaxPacket bounds an assembled logical packet (0 = 1 GiB).
	MaxPacket int

	// budget, when set, bounds big (SetBudget); held is what big has
	// reserved from it (cap(big), or 0).
	budget *Budget
	held   int64

	// forcePlugin overrides the server's auth plugin choice (tests).
	forcePlugin string

	// Server side of a client connection (Accept): the scramble the
	// client last received (in the greeting or an auth switch), which
	// COM_CHANGE_USER authenticates against as servers do; whether TLS
	// is on; and the failed COM_CHANGE_USER count.
	nonce           []byte
	tlsOn           bool
	changeUserFails int

	// readErr is a read error met by FlushAwait after its write went
	// out, returned by the next read.
	readErr error

	// Seq is the sequence id expected for the next packet read, and used
	// for the next packet written.
	Seq uint8
}

// bufPool recycles the buffers of connections that called Release, and of
// idle connections with idle release on: with connection churn,
// allocating and zeroing 32 KiB per client showed in profiles. It holds
// *[]byte boxes; a Conn keeps the boxes of its buffers so that giving them
// back allocates nothing.
var bufPool = sync.Pool{New: func() any { b := make([]byte, defaultReadBuf); return &b }}

// NewConn wraps nc.
func NewConn(nc net.Conn) *Conn {
	c := &Conn{nc: nc, raw: newRawIO(nc)}
	c.getRead()
	c.getWrite()
	return c
}

func (c *Conn) getRead() {
	c.rbox = bufPool.Get().(*[]byte)
	c.rbuf = (*c.rbox)[:defaultReadBuf]
}

func (c *Conn) getWrite() {
	c.wbox = bufPool.Get().(*[]byte)
	c.wbuf = (*c.wbox)[:0]
}

// takeWrite takes a write buffer again if an idle wait gave it back.
func (c *Conn) takeWrite() {
	if c.wbuf == nil {
		c.getWrite()
	}
}

// putRead gives the read buffer back; nothing may be unread in it.
func (c *Conn) putRead() {
	if c.rbox != nil && cap(c.rbuf) == defaultReadBuf {
		*c.rbox = c.rbuf[:defaultReadBuf]
		bufPool.Put(c.rbox)
	}
	c.rbuf, c.rbox = nil, nil
}

// putWrite gives the write buffer back; nothing may be pending in it.
func (c *Conn) putWrite() {
	if c.wbox != nil && cap(c.wbuf) == defaultWriteBuf {
		*c.wbox = c.wbuf[:defaultWriteBuf]
		bufPool.Put(c.wbox)
	}
	c.wbuf, c.wbox = nil, nil
}

// Release gives the connection's buffers back for reuse by later
// connections. Call it once, after Close, when no goroutine uses the Conn
// any more; the Conn must not be used afterwards.
func (c *Conn) Release() {
	c.putRead()
	c.putWrite()
	c.dropBig()
}

// ReadCommand is ReadPacket for a server reading its peer's next command:
// while it waits for the command to arrive the connection gives both
// buffers back to the pool, and takes a read buffer again when bytes
// arrive, so an idle client holds no buffers (32 KiB less per idle
// client). It costs nothing per command beyond pool operations: the read
// that finds nothing is one the connection makes anyway. Only reads inside
// ReadCommand release buffers: a packet being worked on is never given
// away. Plain sockets only (raw I/O); otherwise it is ReadPacket. No other
// goroutine may use the connection during the call.
func (c *Conn) ReadCommand() ([]byte, error) {
	c.idleRelease = c.raw != nil
	p, err := c.ReadPacket()
	c.idleRelease = false
	return p, err
}

// NetConn is the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// SetNetConn replaces the transport, for the switch to TLS. Nothing may be
// buffered when it is called.
func (c *Conn) SetNetConn(nc net.Conn) {
	c.nc, c.raw = nc, newRawIO(nc)
	c.idleRelease = c.idleRelease && c.raw != nil
}

// read reads the transport once.
func (c *Conn) read(b []byte) (int, error) {
	if c.readErr != nil {
		err := c.readErr
		c.readErr = nil
		return 0, err
	}
	if c.raw != nil {
		if len(b) > rawMax {
			b = b[:rawMax]
		}
		return c.raw.read(b)
	}
	return c.nc.Read(b)
}

// Close closes the transport.
func (c *Conn) Close() error { return c.nc.Close() }

// Buffered is the number of received bytes not yet consumed.
func (c *Conn) Buffered() int { return c.w - c.r }

// SetDeadline sets the read and write deadline of the transport.
func (c *Conn) SetDeadline(t time.Time) error { return c.nc.SetDeadline(t) }

// fill reads at least n unread bytes into rbuf (n <= len(rbuf)).
func (c *Conn) fill(n int) error {
	if c.w-c.r >= n {
		return nil
	}
	if c.r > 0 && (c.r == c.w || len(c.rbuf)-c.r < n) {
		copy(c.rbuf, c.rbuf[c.r:c.w])
		c.w -= c.r
		c.r = 0
	}
	for c.w-c.r < n {
		var m int
		var err error
		if c.idleRelease && c.r == c.w {
			c.r, c.w = 0, 0
			m, err = c.raw.readIdle(c)
		} else {
			m, err = c.read(c.rbuf[c.w:])
		}
		c.w += m
		if err != nil {
			if c.w-c.r >= n {
				return nil
			}
			if errors.Is(err, io.EOF) && c.w-c.r > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// frameHeader checks the header of the next frame (read into rbuf, not
// consumed) and returns its payload length; it advances the sequence id.
func (c *Conn) frameHeader() (int, error) {
	if err := c.fill(4); err != nil {
		return 0, err
	}
	h := c.rbuf[c.r : c.r+4]
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	if h[3] != c.Seq {
		return 0, fmt.Errorf("%w: sequence id %d, expected %d", ErrMalformed, h[3], c.Seq)
	}
	if c.MaxPacket > 0 && n > c.MaxPacket {
		// Refused from the header: nothing is read or allocated for it.
		return 0, ErrPacketTooLarge
	}
	c.Seq++
	return n, nil
}

// ReadFrame returns one frame, header included (4 bytes length and
// sequence id, then the payload). The slice is valid until the next read.
// It checks and advances the sequence id.
func (c *Conn) ReadFrame() ([]byte, error) {
	n, err := c.frameHeader()
	if err != nil {
		return nil, err
	}
	total := 4 + n
	if total <= len(c.rbuf) {
		if err := c.fill(total); err != nil {
			return nil, err
		}
		f := c.rbuf[c.r : c.r+total]
		c.r += total
		return f, nil
	}
	// Larger than the read buffer: assembled in big (readBody).
	f, err := c.readBody(c.big[:0], total, total)
	if err != nil {
		return nil, c.refused(err, total-len(f), false)
	}
	c.big = f
	return f, nil
}

// readBody appends the next n bytes of the stream (buffered ones first)
// to dst. With a budget, dst first grows to hold at least room bytes,
// reserved before it is allocated (see Budget). Without one it grows only
// as bytes arrive (at most doubling what has arrived), never sized from
// the untrusted header alone: a peer that announces 16 MiB and sends 5
// bytes costs a read buffer, not 16 MiB.
func (c *Conn) readBody(dst []byte, n, room int) ([]byte, error) {
	end := len(dst) + n
	for len(dst) < end {
		if len(dst) == cap(dst) || (c.budget != nil && cap(dst) < end) {
			var err error
			if dst, err = c.grow(dst, end, room); err != nil {
				return dst, err
			}
		}
		lim := min(cap(dst), end)
		if c.r < c.w {
			m := copy(dst[len(dst):lim], c.rbuf[c.r:c.w])
			c.r += m
			dst = dst[:len(dst)+m]
			continue
		}
		m, err := c.read(dst[len(dst):lim])
		dst = dst[:len(dst)+m]
		if err != nil && len(dst) < end {
			if errors.Is(err, io.EOF) {
				return dst, io.ErrUnexpectedEOF
			}
			return dst, err
		}
	}
	return dst, nil
}

// grow moves dst to a larger buffer for end bytes. With a budget the new
// buffer (at least room, doubling up to MaxPacket) is reserved first (and
// may be a spare one), the old one given back after the copy, and big
// holds it at once (held is always cap(big)).
func (c *Conn) grow(dst []byte, end, room int) ([]byte, error) {
	b := c.budget
	if b == nil {
		g := make([]byte, len(dst), min(end, max(2*cap(dst), 2*len(c.rbuf))))
		copy(g, dst)
		return g, nil
	}
	limit := c.MaxPacket
	if limit <= 0 {
		limit = 1 << 30
	}
	size := max(end, room, min(2*cap(dst), limit+4))
	g, err := b.alloc(c, size, c.held)
	if err != nil {
		return dst, err
	}
	g = g[:len(dst)]
	copy(g, dst)
	if c.held > 0 {
		b.free(c, c.big, int64(size))
	}
	c.big, c.held = g, int64(size)
	return g, nil
}

// refused finishes a packet whose read failed with err: when the budget
// refused it, the rest of the frame (rest bytes) and, for a logical
// packet (more: the frame was full), the frames after it are read and
// dropped, so that the next read finds the next packet.
func (c *Conn) refused(err error, rest int, more bool) error {
	if !errors.Is(err, ErrStatementMemory) {
		return err
	}
	c.dropBig()
	if derr := c.discard(rest); derr != nil {
		return derr
	}
	for more {
		n, herr := c.frameHeader()
		if herr != nil {
			return herr
		}
		if derr := c.discard(4 + n); derr != nil {
			return derr
		}
		more = n == MaxPayload
	}
	return err
}

// discard reads and drops n bytes through the read buffer.
func (c *Conn) discard(n int) error {
	for n > 0 {
		if c.r == c.w {
			c.r, c.w = 0, 0
			m, err := c.read(c.rbuf)
			c.w = m
			if m == 0 && err != nil {
				if errors.Is(err, io.EOF) {
					return io.ErrUnexpectedEOF
				}
				return err
			}
		}
		k := min(n, c.w-c.r)
		c.r += k
		n -= k
	}
	return nil
}

// ReadPacket returns the payload of one logical packet (frames joined).
// The slice is valid until the next read. A packet larger than the read
// buffer is assembled in one buffer, frame by frame, without other copies.
func (c *Conn) ReadPacket() ([]byte, error) {
	n, err := c.frameHeader()
	if err != nil {
		return nil, err
	}
	if n < MaxPayload && 4+n <= len(c.rbuf) {
		if err := c.fill(4 + n); err != nil {
			return nil, err
		}
		p := c.rbuf[c.r+4 : c.r+4+n]
		c.r += 4 + n
		return p, nil
	}
	limit := c.MaxPacket
	if limit <= 0 {
		limit = 1 << 30
	}
	p := c.big[:0]
	for {
		c.r += 4 // the header, checked by frameHeader (fill(4) buffered it)
		if len(p)+n > limit {
			c.big = p
			return nil, ErrPacketTooLarge
		}
		room := len(p) + n
		if n == MaxPayload && c.budget != nil {
			// More follows, how much is known only at the last frame:
			// the packet is admitted whole, for as much as it may be
			// (max_allowed_packet, in whole 16 MiB steps), in one
			// buffer. Then a reader never holds part of the budget
			// while it waits for more (no deadlock, no overdraft),
			// nothing is copied as the packet grows, and all such
			// buffers have one size, so they are reused (Budget.alloc).
			room = (limit + spareStep - 1) / spareStep * spareStep
		}
		start := len(p)
		if p, err = c.readBody(p, n, room); err != nil {
			return nil, c.refused(err, start+n-len(p), n == MaxPayload)
		}
		c.big = p
		if n < MaxPayload {
			return p, nil
		}
		if n, err = c.frameHeader(); err != nil {
			return nil, err
		}
	}
}

// WritePacket queues payload as one logical packet (split into frames as
// needed) with the current sequence id. Call Flush to send.
func (c *Conn) WritePacket(payload []byte) error {
	if len(payload) > rawMax {
		return c.writeLarge(payload)
	}
	c.takeWrite()
	for {
		n := len(payload)
		if n > MaxPayload {
			n = MaxPayload
		}
		c.wbuf = append(c.wbuf, byte(n), byte(n>>8), byte(n>>16), c.Seq)
		c.wbuf = append(c.wbuf, payload[:n]...)
		c.Seq++
		payload = payload[n:]
		if len(c.wbuf) >= flushAt {
			if err := c.Flush(); err != nil {
				return err
			}
		}
		if n < MaxPayload {
			return nil
		}
	}
}

// writeLarge sends a large payload at once, after what is queued, each
// frame's header and payload in one vectored write: the payload is not
// copied into the write buffer (a 64 MiB statement would be held twice).
func (c *Conn) writeLarge(payload []byte) error {
	if err := c.Flush(); err != nil {
		return err
	}
	for {
		n := min(len(payload), MaxPayload)
		c.hdr = [4]byte{byte(n), byte(n >> 8), byte(n >> 16), c.Seq}
		// Counted before the write, as WritePacket counts a queued frame:
		// a peer that answers the frame and closes while it is still
		// being written (a server refusing it over max_allowed_packet)
		// numbers its answer after it.
		c.Seq++
		c.vec = append(c.vec[:0], c.hdr[:], payload[:n])
		bufs := net.Buffers(c.vec)
		_, err := bufs.WriteTo(c.nc)
		// vec must not keep the payload alive (a pooled server
		// connection would hold a 64 MiB statement until its next one).
		clear(c.vec)
		if err != nil {
			return err
		}
		payload = payload[n:]
		if n < MaxPayload {
			return nil
		}
	}
}

// BeginPacket starts a packet in the write buffer and returns the buffer to
// append the payload to; FinishPacket fills in the header. Packets built
// this way must be shorter than MaxPayload.
func (c *Conn) BeginPacket() (buf []byte, start int) {
	c.takeWrite()
	start = len(c.wbuf)
	c.wbuf = append(c.wbuf, 0, 0, 0, 0)
	return c.wbuf, start
}

// FinishPacket completes a packet begun with BeginPacket.
func (c *Conn) FinishPacket(buf []byte, start int) error {
	n := len(buf) - start - 4
	if n >= MaxPayload {
		return fmt.Errorf("packet of %d bytes built in place", n)
	}
	buf[start], buf[start+1], buf[start+2], buf[start+3] = byte(n), byte(n>>8), byte(n>>16), c.Seq
	c.Seq++
	c.wbuf = buf
	if len(c.wbuf) >= flushAt {
		return c.Flush()
	}
	return nil
}

// WriteFrame queues a raw frame (header included) as is, keeping its
// sequence id; the connection's Seq follows it.
func (c *Conn) WriteFrame(f []byte) error {
	c.takeWrite()
	c.wbuf = append(c.wbuf, f...)
	c.Seq = f[3] + 1
	if len(c.wbuf) >= flushAt {
		return c.Flush()
	}
	return nil
}

// Pending is the number of bytes queued and not yet sent.
func (c *Conn) Pending() int { return len(c.wbuf) }

// Discard drops what is queued and not sent.
func (c *Conn) Discard() { c.wbuf = c.wbuf[:0] }

// Flush sends what is queued.
func (c *Conn) Flush() error {
	if len(c.wbuf) == 0 {
		return nil
	}
	var err error
	if c.raw != nil && len(c.wbuf) <= rawMax {
		_, err = c.raw.write(c.wbuf)
	} else {
		_, err = c.nc.Write(c.wbuf)
	}
	if cap(c.wbuf) > 4*flushAt {
		c.wbuf = make([]byte, 0, defaultWriteBuf) // the big one goes to the GC
	} else {
		c.wbuf = c.wbuf[:0]
	}
	return err
}

// FlushAwait is Flush for a command the peer answers: on a plain socket
// it sends what is queued and waits for the first bytes of the answer in
// one poller wait, and reads them into the buffer. That saves the read
// that would find nothing yet (EAGAIN) and the scheduling around it: a
// server needs tens of microseconds to answer, far longer than the write.
// It reports whether it waited (false: it only flushed, as on TLS, or
// with bytes already buffered). Errors are Flush's; a read error met
// after the bytes went out is returned by the next read. Never use it
// for a command without an answer (COM_STMT_CLOSE): it would wait for
// the deadline.
func (c *Conn) FlushAwait() (bool, error) {
	if c.raw == nil || len(c.wbuf) == 0 || len(c.wbuf) > rawMax || c.w > c.r || c.readErr != nil {
		return false, c.Flush()
	}
	if c.rbuf == nil {
		c.getRead()
	}
	c.r, c.w = 0, 0
	n, awaited, werr, rerr := c.raw.flushAwait(c.wbuf, c.rbuf)
	c.w = n
	c.readErr = rerr
	if cap(c.wbuf) > 4*flushAt {
		c.wbuf = make([]byte, 0, defaultWriteBuf)
	} else {
		c.wbuf = c.wbuf[:0]
	}
	return awaited, werr
}

// ReleaseBig drops a large assembly buffer so an idle connection does not
// keep megabytes alive. With a budget every assembly buffer is dropped and
// its reservation given back (call it when the packet is done with).
func (c *Conn) ReleaseBig() {
	if c.budget != nil {
		c.dropBig()
		return
	}
	if cap(c.big) > 1<<20 {
		c.big = nil
	}
}

// dropBig drops big and gives its reservation back.
func (c *Conn) dropBig() {
	if c.held > 0 {
		c.budget.free(c, c.big, 0)
		c.held = 0
	}
	c.big = nil
}

// SetBudget makes b bound the buffers of this connection's packets that
// do not fit its read buffer (nil: unbounded). Call it between packets.
func (c *Conn) SetBudget(b *Budget) {
	c.dropBig()
	c.big = nil
	c.budget = b
}

// handOver returns the transport with any bytes already buffered in front
// of it, for the switch to TLS: a client may send its TLS ClientHello right
// behind the SSL request, in the same segment.
func (c *Conn) handOver() net.Conn {
	if c.w == c.r {
		return c.nc
	}
	pre := append([]byte(nil), c.rbuf[c.r:c.w]...)
	c.r, c.w = 0, 0
	return &prefixConn{Conn: c.nc, pre: pre}
}

type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// ReadAhead reads whatever the peer sends next into the read buffer (one
// read call), for watching a client while its statement runs elsewhere.
// It must not run concurrently with other reads of c.
func (c *Conn) ReadAhead() error {
	if c.rbuf == nil {
		c.getRead()
	}
	if c.w == len(c.rbuf) {
		// Full to the end: the peer was alive. No compaction here: the
		// session may still use the packet at the front of the buffer.
		return nil
	}
	n, err := c.read(c.rbuf[c.w:])
	c.w += n
	return err
}
