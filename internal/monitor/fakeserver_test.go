package monitor

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// fakeServer speaks enough of the server side of the protocol to answer a
// monitor's checks from a script: it lives at the wire, so the probe's
// connection handling, deadlines and error classification are tested as
// they run against a real server.
type fakeServer struct {
	t  *testing.T
	ln net.Listener

	mu sync.Mutex
	// version is sent in the greeting.
	version string
	// answer returns the reply to a query.
	answer func(q string) reply
	// greetErr, when set, is sent instead of the greeting (as a server at
	// max_connections does).
	greetErr *mysqlproto.SQLError
	// hang makes every connection stop answering (SIGSTOP).
	hang    bool
	hangC   chan struct{}
	conns   map[net.Conn]struct{}
	queries []string
	dials   int
}

// reply is one scripted answer: a result set, an error, or OK.
type reply struct {
	cols []string
	rows [][]string
	err  *mysqlproto.SQLError
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{t: t, ln: ln, version: "5.5.5-10.11.19-MariaDB-log", conns: map[net.Conn]struct{}{},
		hangC: make(chan struct{})}
	f.answer = f.primary
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns[nc] = struct{}{}
			f.dials++
			f.mu.Unlock()
			wg.Go(func() { f.serve(nc) })
		}
	})
	t.Cleanup(func() {
		f.close()
		wg.Wait()
	})
	return f
}

func (f *fakeServer) dialCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials
}

func (f *fakeServer) addr() string { return f.ln.Addr().String() }

// close stops listening and drops every connection: afterwards connections
// are refused.
func (f *fakeServer) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	if f.hang {
		f.hang = false
		close(f.hangC)
	}
	f.mu.Unlock()
}

func (f *fakeServer) setHang(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on && !f.hang {
		f.hangC = make(chan struct{})
	}
	if !on && f.hang {
		close(f.hangC)
	}
	f.hang = on
}

func (f *fakeServer) waitIfHung() {
	f.mu.Lock()
	hang, c := f.hang, f.hangC
	f.mu.Unlock()
	if hang {
		<-c
	}
}

func (f *fakeServer) set(fn func(f *fakeServer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeServer) serve(nc net.Conn) {
	defer func() {
		nc.Close()
		f.mu.Lock()
		delete(f.conns, nc)
		f.mu.Unlock()
	}()
	f.waitIfHung()
	c := mysqlproto.NewConn(nc)
	f.mu.Lock()
	greetErr, version := f.greetErr, f.version
	f.mu.Unlock()
	if greetErr != nil {
		c.Seq = 0
		_ = c.WritePacket(mysqlproto.AppendErr(nil, greetErr))
		_ = c.Flush()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	hello, err := c.Accept(ctx, &mysqlproto.ServerConfig{
		ServerVersion: version,
		Lookup: func(user string) (mysqlproto.Credentials, bool) {
			return mysqlproto.Credentials{Plain: "pw"}, user == "monitor"
		},
	}, 7, "127.0.0.1")
	cancel()
	if err != nil {
		return
	}
	deprecateEOF := hello.Capabilities&mysqlproto.CapabilityClientDeprecateEOF != 0
	for {
		c.Seq = 0
		p, err := c.ReadPacket()
		if err != nil {
			return
		}
		f.waitIfHung()
		switch p[0] {
		case mysqlproto.ComQuit:
			return
		case mysqlproto.ComPing:
			c.Seq = 1
			_ = c.WritePacket(mysqlproto.AppendOK(nil, 0, 0, mysqlproto.ServerStatusAutocommit, 0))
		case mysqlproto.ComQuery:
			q := string(p[1:])
			f.mu.Lock()
			f.queries = append(f.queries, q)
			answer := f.answer
			f.mu.Unlock()
			writeReply(c, answer(q), deprecateEOF)
		default:
			c.Seq = 1
			_ = c.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(1047, "08S01", "Unknown command")))
		}
		if err := c.Flush(); err != nil {
			return
		}
	}
}

