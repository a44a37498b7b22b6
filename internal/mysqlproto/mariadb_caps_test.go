package mysqlproto

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
)

// TestMariaDBCapsOnTheWire: MariaDB's extended capabilities travel in the
// last 4 bytes of the greeting's and the handshake response's filler, and
// only when CLIENT_MYSQL (bit 0) is clear.
func TestMariaDBCapsOnTheWire(t *testing.T) {
	const ext = MariaDBClientExtendedMetadata | MariaDBClientProgress
	g := &Greeting{ServerVersion: "5.5.5-10.11.19-MariaDB", ConnectionID: 7, Capabilities: ServerCapabilities &^ CapabilityClientLongPassword,
		Collation: 45, Nonce: NewNonce(), Plugin: AuthNativePassword, MariaDBCaps: ext}
	p := AppendGreeting(nil, g)
	// protocol, version NUL, id, 8 nonce bytes, NUL, caps, collation,
	// status, caps high, auth length, then the 10-byte filler.
	filler := 1 + len(g.ServerVersion) + 1 + 4 + 8 + 1 + 2 + 1 + 2 + 2 + 1
	if got := binary.LittleEndian.Uint32(p[filler+6:]); got != ext {
		t.Fatalf("greeting filler carries %#x, want %#x", got, ext)
	}
	back, err := ParseGreeting(p)
	if err != nil || back.MariaDBCaps != ext || !bytes.Equal(back.Nonce, g.Nonce) || back.Plugin != AuthNativePassword {
		t.Fatalf("parse: %v %+v", err, back)
	}
	g.Capabilities |= CapabilityClientLongPassword // MySQL: no extended capabilities
	if back, _ := ParseGreeting(AppendGreeting(nil, g)); back.MariaDBCaps != 0 {
		t.Fatalf("a greeting with CLIENT_MYSQL set carries extended capabilities %#x", back.MariaDBCaps)
	}

	r := &HandshakeResponse{Capabilities: ServerCapabilities &^ CapabilityClientLongPassword, MaxPacket: 1 << 24, Collation: 45,
		User: "app", AuthResponse: []byte("01234567890123456789"), Plugin: AuthNativePassword, MariaDBCaps: ext}
	p = AppendHandshakeResponse(nil, r)
	if got := binary.LittleEndian.Uint32(p[28:]); got != ext {
		t.Fatalf("response filler carries %#x, want %#x", got, ext)
	}
	if back, err := ParseHandshakeResponse(p); err != nil || back.MariaDBCaps != ext || back.User != "app" {
		t.Fatalf("parse response: %v %+v", err, back)
	}
	r.Capabilities |= CapabilityClientLongPassword
	if back, _ := ParseHandshakeResponse(AppendHandshakeResponse(nil, r)); back.MariaDBCaps != 0 {
		t.Fatalf("a response with CLIENT_MYSQL set carries extended capabilities %#x", back.MariaDBCaps)
	}
}

// acceptOnce serves one Accept on a fresh listener and returns its address
// and the channel of its result.
func acceptOnce(t *testing.T, cfg *ServerConfig) (string, chan *Hello) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan *Hello, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			out <- nil
			return
		}
		t.Cleanup(func() { nc.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h, err := NewConn(nc).Accept(ctx, cfg, 1, "127.0.0.1")
		if err != nil {
			h = nil
		}
		out <- h
	}()
	return ln.Addr().String(), out
}

// TestNegotiateMariaDBCaps: Vigil offers only the extended capabilities
// it handles, a client gets them only if it asks, and a server connection
// is opened with exactly the client's, or refused.
func TestNegotiateMariaDBCaps(t *testing.T) {
	lookup := func(string) (Credentials, bool) { return Credentials{Plain: "pw"}, true }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	all := MariaDBClientProgress | MariaDBClientComMulti | MariaDBClientStmtBulkOperations | MariaDBClientExtendedMetadata | MariaDBClientCacheMetadata
	for _, tc := range []struct {
		name     string
		offer    uint32 // server's MariaDBCaps
		flavour  uint64 // client's
		wantCaps uint32 // in Hello
		wantErr  string
	}{
		{"client asks", all, Flavour(CapabilityClientDeprecateEOF, MariaDBClientExtendedMetadata), MariaDBClientExtendedMetadata, ""},
		{"client does not ask", all, Flavour(CapabilityClientDeprecateEOF, 0), 0, ""},
		{"mysql server", 0, Flavour(0, MariaDBClientExtendedMetadata), 0, "does not offer the MariaDB extended capabilities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, hello := acceptOnce(t, &ServerConfig{ServerVersion: "5.5.5-10.11.19-MariaDB", Lookup: lookup, MariaDBCaps: tc.offer})
			c, g, err := Dial(ctx, &DialConfig{Addr: addr, User: "app", Password: "pw", Flavour: tc.flavour})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("dial: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h := <-hello
			if h == nil {
				t.Fatal("accept failed")
			}
			if h.MariaDBCaps != tc.wantCaps || g.MariaDBCaps != tc.wantCaps {
				t.Fatalf("negotiated %#x (client says %#x), want %#x", h.MariaDBCaps, g.MariaDBCaps, tc.wantCaps)
			}
			if h.Flavour() != tc.flavour {
				t.Fatalf("flavour %#x, want %#x", h.Flavour(), tc.flavour)
			}
		})
	}
	// The greeting offers only what Vigil forwards correctly, and says
	// MariaDB (CLIENT_MYSQL clear) only when it offers something.
	for _, offer := range []uint32{all, 0} {
		a, b := pipe(t)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, _ = b.Accept(ctx, &ServerConfig{ServerVersion: "v", Lookup: lookup, MariaDBCaps: offer}, 1, "x")
		}()
		p, err := a.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		g, err := ParseGreeting(p)
		if err != nil {
			t.Fatal(err)
		}
		wantMySQL := offer == 0
		if g.MariaDBCaps != offer&MariaDBCapabilities || (g.Capabilities&CapabilityClientLongPassword != 0) != wantMySQL {
			t.Fatalf("offer %#x: greeting caps %#x, extended %#x", offer, g.Capabilities, g.MariaDBCaps)
		}
	}
}
