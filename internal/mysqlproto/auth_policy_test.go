package mysqlproto

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

// transcript logs in as user, claiming plugin (empty: no
// CLIENT_PLUGIN_AUTH), with a wrong answer to everything, and returns
// what the server sent, one line per packet (user names replaced).
func transcript(t *testing.T, cfg *ServerConfig, user, plugin string) string {
	t.Helper()
	a, b := pipe(t)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = b.Accept(ctx, cfg, 1, "10.0.0.9")
		b.Close()
	}()
	g, err := a.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseGreeting(g); err != nil {
		t.Fatal(err)
	}
	caps := uint32(ServerCapabilities)
	if plugin == "" {
		caps &^= CapabilityClientPluginAuth
	}
	wrong := make([]byte, 20)
	_, _ = rand.Read(wrong)
	if plugin == AuthCachingSha2 {
		wrong = append(wrong, wrong[:12]...)
	}
	a.Seq = 1
	if err := a.WritePacket(AppendHandshakeResponse(nil, &HandshakeResponse{Capabilities: caps, MaxPacket: 1 << 24,
		Collation: DefaultCollationID, User: user, AuthResponse: wrong, Plugin: plugin})); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for range 6 {
		p, err := a.ReadPacket()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var reply []byte
		switch {
		case len(p) > 0 && p[0] == ErrPacket:
			lines = append(lines, "ERR "+strings.ReplaceAll(string(p[9:]), user, "USER"))
		case len(p) > 0 && p[0] == OKPacket:
			lines = append(lines, "OK")
		case len(p) > 0 && p[0] == AuthSwitchRequest:
			name, _, _ := strings.Cut(string(p[1:]), "\x00")
			lines = append(lines, "SWITCH "+name)
			reply = wrong[:20]
		case len(p) == 2 && p[0] == AuthMoreData:
			lines = append(lines, fmt.Sprintf("MORE %d", p[1]))
			reply = []byte{cachingSha2RequestKey}
		case len(p) > 0 && p[0] == AuthMoreData:
			lines = append(lines, "MORE key")
			reply = make([]byte, 256)
		default:
			lines = append(lines, fmt.Sprintf("? %x", p))
		}
		if lines[len(lines)-1][:3] == "ERR" || lines[len(lines)-1] == "OK" {
			break
		}
		if err := a.WritePacket(reply); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(lines, "; ")
}

// TestNoUserEnumeration: for every plugin a client may claim, an unknown
// user, a wrong password of a user known by its password, of one known
// only by its native hash, of a cached caching_sha2 user and of a user
// that requires TLS (over plain TCP) get the same packets.
func TestNoUserEnumeration(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]Credentials{
		"plain":   {Plain: "pw-plain"},
		"hashed":  {NativeHash: gomysql.NativePasswordHash([]byte("pw-hashed"))},
		"cached":  {Plain: "pw-cached"},
		"tlsonly": {Plain: "pw-tls", RequireTLS: true},
	}
	cache := &ShaCache{}
	cache.m.Store("cached", struct{}{})
	cfg := &ServerConfig{ServerVersion: "10.11.0-MariaDB", RSAKey: key, ShaCache: cache,
		Lookup: func(u string) (Credentials, bool) { c, ok := users[u]; return c, ok }}
	for _, plugin := range []string{AuthNativePassword, AuthCachingSha2, "client_ed25519", "mysql_clear_password", ""} {
		t.Run("plugin="+plugin, func(t *testing.T) {
			want := transcript(t, cfg, "nobody", plugin)
			if !strings.Contains(want, "ERR") || !strings.Contains(want, "Access denied for user 'USER'@'10.0.0.9'") {
				t.Fatalf("unknown user: %s", want)
			}
			for _, u := range []string{"plain", "hashed", "cached", "tlsonly"} {
				if got := transcript(t, cfg, u, plugin); got != want {
					t.Errorf("%s: %s\nunknown user: %s", u, got, want)
				}
			}
		})
	}
}

