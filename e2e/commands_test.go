package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// rawClient speaks the protocol directly, for commands drivers rarely send.
type rawClient struct {
	t *testing.T
	c *mysqlproto.Conn
}

func dialRaw(t *testing.T, addr, db string) *rawClient {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr, User: "app", Password: "app", DB: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, c: c}
}

// send writes one command and returns every packet of the reply, up to
// and including the final OK/EOF/ERR (classic EOF protocol: the client
// did not ask for CLIENT_DEPRECATE_EOF).
func (r *rawClient) send(cmd []byte, eofs int) [][]byte {
	r.t.Helper()
	r.c.Seq = 0
	if err := r.c.WritePacket(cmd); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.Flush(); err != nil {
		r.t.Fatal(err)
	}
	_ = r.c.SetDeadline(time.Now().Add(10 * time.Second))
	defer r.c.SetDeadline(time.Time{})
	var out [][]byte
	for {
		p, err := r.c.ReadPacket()
		if err != nil {
			r.t.Fatalf("reply to 0x%02x: %v", cmd[0], err)
		}
		out = append(out, append([]byte(nil), p...))
		switch {
		case p[0] == mysqlproto.ErrPacket:
			return out
		case p[0] == mysqlproto.OKPacket && eofs == 0:
			return out
		case mysqlproto.IsEOF(p):
			eofs--
			if eofs <= 0 {
				return out
			}
		case eofs < 0:
			return out // a single packet reply
		}
	}
}

func query(q string) []byte { return append([]byte{mysqlproto.ComQuery}, q...) }

func TestProtocolCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newProxyEnv(t)
	r := dialRaw(t, env.addr, "vigil_test")
	mustExec(t, openDB(t, env.dsn("")), "CREATE TABLE IF NOT EXISTS fl (a INT, b VARCHAR(10))")
	// COM_FIELD_LIST is a read: wait until the replicas have the table.
	Eventually(t, 10*time.Second, "table fl on the replicas", func() error {
		for _, n := range []string{"node2", "node3"} {
			rows, err := env.sb.SQL(context.Background(), n, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='vigil_test' AND TABLE_NAME='fl'")
			if err != nil || len(rows) != 1 || rows[0][0] != "1" {
				return fmt.Errorf("%s: %v %v", n, rows, err)
			}
		}
		return nil
	})

	// COM_PING
	if p := r.send([]byte{mysqlproto.ComPing}, 0); p[0][0] != mysqlproto.OKPacket {
		t.Fatalf("COM_PING: %x", p[0])
	}
	// COM_STATISTICS: one text packet.
	if p := r.send([]byte{mysqlproto.ComStatistics}, -1); len(p) != 1 || len(p[0]) < 10 {
		t.Fatalf("COM_STATISTICS: %q", p)
	}
	// COM_FIELD_LIST: column definitions then EOF.
	p := r.send(append(append([]byte{mysqlproto.ComFieldList}, "fl"...), 0), 1)
	if len(p) != 3 || !mysqlproto.IsEOF(p[2]) {
		t.Fatalf("COM_FIELD_LIST: %d packets", len(p))
	}
	// COM_INIT_DB to an unknown schema: the server's error passes through.
	p = r.send(append([]byte{mysqlproto.ComInitDB}, "no_such_db"...), 0)
	if p[0][0] != mysqlproto.ErrPacket || mysqlproto.ParseErr(p[0]).Code != 1049 {
		t.Fatalf("COM_INIT_DB unknown: %x", p[0])
	}
	// A user variable, then COM_RESET_CONNECTION clears it.
	r.send(query("SET @x = 42"), 0)
	p = r.send(query("SELECT @x"), 2)
	if string(p[len(p)-2][1:]) != "42" {
		t.Fatalf("SELECT @x before reset: %q", p)
	}
	if p := r.send([]byte{mysqlproto.ComResetConnection}, 0); p[0][0] != mysqlproto.OKPacket {
		t.Fatalf("COM_RESET_CONNECTION: %x", p[0])
	}
	p = r.send(query("SELECT @x IS NULL"), 2)
	if string(p[len(p)-2][1:]) != "1" {
		t.Fatalf("user variable survived COM_RESET_CONNECTION: %q", p)
	}
	// The schema survives the reset (as on a server).
	p = r.send(query("SELECT DATABASE()"), 2)
	if string(p[len(p)-2][1:]) != "vigil_test" {
		t.Fatalf("schema after reset: %q", p)
	}
	// This client asked for multi-statements in its handshake; turn them
	// off, and they are refused, then on again.
	if p := r.send([]byte{mysqlproto.ComSetOption, mysqlproto.SetOptionMultiStatementsOff, 0}, -1); !mysqlproto.IsEOF(p[0]) {
		t.Fatalf("COM_SET_OPTION off: %x", p[0])
	}
	p = r.send(query("SELECT 1; SELECT 2"), 2)
	if p[0][0] != mysqlproto.ErrPacket {
		t.Fatalf("multi-statement without the option: %x", p[0])
	}
	if p := r.send([]byte{mysqlproto.ComSetOption, mysqlproto.SetOptionMultiStatementsOn, 0}, -1); !mysqlproto.IsEOF(p[0]) {
		t.Fatalf("COM_SET_OPTION: %x", p[0])
	}
	p = r.send(query("SELECT 1; SELECT 2"), 2) // first result set only ...
	if p[0][0] == mysqlproto.ErrPacket {
		t.Fatalf("multi-statement with the option: %s", mysqlproto.ParseErr(p[0]))
	}
	// ... the second result set follows.
	var rest [][]byte
	for eofs := 0; eofs < 2; {
		q, err := r.c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, append([]byte(nil), q...))
		if mysqlproto.IsEOF(q) {
			eofs++
		}
	}
	if string(rest[len(rest)-2][1:]) != "2" {
		t.Fatalf("second result set: %q", rest)
	}
	// Unknown prepared statement id.
	p = r.send([]byte{mysqlproto.ComStmtExecute, 99, 0, 0, 0, 0, 1, 0, 0, 0}, 0)
	if p[0][0] != mysqlproto.ErrPacket || mysqlproto.ParseErr(p[0]).Code != 1243 {
		t.Fatalf("execute of an unknown statement: %x", p[0])
	}
	// An unsupported command gets a clear error, and the session goes on.
	p = r.send([]byte{mysqlproto.ComBinlogDump, 0, 0, 0, 0}, 0)
	if p[0][0] != mysqlproto.ErrPacket {
		t.Fatalf("COM_BINLOG_DUMP: %x", p[0])
	}
	if p := r.send([]byte{mysqlproto.ComPing}, 0); p[0][0] != mysqlproto.OKPacket {
		t.Fatalf("COM_PING after errors: %x", p[0])
	}
}
