//go:build linux && !race && !msan && !asan

package mysqlproto

import (
	"bytes"
	"errors"
	"io"
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