func writeReply(c *mysqlproto.Conn, r reply, deprecateEOF bool) {
	c.Seq = 1
	if r.err != nil {
		_ = c.WritePacket(mysqlproto.AppendErr(nil, r.err))
		return
	}
	if r.cols == nil {
		_ = c.WritePacket(mysqlproto.AppendOK(nil, 0, 0, mysqlproto.ServerStatusAutocommit, 0))
		return
	}
	// "NULL" stands for SQL NULL in the scripts.
	rows := make([][]string, len(r.rows))
	for i, row := range r.rows {
		rows[i] = make([]string, len(row))
		for j, v := range row {
			if v == "NULL" {
				v = mysqlproto.NullCell
			}
			rows[i][j] = v
		}
	}
	_ = mysqlproto.WriteTextResult(c, r.cols, rows, mysqlproto.ServerStatusAutocommit, deprecateEOF)
}

// Scripts.

// serverVars answers the check's variables SELECT with values by name.
func serverVars(q string, vals map[string]string) reply {
	list := strings.TrimPrefix(q, "SELECT ")
	var cols []string
	var row []string
	for _, v := range strings.Split(list, ", ") {
		name := strings.TrimPrefix(v, "@@global.")
		cols = append(cols, v)
		val, ok := vals[name]
		if !ok {
			val = ""
		}
		row = append(row, val)
	}
	return reply{cols: cols, rows: [][]string{row}}
}

func statusRows(vals map[string]string) reply {
	r := reply{cols: []string{"Variable_name", "Value"}}
	for k, v := range vals {
		r.rows = append(r.rows, []string{k, v})
	}
	return r
}

func defaultVars(readOnly string) map[string]string {
	return map[string]string{"version": "10.11.19-MariaDB-log", "server_id": "1", "read_only": readOnly,
		"max_connections": "151", "gtid_current_pos": "0-1-42", "gtid_binlog_pos": "0-1-42", "gtid_slave_pos": ""}
}

func defaultStatus() map[string]string {
	return map[string]string{"Threads_connected": "3", "Connection_errors_max_connections": "0",
		"Rpl_semi_sync_master_status": "OFF", "Rpl_semi_sync_master_clients": "0", "Rpl_semi_sync_slave_status": "OFF"}
}

var replicaCols = []string{"Slave_IO_State", "Master_Host", "Master_Port", "Slave_IO_Running", "Slave_SQL_Running",
	"Seconds_Behind_Master", "Last_IO_Errno", "Last_IO_Error", "Last_SQL_Errno", "Last_SQL_Error", "Using_Gtid", "Gtid_IO_Pos", "SQL_Delay"}

func replicaRow(io, sql, lag string) []string {
	return []string{"Waiting for master to send event", "127.0.0.1", "3306", io, sql, lag, "0", "", "0", "", "Slave_Pos", "0-1-42", "0"}
}

// primary is a writable MariaDB server without replication.
func (f *fakeServer) primary(q string) reply {
	switch {
	case strings.HasPrefix(q, "SELECT @@global."):
		return serverVars(q, defaultVars("0"))
	case strings.HasPrefix(q, "SHOW GLOBAL STATUS"):
		return statusRows(defaultStatus())
	case strings.HasPrefix(q, "SHOW SLAVE STATUS"), strings.HasPrefix(q, "SHOW REPLICA STATUS"):
		return reply{cols: replicaCols}
	}
	return reply{err: mysqlproto.NewError(1064, "42000", "unexpected query %q", q)}
}

// replica is a read-only MariaDB replica with the given lag.
func replicaScript(io, sql, lag string) func(q string) reply {
	return func(q string) reply {
		switch {
		case strings.HasPrefix(q, "SELECT @@global."):
			v := defaultVars("1")
			v["server_id"] = "2"
			v["gtid_slave_pos"] = "0-1-42"
			return serverVars(q, v)
		case strings.HasPrefix(q, "SHOW GLOBAL STATUS"):
			return statusRows(defaultStatus())
		case strings.HasPrefix(q, "SHOW SLAVE STATUS"):
			return reply{cols: replicaCols, rows: [][]string{replicaRow(io, sql, lag)}}
		}
		return reply{err: mysqlproto.NewError(1064, "42000", "unexpected query %q", q)}
	}
}