// TestHashOnlyUserCachingSha2: a user known only by its native hash logs
// in with caching_sha2_password (full authentication, the cleartext over
// RSA, hashed the native way).
func TestHashOnlyUserCachingSha2(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ServerConfig{ServerVersion: "8.0.36", Plugin: AuthCachingSha2, RSAKey: key, ShaCache: &ShaCache{},
		Lookup: func(u string) (Credentials, bool) {
			return Credentials{NativeHash: gomysql.NativePasswordHash([]byte("s3cret"))}, u == "hashed"
		}}
	changeUserPair(t, cfg, "hashed", "s3cret") // fails the test unless the login succeeds
}

// TestHandshakeBounded: before login a packet larger than
// MaxHandshakePacket is refused from its header, and a frame header that
// announces 16 MiB and sends a few bytes costs no 16 MiB buffer.
func TestHandshakeBounded(t *testing.T) {
	a, b := pipe(t)
	b.MaxPacket = MaxHandshakePacket
	go func() {
		_, _ = a.nc.Write([]byte{0xff, 0xff, 0xff, 0, 1, 2, 3, 4, 5})
	}()
	if _, err := b.ReadPacket(); !errors.Is(err, ErrPacketTooLarge) {
		t.Fatalf("pre-auth 16 MiB frame: %v", err)
	}
	c, d := pipe(t)
	go func() {
		_, _ = c.nc.Write([]byte{0xff, 0xff, 0xff, 0, 1, 2, 3, 4, 5})
		c.Close()
	}()
	if _, err := d.ReadPacket(); err == nil {
		t.Fatal("a truncated frame was read")
	}
	if cap(d.big) > 1<<20 {
		t.Fatalf("%d bytes allocated for 5 received", cap(d.big))
	}
}

// TestChangeUserSamePolicy: COM_CHANGE_USER goes through the login's
// policy: a require_tls user is refused over plain TCP even with its
// password, and a blocked user is refused; the right password of an
// ordinary user passes.
func TestChangeUserSamePolicy(t *testing.T) {
	old := ChangeUserFailDelay
	ChangeUserFailDelay = 0
	defer func() { ChangeUserFailDelay = old }()
	users := map[string]Credentials{"app": {Plain: "secret"}, "tlsonly": {Plain: "tls-pw", RequireTLS: true}, "blocked": {Plain: "b-pw"}}
	cfg := &ServerConfig{ServerVersion: "v", ShaCache: &ShaCache{},
		Lookup:  func(u string) (Credentials, bool) { c, ok := users[u]; return c, ok },
		Blocked: func(u string) bool { return u == "blocked" }}
	client, server, nonce := changeUserPair(t, cfg, "app", "secret")
	for _, tc := range []struct {
		user, pass string
		ok         bool
	}{{"tlsonly", "tls-pw", false}, {"blocked", "b-pw", false}, {"app", "secret", true}} {
		scr := gomysql.CalcNativePassword(nonce, []byte(tc.pass))
		pkt := []byte{ComChangeUser}
		pkt = append(append(pkt, tc.user...), 0, byte(len(scr)))
		pkt = append(append(pkt, scr...), 0)
		pkt = append(pkt, 45, 0)
		pkt = append(append(pkt, AuthNativePassword...), 0)
		done := make(chan *SQLError, 1)
		go func() {
			server.Seq = 0
			p, err := server.ReadPacket()
			if err != nil {
				done <- NewError(1, "x", "%v", err)
				return
			}
			cu, _ := ParseChangeUser(p, ServerCapabilities)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := server.AuthChangeUser(ctx, cfg, cu, "127.0.0.1")
			if err != nil {
				d = NewError(2, "x", "%v", err)
			}
			if d != nil {
				_ = server.WriteErr(d)
			} else {
				_ = server.WriteErr(NewError(0, "00000", "ok")) // any reply ends the exchange
			}
			done <- d
		}()
		client.Seq = 0
		if err := client.WritePacket(pkt); err != nil {
			t.Fatal(err)
		}
		if err := client.Flush(); err != nil {
			t.Fatal(err)
		}
		// Answer an auth switch with the scramble of the same nonce, as
		// libmariadb does.
		for {
			p, err := client.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			if p[0] != AuthSwitchRequest {
				break
			}
			if err := client.WritePacket(scr); err != nil {
				t.Fatal(err)
			}
			if err := client.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		d := <-done
		if (d == nil) != tc.ok || (d != nil && d.Code != ERAccessDeniedError) {
			t.Fatalf("%s: %v", tc.user, d)
		}
	}
}
