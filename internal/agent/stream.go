package agent

import (
	"errors"
	"io"
	"syscall"
)

// streamBlock is the size a backup stream moves in at every hop (the
// donor's pipe from mariadb-backup, both HTTP bodies, Vigil's relay, the
// target's pipe into mbstream): memory per stream and hop is fixed
// whatever the peer sends.
//
// Why whole blocks and not io.Copy: a TLS read returns one record (16
// KiB) and a pipe read at most 64 KiB, so a plain copy wrote the stream
// in pieces that size. In Vigil's relay every piece was a goroutine
// handoff through the pipe and an HTTP chunk of its own, which the
// transport flushes after each chunk — three TLS records and syscalls
// per 16 KiB (a 4 KiB buffer's worth, the rest, the chunk's CRLF), each
// decrypted again on the target. Filling a block first makes that one
// chunk per MiB.
const streamBlock = 1 << 20

// copyBlocks copies src to dst in writes of a whole buffer: it fills buf
// before every write, except for the last, short one before src ends.
// The count is of the bytes dst took; a read error other than EOF is
// returned after what was read before it is written.
func copyBlocks(dst io.Writer, src io.Reader, buf []byte) (int64, error) {
	var written int64
	for {
		n, rerr := io.ReadFull(src, buf)
		if n > 0 {
			m, werr := dst.Write(buf[:n])
			written += int64(m)
			if werr != nil {
				return written, werr
			}
			if m != n {
				return written, io.ErrShortWrite
			}
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			return written, nil
		default:
			return written, rerr
		}
	}
}

// blockReader hands its reader to an io.Copy (the HTTP transport's
// request body copy) in whole blocks: as an io.WriterTo it chooses the
// write size, where io.Copy's own 32 KiB buffer would make every 32 KiB
// a flushed chunk.
type blockReader struct{ r io.Reader }

func (b blockReader) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b blockReader) WriteTo(w io.Writer) (int64, error) {
	return copyBlocks(w, b.r, make([]byte, streamBlock))
}

// growPipe asks the kernel for a pipe buffer of a block (Linux,
// F_SETPIPE_SZ), so the program at the other end (mariadb-backup
// writing, mbstream reading) keeps working while a block goes through
// TLS instead of stopping after the default 64 KiB. Best effort: a
// refused size (above /proc/sys/fs/pipe-max-size for an unprivileged
// agent) leaves the default.
func growPipe(f any) {
	// StdinPipe's writer is not an *os.File but embeds one.
	pf, ok := f.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return
	}
	const fSetPipeSz = 1031 // F_SETPIPE_SZ, linux/fcntl.h
	rc, err := pf.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, streamBlock)
	})
}
