package mysqlproto

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

func TestParseChangeUser(t *testing.T) {
	caps := uint32(ServerCapabilities)
	full := []byte{ComChangeUser}
	full = append(full, "bob\x00"...)
	full = append(full, 3, 'a', 'b', 'c')
	full = append(full, "db1\x00"...)
	full = append(full, 8, 0) // latin1_swedish_ci
	full = append(full, "mysql_native_password\x00"...)
	full = AppendLenEncString(full, AppendLenEncString(AppendLenEncString(nil, []byte("_client_name")), []byte("libmariadb")))
	cu, err := ParseChangeUser(full, caps)
	if err != nil || cu.User != "bob" || string(cu.AuthResponse) != "abc" || cu.DB != "db1" || cu.Collation != 8 ||
		cu.Plugin != AuthNativePassword || cu.Attrs["_client_name"] != "libmariadb" || !cu.PluginAuth {
		t.Fatalf("%v %+v", err, cu)
	}
	// Old clients stop after the auth data or the schema.
	short := []byte("\x11bob\x00\x00")
	if cu, err := ParseChangeUser(short, caps); err != nil || cu.User != "bob" || cu.DB != "" || cu.Collation != 0 {
		t.Fatalf("short: %v %+v", err, cu)
	}
	// Without CLIENT_SECURE_CONNECTION the auth data ends with NUL.
	if cu, err := ParseChangeUser([]byte("\x11bob\x00xyz\x00db\x00"), caps&^CapabilityClientSecureConnection); err != nil || string(cu.AuthResponse) != "xyz" || cu.DB != "db" {
		t.Fatalf("no secure connection: %v %+v", err, cu)
	}
	for _, bad := range [][]byte{{ComChangeUser}, []byte("\x11bob\x00\x05ab"), []byte("\x03SELECT")} {
		if _, err := ParseChangeUser(bad, caps); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

// changeUserPair returns a client connection authenticated by Accept and
// the server side of it, with the greeting's nonce.
func changeUserPair(t *testing.T, cfg *ServerConfig, user, pass string) (client, server *Conn, nonce []byte) {
	t.Helper()
	a, b := pipe(t)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := b.Accept(ctx, cfg, 1, "127.0.0.1")
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := a.handshakeClient(ctx, &DialConfig{Addr: "test", User: user, Password: pass})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return a, b, g.Nonce
}

// TestChangeUserLikeLibmariadb: MariaDB Connector/C scrambles the
// COM_CHANGE_USER password with the connection's first nonce and answers
// the server's auth switch with that same scramble, whatever nonce the
// switch carries. MariaDB's switch carries the connection's nonce, so this
// works; Vigil must do the same.
func TestChangeUserLikeLibmariadb(t *testing.T) {
	old := ChangeUserFailDelay
	ChangeUserFailDelay = 0
	defer func() { ChangeUserFailDelay = old }()
	users := map[string]Credentials{"app": {Plain: "secret"}, "other": {NativeHash: nativeHash("pw2")}}
	cfg := &ServerConfig{ServerVersion: "v", ShaCache: &ShaCache{},
		Lookup: func(u string) (Credentials, bool) { c, ok := users[u]; return c, ok }}
	client, server, nonce := changeUserPair(t, cfg, "app", "secret")

	// change runs one COM_CHANGE_USER as libmariadb does and returns what
	// the server side decided and the nonce its switch carried.
	change := func(user, pass string) (denied *SQLError, switchNonce []byte) {
		t.Helper()
		scr := gomysql.CalcNativePassword(nonce, []byte(pass))
		pkt := []byte{ComChangeUser}
		pkt = append(append(pkt, user...), 0, byte(len(scr)))
		pkt = append(append(pkt, scr...), 0)
		pkt = append(pkt, 45, 0)
		pkt = append(append(pkt, AuthNativePassword...), 0)
		pkt = AppendLenEncString(pkt, nil)
		type result struct {
			denied *SQLError
			err    error
		}
		res := make(chan result, 1)
		go func() {
			server.Seq = 0
			p, err := server.ReadPacket()
			if err != nil {
				res <- result{err: err}
				return
			}
			cu, err := ParseChangeUser(p, ServerCapabilities)
			if err != nil {
				res <- result{err: err}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := server.AuthChangeUser(ctx, cfg, cu, "127.0.0.1")
			if err == nil && d != nil {
				err = server.RejectChangeUser(ctx, d)
			} else if err == nil {
				if err = server.WritePacket(AppendOK(nil, 0, 0, ServerStatusAutocommit, 0)); err == nil {
					err = server.Flush()
				}
			}
			res <- result{d, err}
		}()
		client.Seq = 0
		if err := client.WritePacket(pkt); err != nil {
			t.Fatal(err)
		}
		if err := client.Flush(); err != nil {
			t.Fatal(err)
		}
		p, err := client.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if p[0] == AuthSwitchRequest {
			name, pos, _ := ReadNulString(p, 1)
			if string(name) != AuthNativePassword {
				t.Fatalf("switch to %q", name)
			}
			switchNonce = bytes.TrimRight(p[pos:], "\x00")
			// libmariadb: the old scramble, not one of switchNonce.
			if err := client.WritePacket(scr); err != nil {
				t.Fatal(err)
			}
			if err := client.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := client.ReadPacket(); err != nil {
				t.Fatal(err)
			}
		}
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.denied, switchNonce
	}
	if d, sw := change("app", "secret"); d != nil || !bytes.Equal(sw, nonce) {
		t.Fatalf("change to app: denied %v; switch nonce %q, connection nonce %q", d, sw, nonce)
	}
	if d, _ := change("other", "pw2"); d != nil {
		t.Fatalf("change to a user known by hash: %v", d)
	}
	for i := range 3 {
		if d, _ := change("app", "wrong"); d == nil || d.Code != ERAccessDeniedError || !strings.Contains(d.Message, "using password: YES") {
			t.Fatalf("wrong password %d: %v", i, d)
		}
	}
	// After three failures MariaDB refuses further attempts outright.
	if d, sw := change("app", "secret"); d == nil || d.Code != ERUnknownComError || sw != nil {
		t.Fatalf("fourth attempt: %v (switch %q)", d, sw)
	}
}

// TestChangeUserCachingSha2: a client that answers COM_CHANGE_USER with
// caching_sha2_password is checked in place against the connection's nonce
// (fast path when cached, else full authentication), as MySQL does.
func TestChangeUserCachingSha2(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ServerConfig{ServerVersion: "v", Plugin: AuthCachingSha2, RSAKey: key, ShaCache: &ShaCache{},
		Lookup: func(u string) (Credentials, bool) { return Credentials{Plain: "secret"}, u == "app" }}
	client, server, nonce := changeUserPair(t, cfg, "app", "secret")
	for _, tc := range []struct {
		pass string
		ok   bool
	}{{"secret", true}, {"wrong", false}} {
		scr := gomysql.CalcCachingSha2Password(nonce, []byte(tc.pass))
		pkt := []byte{ComChangeUser}
		pkt = append(append(pkt, "app"...), 0, byte(len(scr)))
		pkt = append(append(pkt, scr...), 0, 45, 0)
		pkt = append(append(pkt, AuthCachingSha2...), 0)
		res := make(chan *SQLError, 1)
		go func() {
			server.Seq = 0
			p, _ := server.ReadPacket()
			cu, _ := ParseChangeUser(p, ServerCapabilities)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := server.AuthChangeUser(ctx, cfg, cu, "127.0.0.1")
			if err != nil {
				d = NewError(1, "HY000", "%v", err)
			}
			_ = server.Flush()
			res <- d
		}()
		client.Seq = 0
		_ = client.WritePacket(pkt)
		_ = client.Flush()
		d := <-res
		if (d == nil) != tc.ok {
			t.Fatalf("password %q: denied %v", tc.pass, d)
		}
		if tc.ok {
			// The user is cached since the login: the fast path's marker.
			p, err := client.ReadPacket()
			if err != nil || !bytes.Equal(p, []byte{AuthMoreData, cachingSha2FastAuthOK}) {
				t.Fatalf("fast path: %x %v", p, err)
			}
		}
	}
}
