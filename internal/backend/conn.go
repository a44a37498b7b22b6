// Package backend owns Vigil's connections to servers: per-server pools
// (min idle, max open, idle timeout, max lifetime, validation on checkout),
// the replayable session state each connection carries, prepared statements
// cached per connection, and the small text-protocol client Vigil uses for
// its own statements (state replay, GTID waits, kills).
package backend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	// puts counts the times the connection went back to its pool (guarded
	// by the pool's mutex once it is in the pool; see Pool.Reclaim).
	puts uint64

	// State is the connection's session state as the server reported it.
	State State
	// Base holds character-set variables as the handshake set them.
	Base map[string]string

	// stmts maps what a statement means (text and the session state it
	// was prepared in) to the server's statement for it.
	stmts map[StmtKey]*ServerStmt

	// Broken connections are closed instead of pooled: an I/O error, an
	// error reply that closes the connection (NoteErr), a socket the
	// server closed (ServerClosed).
	Broken bool
	// errSeen: a reply since the connection last went back to the pool
	// was an ERR (NoteErr); Put then looks at the socket for a close that
	// followed it.
	errSeen bool
	// peek looks at the socket for a server-side close (ServerClosed);
	// peekSet: it was made (nil when the transport is not a socket).
	peek    *peeker
	peekSet bool
	// DiagDirty: a statement may have left warnings or an error in the
	// connection's diagnostics area (SHOW WARNINGS would show them).
	DiagDirty bool
	// InsertToken names the last statement that reported an insert id on
	// the connection (see Pool.ReclaimInsert), InsertSession the client
	// session that ran it; 0 when none did since the connection opened.
	// InsertValue is the connection's LAST_INSERT_ID() as Vigil last
	// learned it (an OK packet's insert id, or a query after a statement
	// that sets it unseen).
	InsertToken   uint64
	InsertSession uint32
	InsertValue   uint64
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
	// Warnings the prepare left (its OK packet's warning count).
	Warnings uint16
	// LastTypes are the parameter types the server holds for this
	// statement (from the last execute that sent them).
	LastTypes []byte
}

// StmtKey identifies a prepared statement by what it means, not only by
// its text: the server binds table and column names at prepare time in the
// default schema current then, and sql_mode, character sets and other
// session variables change how the text is parsed. The same text prepared
// under another schema or other variables is another statement.
type StmtKey struct {
	Schema string
	Vars   uint64 // State.Hash of the session variables at prepare time
	Text   string
}

// KeyFor is the key of text prepared in state st.
func KeyFor(st *State, text string) StmtKey {
	return StmtKey{Schema: st.Schema, Vars: st.Hash(), Text: text}
}

// maxStmtsPerConn bounds prepared statements kept per server connection.
const maxStmtsPerConn = 256

// Stmt returns the statement prepared for k on this connection.
func (c *Conn) Stmt(k StmtKey) *ServerStmt { return c.stmts[k] }

// AddStmt remembers a prepared statement; when the cache is full it returns
// the id of one to close (0 for none).
func (c *Conn) AddStmt(k StmtKey, s *ServerStmt) (evict uint32) {
	if c.stmts == nil {
		c.stmts = make(map[StmtKey]*ServerStmt)
	}
	if len(c.stmts) >= maxStmtsPerConn {
		for k, v := range c.stmts {
			delete(c.stmts, k)
			evict = v.ID
			break
		}
	}
	c.stmts[k] = s
	return evict
}

// DropStmt forgets a statement.
func (c *Conn) DropStmt(k StmtKey) { delete(c.stmts, k) }

// ClearStmts forgets every statement (after COM_RESET_CONNECTION).
func (c *Conn) ClearStmts() { clear(c.stmts) }

// Key is what a pooled connection must match to serve a session.
type Key struct {
	User      string
	Flavour   uint64 // mysqlproto.Flavour: capability and MariaDB extended capability bits
	Collation byte
}

// Result is what Exec returns for Vigil's own statements.
type Result struct {
	Rows [][]string
}

// Exec runs sql (text protocol, possibly several statements) and returns
// the rows of the last result set. Session changes reported by the server
// are applied to c.State. A server error is returned as *mysqlproto.SQLError
// and leaves the connection usable, unless it is one that closes the
// connection (ClosesConnection); any other error marks it broken.
func (c *Conn) Exec(ctx context.Context, sql string) (*Result, error) {
	_, rows, err := c.ExecColumns(ctx, sql)
	if err != nil {
		return nil, err
	}
	return &Result{Rows: rows}, nil
}

// NextPut is what Pool.Reclaim must be given to take c back after the
// caller's own Put: the caller reads it while it still holds c.
func (c *Conn) NextPut() uint64 { return c.puts + 1 }

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
			c.State.SetSchemaIn(string(ch.Name), TrackedCharset)
		}
	})
}

