package frontend

import (
	"context"
	"fmt"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// changeUserLibmariadb sends COM_CHANGE_USER the way MariaDB Connector/C
// does: the password scrambled with the connection's first nonce, the
// collation, mysql_native_password and attributes; it answers an auth
// switch with the same scramble, whatever nonce the switch carries. It
// returns the final reply.
func changeUserLibmariadb(t *testing.T, c *mysqlproto.Conn, nonce []byte, user, pass, db string, collation byte) []byte {
	t.Helper()
	scr := gomysql.CalcNativePassword(nonce, []byte(pass))
	pkt := []byte{mysqlproto.ComChangeUser}
	pkt = append(append(pkt, user...), 0, byte(len(scr)))
	pkt = append(append(pkt, scr...), db...)
	pkt = append(pkt, 0, collation, 0)
	pkt = append(append(pkt, mysqlproto.AuthNativePassword...), 0)
	pkt = mysqlproto.AppendLenEncString(pkt, mysqlproto.AppendLenEncString(mysqlproto.AppendLenEncString(nil, []byte("_client_name")), []byte("libmariadb")))
	p := command(t, c, pkt)
	if p[0] != mysqlproto.AuthSwitchRequest {
		return p
	}
	return exchange(t, c, scr)
}

// TestChangeUserLibmariadb: COM_CHANGE_USER as MariaDB Connector/C sends
// it (mysqlclient's change_user, the mariadb CLI) succeeds; the session
// then runs as the new user with the packet's character set; a wrong
// password gets 1045 and leaves the session open with its previous user,
// as MariaDB does, and after three failures further attempts get 1047.
func TestChangeUserLibmariadb(t *testing.T) {
	old := mysqlproto.ChangeUserFailDelay
	mysqlproto.ChangeUserFailDelay = 0
	defer func() { mysqlproto.ChangeUserFailDelay = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	be := newMariaBackend(t, 0)
	srv, addr := compatProxy(t, be, 0)
	loginOnly := mysqlproto.CapabilityClientIgnoreSpace | mysqlproto.CapabilityClientInteractive
	c, g, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr, User: "app", Password: "secret", Flavour: mysqlproto.Flavour(loginOnly, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	user := func() string {
		for _, in := range srv.Sessions() {
			return in.User
		}
		return ""
	}
	value := func(q string) string {
		got := query(t, c, false, q)
		if got[0][0] == mysqlproto.ErrPacket {
			t.Fatalf("%s: %v", q, mysqlproto.ParseErr(got[0]))
		}
		v, _, _ := mysqlproto.ReadLenEncString(got[3], 0)
		return string(v)
	}
	if v := value("SELECT 'as-app'"); v != "as-app" {
		t.Fatalf("statement before change user: %q", v)
	}
	if h := be.negotiated(); len(h) != 1 || h[0].Capabilities&loginOnly != loginOnly {
		t.Fatalf("server connections before change user: %+v", h)
	}
	if p := changeUserLibmariadb(t, c, g.Nonce, "other", "pw2", "", 8); p[0] != mysqlproto.OKPacket {
		t.Fatalf("change user to other: %v", mysqlproto.ParseErr(p))
	}
	if u := user(); u != "other" {
		t.Fatalf("session user %q after change user, want other", u)
	}
	if v := value("SELECT 'as-other'"); v != "as-other" {
		t.Fatalf("statement after change user: %q", v)
	}
	// The statement ran on a server connection of the new user opened
	// with the packet's collation (8, latin1_swedish_ci), and without
	// CLIENT_IGNORE_SPACE and CLIENT_INTERACTIVE, whose effects on the
	// session variables MariaDB's reset undoes.
	hs := be.negotiated()
	if last := hs[len(hs)-1]; last.User != "other" || last.Collation != 8 || last.Capabilities&loginOnly != 0 {
		t.Fatalf("server connection after change user: user %q collation %d capabilities %#x", last.User, last.Collation, last.Capabilities)
	}
	for i := range 3 {
		p := changeUserLibmariadb(t, c, g.Nonce, "app", "wrong", "", 45)
		if se := mysqlproto.ParseErr(p); p[0] != mysqlproto.ErrPacket || se.Code != mysqlproto.ERAccessDeniedError {
			t.Fatalf("wrong password %d: %x", i, p)
		}
		// The session stays, with its previous user.
		if v := value(fmt.Sprintf("SELECT 'still-%d'", i)); v != fmt.Sprintf("still-%d", i) || user() != "other" {
			t.Fatalf("after a failed change user: %q as %q", v, user())
		}
	}
	if p := changeUserLibmariadb(t, c, g.Nonce, "app", "secret", "", 45); p[0] != mysqlproto.ErrPacket || mysqlproto.ParseErr(p).Code != mysqlproto.ERUnknownComError {
		t.Fatalf("fourth attempt after three failures: %x, want 1047 as MariaDB", p)
	}
	if v := value("SELECT 'alive'"); v != "alive" {
		t.Fatalf("session after refused attempts: %q", v)
	}
}
