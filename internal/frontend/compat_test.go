package frontend

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/topology"
)

// mariaBackend is a scripted MariaDB at the wire for protocol
// compatibility tests: it offers MariaDB's extended capabilities (when
// ext is set), records what each connection negotiated, answers Vigil's
// connection set-up, and answers "SELECT j" with one JSON column whose
// definition carries MariaDB's extended type info when the connection
// negotiated MARIADB_CLIENT_EXTENDED_METADATA.
type mariaBackend struct {
	ln  net.Listener
	ext uint32
	wg  sync.WaitGroup

	mu     sync.Mutex
	hellos []mysqlproto.Hello
	conns  []net.Conn
}

func newMariaBackend(t *testing.T, ext uint32) *mariaBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &mariaBackend{ln: ln, ext: ext}
	b.wg.Go(func() {
		for id := uint32(1); ; id++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, nc)
			b.mu.Unlock()
			b.wg.Go(func() { b.serve(id, nc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *mariaBackend) negotiated() []mysqlproto.Hello {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]mysqlproto.Hello(nil), b.hellos...)
}

// jsonColumn is the column definition of a JSON column, with the extended
// type info MariaDB adds (format=json) when ext is set.
func jsonColumn(ext bool) []byte {
	var d []byte
	for _, s := range []string{"def", "db", "t", "t", "j", "j"} {
		d = mysqlproto.AppendLenEncString(d, []byte(s))
	}
	if ext {
		info := mysqlproto.AppendLenEncString([]byte{1}, []byte("json")) // 1: format
		d = mysqlproto.AppendLenEncString(d, info)
	}
	// Fixed fields: length, charset utf8mb4_bin (46), max length, BLOB, flags, decimals, filler.
	return append(d, 0x0c, 46, 0, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x90, 0, 0, 0, 0)
}

func (b *mariaBackend) serve(id uint32, nc net.Conn) {
	defer nc.Close()
	c := mysqlproto.NewConn(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	hello, err := c.Accept(ctx, &mysqlproto.ServerConfig{ServerVersion: "5.5.5-10.11.19-MariaDB-fake", MariaDBCaps: b.ext,
		Lookup: func(string) (mysqlproto.Credentials, bool) { return mysqlproto.Credentials{Plain: "pw"}, true }}, id, "127.0.0.1")
	cancel()
	if err != nil {
		return
	}
	b.mu.Lock()
	b.hellos = append(b.hellos, *hello)
	b.mu.Unlock()
	deprecateEOF := hello.Capabilities&mysqlproto.CapabilityClientDeprecateEOF != 0
	ok := func(status uint16) []byte { return mysqlproto.AppendOK(nil, 0, 0, status, 0) }
	for {
		c.Seq = 0
		p, err := c.ReadPacket()
		if err != nil || p[0] == mysqlproto.ComQuit {
			return
		}
		c.Seq = 1
		q := string(p[1:])
		switch {
		case p[0] != mysqlproto.ComQuery:
			_ = c.WritePacket(ok(mysqlproto.ServerStatusAutocommit))
		case strings.HasPrefix(q, "SET SESSION session_track"):
			_ = c.WritePacket(ok(mysqlproto.ServerStatusAutocommit | mysqlproto.ServerMoreResultsExists))
			_ = mysqlproto.WriteTextResult(c, []string{"a", "b", "c", "d"}, [][]string{{"utf8mb4", "utf8mb4", "utf8mb4", "utf8mb4_general_ci"}},
				mysqlproto.ServerStatusAutocommit, deprecateEOF)
		case q == "SELECT j":
			_ = c.WritePacket([]byte{1})
			_ = c.WritePacket(jsonColumn(hello.MariaDBCaps&mysqlproto.MariaDBClientExtendedMetadata != 0))
			if !deprecateEOF {
				_ = c.WritePacket(mysqlproto.AppendEOF(nil, mysqlproto.ServerStatusAutocommit, 0))
			}
			_ = c.WritePacket(mysqlproto.AppendLenEncString(nil, []byte("{}")))
			if deprecateEOF {
				p := ok(mysqlproto.ServerStatusAutocommit)
				p[0] = mysqlproto.EOFPacket
				_ = c.WritePacket(p)
			} else {
				_ = c.WritePacket(mysqlproto.AppendEOF(nil, mysqlproto.ServerStatusAutocommit, 0))
			}
		case strings.HasPrefix(q, "SELECT '"):
			v := strings.TrimSuffix(strings.TrimPrefix(q, "SELECT '"), "'")
			_ = mysqlproto.WriteTextResult(c, []string{"v"}, [][]string{{v}}, mysqlproto.ServerStatusAutocommit, deprecateEOF)
		default:
			_ = c.WritePacket(ok(mysqlproto.ServerStatusAutocommit))
		}
		if c.Flush() != nil {
			return
		}
	}
}

// compatProxy serves one scripted MariaDB through Vigil with the given
// extended capabilities offered to clients; users app/secret and
// other/pw2.
func compatProxy(t *testing.T, be *mariaBackend, offer uint32) (*Server, string) {
	t.Helper()
	addr := be.ln.Addr().String()
	topo := &topology.Holder{}
	topo.Publish(&topology.Snapshot{Cluster: "c1", Type: "replication", Writer: 0, Term: 1,
		Servers: []topology.Server{{Name: "fake1", Addr: addr, Weight: 1, Role: topology.RolePrimary, State: topology.Online, Readable: true, Writable: true}}})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := backend.NewPool("fake1", addr, 0, backend.Options{MaxOpen: 10,
		Credentials: func(u string) (string, string, bool) { return u, "pw", true }}, log)
	srv := New(Options{Cluster: "c1", ServerVersion: "5.5.5-10.11.19-MariaDB-vigil", ReadsOnPrimary: true, MariaDBCaps: offer, ConnectTimeout: time.Second},
		[]User{{Name: "app", Cred: mysqlproto.Credentials{Plain: "secret"}, RYW: router.RYWNone, Multiplexing: true},
			{Name: "other", Cred: mysqlproto.Credentials{Plain: "pw2"}, RYW: router.RYWNone, Multiplexing: true}},
		topo, []*backend.Pool{pool}, log)
	return srv, serveTest(t, srv, pool)
}

// query sends a text query and returns the reply's packets up to the end
// of the result set (or the OK/ERR).
func query(t *testing.T, c *mysqlproto.Conn, deprecateEOF bool, q string) [][]byte {
	t.Helper()
	c.Seq = 0
	if err := c.WritePacket(append([]byte{mysqlproto.ComQuery}, q...)); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	eofs := 0
	for {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, append([]byte(nil), p...))
		if len(out) == 1 && (p[0] == mysqlproto.OKPacket || p[0] == mysqlproto.ErrPacket) {
			return out
		}
		if p[0] == mysqlproto.ErrPacket {
			return out
		}
		if p[0] == mysqlproto.EOFPacket && len(p) < 9 {
			eofs++
			if deprecateEOF || eofs == 2 {
				return out
			}
		}
	}
}

// TestMariaDBExtendedMetadata: with MariaDB servers, Vigil offers
// MARIADB_CLIENT_EXTENDED_METADATA; a client that takes it gets the
// extended type info (format=json) over a server connection opened with
// it, a client that does not gets plain column definitions over one
// opened without it, and the two never share a connection. With a MySQL
// or mixed cluster (nothing offered) the greeting is MySQL's.
func TestMariaDBExtendedMetadata(t *testing.T) {
	const ext = mysqlproto.MariaDBClientExtendedMetadata
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	be := newMariaBackend(t, ext|mysqlproto.MariaDBClientProgress|mysqlproto.MariaDBClientCacheMetadata)
	_, addr := compatProxy(t, be, ext)

	with, g, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr, User: "app", Password: "secret",
		Flavour: mysqlproto.Flavour(mysqlproto.CapabilityClientDeprecateEOF, ext)})
	if err != nil {
		t.Fatal(err)
	}
	defer with.Close()
	if g.MariaDBCaps != ext {
		t.Fatalf("Vigil's greeting offered extended capabilities %#x, want %#x", g.MariaDBCaps, ext)
	}
	without, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr, User: "app", Password: "secret",
		Flavour: mysqlproto.Flavour(mysqlproto.CapabilityClientDeprecateEOF, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close()
	for range 2 { // the second time on pooled connections
		if got := query(t, with, true, "SELECT j"); len(got) < 2 || !bytes.Equal(got[1], jsonColumn(true)) {
			t.Fatalf("client with extended metadata got column definition %q, want %q", got[1], jsonColumn(true))
		}
		if got := query(t, without, true, "SELECT j"); len(got) < 2 || !bytes.Equal(got[1], jsonColumn(false)) {
			t.Fatalf("client without extended metadata got column definition %q, want %q", got[1], jsonColumn(false))
		}
	}
	var withExt, withoutExt int
	for _, h := range be.negotiated() {
		switch h.MariaDBCaps {
		case ext:
			withExt++
		case 0:
			withoutExt++
		default:
			t.Errorf("a server connection negotiated extended capabilities %#x: Vigil must ask only for extended metadata", h.MariaDBCaps)
		}
	}
	if withExt != 1 || withoutExt != 1 {
		t.Fatalf("server connections with extended metadata %d, without %d; want 1 and 1", withExt, withoutExt)
	}

	// Nothing offered (a MySQL or mixed cluster): a MySQL greeting, and
	// no extended capabilities whatever the client asks.
	be2 := newMariaBackend(t, ext)
	_, addr2 := compatProxy(t, be2, 0)
	c, g, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr2, User: "app", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if g.Capabilities&mysqlproto.CapabilityClientLongPassword == 0 || g.MariaDBCaps != 0 {
		t.Fatalf("greeting with nothing offered: caps %#x, extended %#x", g.Capabilities, g.MariaDBCaps)
	}
	if got := query(t, c, false, "SELECT j"); !bytes.Equal(got[1], jsonColumn(false)) {
		t.Fatalf("column definition %q", got[1])
	}

	// A server that lacks the capability (it came back as something
	// else) is refused for such clients, never used in another shape.
	be3 := newMariaBackend(t, 0)
	_, addr3 := compatProxy(t, be3, ext)
	c3, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr3, User: "app", Password: "secret",
		Flavour: mysqlproto.Flavour(mysqlproto.CapabilityClientDeprecateEOF, ext)})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	got := query(t, c3, true, "INSERT INTO t VALUES (1)")
	if got[0][0] != mysqlproto.ErrPacket || !strings.Contains(string(got[0]), "does not offer the MariaDB extended capabilities") {
		t.Fatalf("statement on a server without extended metadata: %q", got[0])
	}
	if got := query(t, c3, true, "SELECT j"); got[0][0] != mysqlproto.ErrPacket {
		t.Fatalf("read on a server without extended metadata: %q", got[0])
	}
}