// command sends a one-packet command whose reply is OK or ERR, records
// the session changes the OK reports, and returns a server error as
// *mysqlproto.SQLError (the connection stays usable unless the error closes
// it: NoteErr) or an I/O error (the connection is marked broken).
func (c *Conn) command(ctx context.Context, payload []byte) error {
	_, err := c.commandOK(ctx, payload)
	return err
}

// commandOK is command returning the OK packet.
func (c *Conn) commandOK(ctx context.Context, payload []byte) (mysqlproto.OK, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	c.Seq = 0
	if err := c.WritePacket(payload); err != nil {
		c.Broken = true
		return mysqlproto.OK{}, err
	}
	if err := c.Flush(); err != nil {
		c.Broken = true
		return mysqlproto.OK{}, err
	}
	p, err := c.ReadPacket()
	if err != nil {
		c.Broken = true
		return mysqlproto.OK{}, err
	}
	if p[0] != mysqlproto.OKPacket {
		return mysqlproto.OK{}, c.NoteErr(p)
	}
	ok, _ := mysqlproto.ParseOK(p, c.SessionTrack)
	if ok.Warnings > 0 {
		c.DiagDirty = true
	}
	c.ApplyOK(&ok)
	return ok, nil
}

// LastInsertID reads the connection's LAST_INSERT_ID() without a result
// set: it sets last_insert_id to itself, and the session tracker reports
// the value. Unlike a SELECT, that leaves the diagnostics area and the
// row number MariaDB puts in later warnings ("at row 0") as they were.
func (c *Conn) LastInsertID(ctx context.Context) (uint64, error) {
	if !c.SessionTrack {
		return 0, errors.New("session tracking is off on this connection")
	}
	ok, err := c.commandOK(ctx, append([]byte{mysqlproto.ComQuery}, "SET last_insert_id = LAST_INSERT_ID()"...))
	if err != nil {
		return 0, err
	}
	var v uint64
	found := false
	_ = mysqlproto.EachSessionChange(ok.SessionState, func(ch mysqlproto.SessionChange) {
		if ch.Type == mysqlproto.SessionTrackSystemVariables && strings.EqualFold(string(ch.Name), "last_insert_id") {
			v, err = strconv.ParseUint(string(ch.Value), 10, 64)
			found = err == nil
		}
	})
	if !found {
		return 0, errors.New("the server did not report last_insert_id")
	}
	return v, nil
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

// ErrSchemaSet: a connection with a default schema cannot serve a session
// without one (MariaDB cannot unset the default schema); use another.
var ErrSchemaSet = errors.New("the connection has a default schema and the session has none")

// Sync makes the connection's session state satisfy want: schema by
// COM_INIT_DB, variables by one SET statement.
func (c *Conn) Sync(ctx context.Context, want *State) error {
	if c.State.Satisfies(want) {
		return nil
	}
	if want.Schema == "" && c.State.Schema != "" {
		return ErrSchemaSet
	}
	if want.Schema != "" && c.State.Schema != want.Schema {
		// Schema first: COM_INIT_DB reads the name in the connection's
		// character_set_client, and a non-ASCII name is in the character
		// set it was given or reported in (SchemaCharset), which the
		// connection may not have now; the replay below then sets the
		// session's own.
		if cs := want.SchemaCharset; cs != "" && !isASCII(want.Schema) && c.ClientCharset() != cs {
			if _, err := c.Exec(ctx, "SET SESSION character_set_client = "+cs); err != nil {
				return fmt.Errorf("restoring default schema on %s: %w", c.Server, err)
			}
			c.State.Set("character_set_client", cs)
		}
		if err := c.InitDB(ctx, want.Schema); err != nil {
			return fmt.Errorf("restoring default schema on %s: %w", c.Server, err)
		}
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
	return nil
}

// ClientCharset is the connection's character_set_client now.
func (c *Conn) ClientCharset() string { return c.charset("character_set_client") }

// TrackedCharset is the character set of a schema name reported by
// session tracking: the server's system character set (UTF-8), whatever
// the connection's character sets are.
const TrackedCharset = "utf8mb4"

func (c *Conn) charset(name string) string {
	if v, ok := c.State.Get(name); ok {
		return v
	}
	return c.Base[name]
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// ResetConnection sends COM_RESET_CONNECTION: the server rolls back, drops
// temporary tables, locks, user variables and prepared statements. The
// connection's recorded state is reset to match.
func (c *Conn) ResetConnection(ctx context.Context) error {
	if err := c.command(ctx, []byte{mysqlproto.ComResetConnection}); err != nil {
		return err
	}
	c.ClearStmts()
	c.DiagDirty = false
	c.InsertToken, c.InsertSession, c.InsertValue = 0, 0, 0 // LAST_INSERT_ID() is 0 again
	// The reset put every session variable back to its global value,
	// session tracking too: turn on again what Vigil relies on (the
	// character sets are the handshake's again, as in Base).
	if err := c.RestoreTracking(ctx); err != nil {
		c.Broken = true
		return err
	}
	c.State.Reset(c.State.Schema)
	return nil
}
