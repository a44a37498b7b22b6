//go:build linux && !race && !msan && !asan

package mysqlproto

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func TestRawIOPlainSocketsOnly(t *testing.T) {
	a, b := pipe(t)
	if a.raw == nil || b.raw == nil {
		t.Fatal("TCP connections should use raw I/O")
	}
	a.SetNetConn(&prefixConn{Conn: a.nc})
	if a.raw != nil {
		t.Fatal("a wrapped transport (as TLS) must not use raw I/O")
	}
}

// TestIdleRelease: a connection waiting for its peer holds no buffers,
// and takes them again for the next packet and reply; nothing is lost.
func TestIdleRelease(t *testing.T) {
	srv, cl := pipe(t)
	got := make(chan []byte, 1)
	errc := make(chan error, 1)
	go func() {
		p, err := srv.ReadCommand()
		if err != nil {
			errc <- err
			return
		}
		got <- append([]byte(nil), p...)
	}()
	time.Sleep(50 * time.Millisecond)        // the reader finds nothing and waits
	big := bytes.Repeat([]byte("x"), 40<<10) // more than one read buffer
	cl.Seq = 0
	if err := cl.WritePacket(big); err != nil {
		t.Fatal(err)
	}
	if err := cl.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if !bytes.Equal(p, big) {
			t.Fatalf("read %d bytes, want the %d written", len(p), len(big))
		}
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting read never returned")
	}
	if srv.idleReleases == 0 {
		t.Fatal("the waiting read kept its buffers")
	}
	// The reply goes out through a write buffer taken again.
	if err := srv.WritePacket([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	p, err := cl.ReadPacket()
	if err != nil || string(p) != "reply" {
		t.Fatalf("reply %q, %v", p, err)
	}
	// A deadline while waiting without buffers is a timeout, and the
	// connection is still usable afterwards.
	_ = srv.nc.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	srv.Seq = 1
	if _, err := srv.ReadCommand(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	_ = srv.nc.SetReadDeadline(time.Time{})
	// The peer closing is io.EOF.
	cl.Close()
	if _, err := srv.ReadCommand(); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
	srv.Release()
}

// BenchmarkIdleReleaseRoundTrip is one command and its reply over
// loopback with idle release on the serving side: the buffers go back to
// the pool at every wait and come back without allocating.
func BenchmarkIdleReleaseRoundTrip(b *testing.B) {
	srv, cl := pipe(b)
	cmd := []byte{ComQuery, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1'}
	reply := AppendOK(nil, 0, 0, ServerStatusAutocommit, 0)
	b.ReportAllocs()
	for b.Loop() {
		cl.Seq = 0
		if err := cl.WritePacket(cmd); err != nil {
			b.Fatal(err)
		}
		if err := cl.Flush(); err != nil {
			b.Fatal(err)
		}
		srv.Seq = 0
		if _, err := srv.ReadCommand(); err != nil {
			b.Fatal(err)
		}
		if err := srv.WritePacket(reply); err != nil {
			b.Fatal(err)
		}
		if err := srv.Flush(); err != nil {
			b.Fatal(err)
		}
		if _, err := cl.ReadPacket(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFlushAwait: the command goes out, the answer that comes later is
// read into the buffer by the same wait, and the reads after it see the
// answer and then what the peer does next (its close as io.EOF).
func TestFlushAwait(t *testing.T) {
	cl, srv := pipe(t)
	go func() {
		p, err := srv.ReadPacket()
		if err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond) // answers later than any write takes
		srv.Seq = 1
		_ = srv.WritePacket(append([]byte("re:"), p...))
		_ = srv.Flush()
		srv.Close()
	}()
	cl.Seq = 0
	if err := cl.WritePacket([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	awaited, err := cl.FlushAwait()
	if err != nil || !awaited {
		t.Fatalf("FlushAwait = %v, %v; want a wait and no error", awaited, err)
	}
	if cl.Buffered() == 0 {
		t.Fatal("the answer was not read by the wait")
	}
	p, err := cl.ReadPacket()
	if err != nil || string(p) != "re:ping" {
		t.Fatalf("ReadPacket = %q, %v", p, err)
	}
	if _, err := cl.ReadPacket(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the peer closed: %v, want io.EOF", err)
	}
}

// TestFlushAwaitReadError: a read error met by the wait after the write
// went out (the peer closes without answering, or the deadline passes)
// is not the write's: FlushAwait succeeds and the next read returns it.
func TestFlushAwaitReadError(t *testing.T) {
	t.Run("closed", func(t *testing.T) {
		cl, srv := pipe(t)
		go func() {
			if _, err := srv.ReadPacket(); err == nil {
				srv.Close()
			}
		}()
		cl.Seq = 0
		_ = cl.WritePacket([]byte("quit"))
		if _, err := cl.FlushAwait(); err != nil {
			t.Fatalf("FlushAwait: %v, want nil (the write went out)", err)
		}
		if _, err := cl.ReadPacket(); !errors.Is(err, io.EOF) {
			t.Fatalf("ReadPacket: %v, want io.EOF", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		cl, _ := pipe(t)
		_ = cl.SetDeadline(time.Now().Add(50 * time.Millisecond))
		cl.Seq = 0
		_ = cl.WritePacket([]byte("sleep"))
		if _, err := cl.FlushAwait(); err != nil {
			t.Fatalf("FlushAwait: %v, want nil (the write went out)", err)
		}
		if _, err := cl.ReadPacket(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ReadPacket: %v, want the deadline", err)
		}
		// One error per failure: the kept error is not returned twice.
		if cl.readErr != nil {
			t.Fatal("the kept read error was not cleared")
		}
	})
	t.Run("past deadline before the write", func(t *testing.T) {
		cl, _ := pipe(t)
		_ = cl.SetDeadline(time.Now().Add(-time.Second))
		cl.Seq = 0
		_ = cl.WritePacket([]byte("late"))
		if _, err := cl.FlushAwait(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("FlushAwait: %v, want the deadline as a write error", err)
		}
	})
}

// TestFlushAwaitFullSocket: a write larger than the socket takes at once
// is finished by an ordinary wait for writability (the peer reads late),
// and the answer is then read normally.
func TestFlushAwaitFullSocket(t *testing.T) {
	cl, srv := pipe(t)
	// Small socket buffers: the one frame below is more than they hold.
	if err := cl.nc.(*net.TCPConn).SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if err := srv.nc.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("y"), 160<<10)
	done := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		p, err := srv.ReadPacket()
		if err != nil {
			done <- err
			return
		}
		if len(p) != len(big) {
			done <- io.ErrShortWrite
			return
		}
		srv.Seq = 1
		_ = srv.WritePacket([]byte("ok"))
		done <- srv.Flush()
	}()
	cl.Seq = 0
	if err := cl.WritePacket(big); err != nil {
		t.Fatal(err)
	}
	awaited, err := cl.FlushAwait()
	if err != nil {
		t.Fatal(err)
	}
	if awaited {
		t.Fatal("FlushAwait waited for an answer although the socket took only part of the write")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p, err := cl.ReadPacket()
	if err != nil || string(p) != "ok" {
		t.Fatalf("ReadPacket = %q, %v", p, err)
	}
}
