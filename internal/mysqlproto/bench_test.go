package mysqlproto

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// loopConn is an in-memory net.Conn: reads replay data forever, writes
// are discarded. It isolates framing cost from the kernel.
type loopConn struct {
	data []byte
	pos  int
}

func (l *loopConn) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m := copy(b[n:], l.data[l.pos:])
		n += m
		l.pos = (l.pos + m) % len(l.data)
	}
	return n, nil
}
func (l *loopConn) Write(b []byte) (int, error)      { return len(b), nil }
func (l *loopConn) Close() error                     { return nil }
func (l *loopConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (l *loopConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (l *loopConn) SetDeadline(time.Time) error      { return nil }
func (l *loopConn) SetReadDeadline(time.Time) error  { return nil }
func (l *loopConn) SetWriteDeadline(time.Time) error { return nil }

// pointSelectReply is a server's reply to a point select with
// CLIENT_DEPRECATE_EOF: column count, one column definition, one row and
// the OK terminator.
func pointSelectReply() []byte {
	var out []byte
	frame := func(seq byte, p []byte) {
		out = append(out, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq)
		out = append(out, p...)
	}
	frame(1, []byte{1})
	col := AppendLenEncString(nil, []byte("def"))
	for _, s := range []string{"sbtest", "sbtest1", "sbtest1", "c", "c"} {
		col = AppendLenEncString(col, []byte(s))
	}
	col = append(col, 0x0c, 0x21, 0, 0xe0, 1, 0, 0, 0xfe, 0, 0, 0, 0, 0)
	frame(2, col)
	frame(3, AppendLenEncString(nil, make([]byte, 120)))
	ok := AppendOK(nil, 0, 0, ServerStatusAutocommit, 0)
	ok[0] = EOFPacket
	frame(4, ok)
	return out
}

// BenchmarkForwardReply reads a point select's reply frame by frame from
// one connection and queues it on another, as the proxy does: it must not
// allocate.
func BenchmarkForwardReply(b *testing.B) {
	reply := pointSelectReply()
	src := NewConn(&loopConn{data: reply})
	dst := NewConn(&loopConn{data: []byte{0}})
	b.ReportAllocs()
	b.SetBytes(int64(len(reply)))
	for b.Loop() {
		src.Seq = 1
		for range 4 {
			f, err := src.ReadFrame()
			if err != nil {
				b.Fatal(err)
			}
			if err := dst.WriteFrame(f); err != nil {
				b.Fatal(err)
			}
		}
		if err := dst.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseOK is the per-statement status and session-state parse.
func BenchmarkParseOK(b *testing.B) {
	p := AppendOK(nil, 1, 42, ServerStatusAutocommit|ServerSessionStateChanged, 0)
	p = AppendLenEncString(p, nil)
	var st []byte
	st = append(st, SessionTrackSystemVariables)
	st = AppendLenEncString(st, AppendLenEncString(AppendLenEncString(nil, []byte("last_gtid")), []byte("0-1-12345")))
	p = AppendLenEncString(p, st)
	b.ReportAllocs()
	for b.Loop() {
		ok, good := ParseOK(p, true)
		if !good || ok.LastInsertID != 42 {
			b.Fatal("bad OK")
		}
		_ = EachSessionChange(ok.SessionState, func(SessionChange) {})
	}
}

// BenchmarkParseCommands is the per-command decode: a query, and an
// execute with its parameter block and id mapped in place; "offsets" is
// the frontend's former in-place decoding, for comparison.
func BenchmarkParseCommands(b *testing.B) {
	query := AppendQuery(nil, Query{Text: []byte("SELECT c FROM sbtest1 WHERE id = 42")})
	exec := []byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 1, 8, 0, 42, 0, 0, 0, 0, 0, 0, 0}
	var sink int
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			q, bad := ParseQuery(query)
			if bad != nil {
				b.Fatal("bad query")
			}
			e, bad := ParseStmtExecute(exec)
			if bad != nil {
				b.Fatal("bad execute")
			}
			var ps ExecuteParams
			if bad := ps.Parse(e.Params, 1); bad != nil {
				b.Fatal("bad parameters")
			}
			PutStmtID(exec, e.StmtID)
			sink += len(q.Text) + len(ps.Types) + len(ps.Values) + int(e.Flags)
		}
	})
	b.Run("offsets", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			q := query[1:]
			if len(exec) < 10 {
				b.Fatal("bad execute")
			}
			id := binary.LittleEndian.Uint32(exec[1:])
			flags := exec[5]
			params := 1
			boundOff := 10 + (params+7)/8
			if boundOff >= len(exec) {
				b.Fatal("bad execute")
			}
			var types []byte
			typesOff := 0
			if exec[boundOff] == 1 {
				typesOff = boundOff + 1
				if typesOff+2*params > len(exec) {
					b.Fatal("bad execute")
				}
				types = exec[typesOff : typesOff+2*params]
			}
			binary.LittleEndian.PutUint32(exec[1:], id)
			sink += len(q) + len(types) + len(exec[typesOff+2*params:]) + int(flags)
		}
	})
	_ = sink
}
