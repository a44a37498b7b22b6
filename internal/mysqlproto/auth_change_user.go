package mysqlproto

import (
	"context"
	"time"
)

// ChangeUserFailDelay is how long a failed COM_CHANGE_USER waits before
// its error, as MariaDB does (one second), so that a connection cannot
// guess passwords quickly.
var ChangeUserFailDelay = time.Second

// maxChangeUserFailures: after this many failed COM_CHANGE_USER on one
// connection, MariaDB answers every further one with 1047 Unknown command
// without authenticating.
const maxChangeUserFailures = 3

// AuthChangeUser authenticates a COM_CHANGE_USER on a connection that
// Accept authenticated, the way MariaDB does:
//
//   - a client that answered with caching_sha2_password (and a user whose
//     password Vigil knows) is checked in place, fast path or full
//     authentication, as MySQL does;
//   - otherwise the client is asked for mysql_native_password with an auth
//     switch that carries the scramble the client last received on this
//     connection, not a new one. MariaDB does exactly this, and MariaDB
//     Connector/C (libmariadb: mysqlclient, the mariadb CLI, …) depends on
//     it: during change_user its native password plugin answers from the
//     scramble of the connection's handshake whatever nonce the switch
//     carries.
//
// The client's packet has been read (c.Seq follows it). On success the
// caller writes the OK (or an error, such as an unknown schema, through
// RejectChangeUser). denied is the error to send through RejectChangeUser
// when the change is refused; err is an I/O or protocol failure that ends
// the connection.
func (c *Conn) AuthChangeUser(ctx context.Context, cfg *ServerConfig, cu *ChangeUser, remoteHost string) (denied *SQLError, err error) {
	if c.changeUserFails >= maxChangeUserFailures {
		return NewError(ERUnknownComError, "08S01", "Unknown command"), nil
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetDeadline(dl)
		defer c.nc.SetDeadline(noDeadline)
	}
	nonce := c.nonce
	if len(nonce) == 0 {
		// Not a connection Accept authenticated (tests): any nonce will do.
		nonce = NewNonce()
		c.nonce = nonce
	}
	reason, err := c.verify(ctx, cfg, attempt{User: cu.User, Plugin: cu.Plugin, PluginAuth: cu.PluginAuth,
		AuthData: cu.AuthResponse, Nonce: nonce, SwitchNonce: nonce, AlwaysSwitch: true})
	if err != nil || reason == "" {
		return nil, err
	}
	used := "YES"
	if len(cu.AuthResponse) == 0 {
		used = "NO"
	}
	return NewError(ERAccessDeniedError, SSAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", cu.User, remoteHost, used), nil
}

// RejectChangeUser answers a refused COM_CHANGE_USER with e, after
// ChangeUserFailDelay, and counts the failure. As on MariaDB, the
// connection stays open: the client keeps its previous user.
func (c *Conn) RejectChangeUser(ctx context.Context, e *SQLError) error {
	c.changeUserFails++
	if ChangeUserFailDelay > 0 {
		t := time.NewTimer(ChangeUserFailDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return c.WriteErr(e)
}
