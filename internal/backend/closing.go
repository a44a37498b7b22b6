package backend

import (
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// ClosesConnection reports whether a server error with code means the
// server connection is gone: the server closes the connection after
// sending it (or sent it because the connection already failed). A
// connection that got one must never serve another statement, for this
// client or any other (issue 16: a connection the server closed after 1153
// went back to the pool and the next, unrelated client got 7004).
//
// mysql: the server is MySQL (or Percona Server). Codes from 3000 up are
// not shared between MySQL and MariaDB: 4031 is MySQL's idle-timeout
// notice but MariaDB's "referenced trigger does not exist", an ordinary
// statement error.
//
// Not in the list, on purpose: 1317 ER_QUERY_INTERRUPTED (KILL QUERY, or a
// statement timeout: the statement ended, the connection stays), 1969
// ER_STATEMENT_TIMEOUT (MariaDB's max_statement_time) and 3024
// ER_QUERY_TIMEOUT (MySQL's max_execution_time), which end only the
// statement.
func ClosesConnection(code uint16, mysql bool) bool {
	switch code {
	case 1040, // ER_CON_COUNT_ERROR: too many connections (login refused, closed)
		1043, // ER_HANDSHAKE_ERROR: bad handshake (closed)
		1053, // ER_SERVER_SHUTDOWN: the server is shutting down and ends connections
		1080, // ER_FORCING_CLOSE: the server forces the thread closed (shutdown)
		1152, // ER_ABORTING_CONNECTION: aborted connection
		1153, // ER_NET_PACKET_TOO_LARGE: a packet over max_allowed_packet; the server closes
		1154, // ER_NET_READ_ERROR_FROM_PIPE: read error on the connection
		1155, // ER_NET_FCNTL_ERROR: fcntl() failed on the connection's socket
		1156, // ER_NET_PACKETS_OUT_OF_ORDER: the protocol stream is out of step
		1157, // ER_NET_UNCOMPRESS_ERROR: a compressed packet could not be read
		1158, // ER_NET_READ_ERROR: error reading communication packets
		1159, // ER_NET_READ_INTERRUPTED: timeout reading communication packets (net_read_timeout)
		1160, // ER_NET_ERROR_ON_WRITE: error writing communication packets
		1161, // ER_NET_WRITE_INTERRUPTED: timeout writing communication packets (net_write_timeout)
		1184, // ER_NEW_ABORTING_CONNECTION: aborted connection (with host and reason)
		1927, // ER_CONNECTION_KILLED (MariaDB): KILL [CONNECTION] of this connection
		3032, // ER_SERVER_OFFLINE_MODE: offline_mode on; the server closes ordinary connections
		3169, // ER_SESSION_WAS_KILLED (MySQL; unused by MariaDB): KILL CONNECTION of this connection
		// Client library codes: no server sends them, but a proxy in front
		// of the server may, for a connection it lost.
		2006, // CR_SERVER_GONE_ERROR: server has gone away
		2013, // CR_SERVER_LOST: lost connection during query
		2055: // CR_SERVER_LOST_EXTENDED: lost connection, with the system error
		return true
	case 4031: // MySQL 8.0.24+ ER_CLIENT_INTERACTION_TIMEOUT: wait_timeout closed an idle connection
		return mysql
	}
	return false
}

// NoteErr parses the ERR packet p (payload, header byte 0xff included)
// that the server sent on c, and records what it means for c: its
// diagnostics area has the error, and an error that closes the connection
// (ClosesConnection) marks it broken. Every place that reads a server
// reply calls it for an ERR.
func (c *Conn) NoteErr(p []byte) *mysqlproto.SQLError {
	se := mysqlproto.ParseErr(p)
	c.DiagDirty = true
	c.errSeen = true
	if len(p) < 3 || ClosesConnection(se.Code, c.MySQL) {
		// (A truncated ERR packet: the stream cannot be trusted either.)
		c.Broken = true
	}
	return se
}

// ServerClosed reports whether c is done for: broken already, or its
// socket shows that the server closed it (KILL, wait_timeout, a restart,
// an error that closes the connection), reset it, or sent bytes nobody
// asked for (MySQL's 4031 before it closes an idle connection). It marks
// c broken then. For a connection with no command in flight only (idle in
// the pool, or kept by a session between statements): it costs one
// non-blocking system call and reads nothing.
func (c *Conn) ServerClosed() bool {
	if c.Broken {
		return true
	}
	if !c.peekSet {
		c.peekSet = true
		c.peek = newPeeker(c.NetConn())
	}
	if c.Buffered() > 0 || (c.peek != nil && c.peek.serverClosed()) {
		c.Broken = true
	}
	return c.Broken
}

// peekIdle: a connection idle at least this long is looked at
// (ServerClosed) before it serves again, so that one the server closed
// while it waited (KILL, wait_timeout, a restart) never reaches a client.
// One reused sooner was in use a moment ago: a close that lands in between
// races with the statement that ran on it, and busy connections pay
// nothing (the look is a system call).
const peekIdle = time.Millisecond

// Park records that c goes idle now while a session keeps it between
// statements (outside the pool: without multiplexing, or the previous
// statement's connection), for ClosedWhileIdle. Pool.Put does it for
// pooled connections.
func (c *Conn) Park() { c.lastUsed = time.Now() }

// ClosedWhileIdle is ServerClosed for a connection idle since it went back
// to its pool or was parked (Park) at least peekIdle before now; one used
// a moment ago is taken as it is.
func (c *Conn) ClosedWhileIdle(now time.Time) bool {
	if c.Broken {
		return true
	}
	return now.Sub(c.lastUsed) >= peekIdle && c.ServerClosed()
}
