// Package backend owns Vigil's connections to servers: per-server pools
// (min idle, max open, idle timeout, max lifetime, validation on checkout),
// the replayable session state each connection carries, prepared statements
// cached per connection, and the small text-protocol client Vigil uses for
// its own statements (state replay, GTID waits, kills).
package backend

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// Conn is one connection to a server. A Conn is used by one goroutine at a
// time: the pool hands it to a session, which gives it back.
type Conn struct {
	*mysqlproto.Conn

	pool   *Pool
	key    Key
	ID     uint32 // the server's connection id (for KILL)
	Server string // server name
	Index  int    // server index in the cluster

	created  time.Time
	lastUsed time.Time

	// State is the connection's session state as the server reported it.
	State State
	// Base holds character-set variables as the handshake set them.
	Base map[string]string

	// stmts maps statement text to the server's statement for it.
	stmts map[string]*ServerStmt

	// Broken connections are closed instead of pooled.
	Broken bool
	// SessionTrack: CLIENT_SESSION_TRACK was negotiated.
	SessionTrack bool
	DeprecateEOF bool
	// MySQL: the server is MySQL (or Percona Server), not MariaDB.
	MySQL bool
}

// ServerStmt is a statement prepared on one server connection.
type ServerStmt struct {
	ID      uint32
	Params  uint16
	Columns uint16
	// LastTypes are the parameter types the server holds for this
	// statement (from the last execute that sent them).
	LastTypes []byte
}

// maxStmtsPerConn bounds prepared statements kept per server connection.
const maxStmtsPerConn = 256

// Stmt returns the statement prepared for text on this connection.
func (c *Conn) Stmt(text string) *ServerStmt { return c.stmts[text] }

// AddStmt remembers a prepared statement; when the cache is full it returns
// the id of one to close (0 for none).
func (c *Conn) AddStmt(text string, s *ServerStmt) (evict uint32) {
	if c.stmts == nil {
		c.stmts = make(map[string]*ServerStmt)
	}
	if len(c.stmts) >= maxStmtsPerConn {
		for k, v := range c.stmts {
			delete(c.stmts, k)
			evict = v.ID
			break
		}
	}
	c.stmts[text] = s
	return evict
}

// DropStmt forgets a statement.
func (c *Conn) DropStmt(text string) { delete(c.stmts, text) }

// ClearStmts forgets every statement (after COM_RESET_CONNECTION).
func (c *Conn) ClearStmts() { clear(c.stmts) }

// Key is what a pooled connection must match to serve a session.
type Key struct {
	User      string
	Flavour   uint32 // mysqlproto.FlavourCapabilities bits
	Collation byte
}

// Result is what Exec returns for Vigil's own statements.
type Result struct {
	Rows [][]string
}

// Exec runs sql (text protocol, possibly several statements) and returns
// the rows of the last result set. Session changes reported by the server
// are applied to c.State. A server error is returned as *mysqlproto.SQLError
// and leaves the connection usable; any other error marks it broken.
func (c *Conn) Exec(ctx context.Context, sql string) (*Result, error) {
	_, rows, err := c.ExecColumns(ctx, sql)
	if err != nil {
		return nil, err
	}
	return &Result{Rows: rows}, nil
}

// ApplyOK records the session changes an OK packet reports.
func (c *Conn) ApplyOK(ok *mysqlproto.OK) {
	if len(ok.SessionState) == 0 {
		return
	}
	_ = mysqlproto.EachSessionChange(ok.SessionState, func(ch mysqlproto.SessionChange) {
		switch ch.Type {
		case mysqlproto.SessionTrackSystemVariables:
			name := strings.ToLower(string(ch.Name))
			if !Untracked(name) {
				c.State.Set(name, string(ch.Value))
			}
		case mysqlproto.SessionTrackSchema:
			c.State.SetSchema(string(ch.Name))
		}
	})
}

// command sends a one-packet command whose reply is OK or ERR, records
// the session changes the OK reports, and returns a server error as
// *mysqlproto.SQLError (the connection stays usable) or an I/O error (the
// connection is marked broken).
func (c *Conn) command(ctx context.Context, payload []byte) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	c.Seq = 0
	if err := c.WritePacket(payload); err != nil {
		c.Broken = true
		return err
	}
	if err := c.Flush(); err != nil {
		c.Broken = true
		return err
	}
	p, err := c.ReadPacket()
	if err != nil {
		c.Broken = true
		return err
	}
	if p[0] != mysqlproto.OKPacket {
		return mysqlproto.ParseErr(p)
	}
	ok, _ := mysqlproto.ParseOK(p, c.SessionTrack)
	c.ApplyOK(&ok)
	return nil
}

// Ping checks the connection with COM_PING.
func (c *Conn) Ping(ctx context.Context) error {
	return c.command(ctx, []byte{mysqlproto.ComPing})
}

// InitDB changes the default schema with COM_INIT_DB.
func (c *Conn) InitDB(ctx context.Context, db string) error {
	if err := c.command(ctx, append([]byte{mysqlproto.ComInitDB}, db...)); err != nil {
		return err
	}
	c.State.SetSchema(db)
	return nil
}

// Sync makes the connection's session state satisfy want: schema by
// COM_INIT_DB, variables by one SET statement.
func (c *Conn) Sync(ctx context.Context, want *State) error {
	if c.State.Satisfies(want) {
		return nil
	}
	if q := ReplaySQL(&c.State, want, c.Base); q != "" {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("restoring session state on %s (%s): %w", c.Server, q, err)
		}
		// Record exactly what was asked, whatever the server echoed.
		schema := c.State.Schema
		c.State = want.Clone()
		c.State.Schema = schema
	}
	if want.Schema != "" && c.State.Schema != want.Schema {
		if err := c.InitDB(ctx, want.Schema); err != nil {
			return fmt.Errorf("restoring default schema on %s: %w", c.Server, err)
		}
	}
	return nil
}

// ResetConnection sends COM_RESET_CONNECTION: the server rolls back, drops
// temporary tables, locks, user variables and prepared statements. The
// connection's recorded state is reset to match.
func (c *Conn) ResetConnection(ctx context.Context) error {
	if err := c.command(ctx, []byte{mysqlproto.ComResetConnection}); err != nil {
		return err
	}
	c.ClearStmts()
	c.State.Reset(c.State.Schema)
	return nil
}
