package mysqlproto

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

// Credentials is what Vigil knows of a user's password: the plaintext, or
// only the mysql_native_password hash (SHA1(SHA1(password))).
type Credentials struct {
	Plain      string
	NativeHash []byte // 20 bytes; derived from Plain when Plain is set
	RequireTLS bool
}

// ServerConfig drives the server side of the handshake.
type ServerConfig struct {
	ServerVersion string
	// Plugin is offered in the greeting; empty means mysql_native_password.
	Plugin string
	// TLS, when set, offers CLIENT_SSL.
	TLS *tls.Config
	// RSAKey enables caching_sha2_password full authentication on
	// connections without TLS.
	RSAKey *rsa.PrivateKey
	// Lookup returns a user's credentials.
	Lookup func(user string) (Credentials, bool)
	// Check, when set, runs after authentication and before the OK: an
	// error (e.g. an unknown default schema) is sent instead of the OK.
	Check func(ctx context.Context, h *Hello) error
	// ShaCache remembers users who passed caching_sha2_password full
	// authentication, as the server's cache does, so later logins take the
	// fast path. Shared by all connections; may be nil.
	ShaCache *ShaCache
	// MariaDBCaps are the MariaDB extended capabilities to offer (within
	// MariaDBCapabilities). When non-zero the greeting is a MariaDB one:
	// CLIENT_MYSQL clear and the extended capabilities in its filler.
	MariaDBCaps uint32
	// Denied, when set, is called with the user name before a login is
	// refused (wrong password, unknown user, blocked): it may wait (a
	// throttle) before the error is sent.
	Denied func(ctx context.Context, user string)
	// Blocked, when set, refuses a user whose password was right, with
	// the same error as a wrong one (a throttle's block).
	Blocked func(user string) bool
	// Collation is the server default collation the greeting announces
	// (0: DefaultCollationID). Some clients (mysqlnd) take it as their
	// character set when none is configured, so a proxy announces its
	// servers' own.
	Collation byte
}

// ShaCache is the caching_sha2_password fast-path cache.
type ShaCache struct{ m sync.Map }

// Hello is what a client told Vigil during the handshake.
type Hello struct {
	Capabilities uint32
	Collation    byte
	User         string
	DB           string
	Attrs        map[string]string
	TLS          bool
	MaxPacket    uint32
	// MariaDBCaps are the MariaDB extended capabilities both sides
	// support.
	MariaDBCaps uint32
	// Password: the client sent a password ("using password: YES").
	Password bool
}

// Flavour is the connection flavour the client negotiated (see Flavour).
func (h *Hello) Flavour() uint64 { return Flavour(h.Capabilities, h.MariaDBCaps) }

// ErrAccessDenied wraps authentication failures so callers can count them.
var ErrAccessDenied = errors.New("access denied")

// Accept runs the server side of the handshake on c: greeting, optional TLS,
// authentication. On success the client has received OK. On failure the
// client has received an ERR packet where that is still possible.
func (c *Conn) Accept(ctx context.Context, cfg *ServerConfig, connID uint32, remoteHost string) (*Hello, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetDeadline(dl)
		defer c.nc.SetDeadline(noDeadline)
	}
	caps := ServerCapabilities
	if cfg.TLS != nil {
		caps |= CapabilityClientSSL
	}
	ext := cfg.MariaDBCaps & MariaDBCapabilities
	if ext != 0 {
		caps &^= CapabilityClientLongPassword // CLIENT_MYSQL: clear in a MariaDB greeting
	}
	nonce := NewNonce()
	c.Seq = 0
	offered := cfg.Plugin
	if offered == "" {
		offered = AuthNativePassword
	}
	g := &Greeting{
		ServerVersion: cfg.ServerVersion, ConnectionID: connID, Capabilities: caps,
		Collation: cmp.Or(cfg.Collation, DefaultCollationID), Status: ServerStatusAutocommit, Nonce: nonce, Plugin: offered,
		MariaDBCaps: ext,
	}
	c.nonce = nonce
	if err := c.sendAuth(AppendGreeting(nil, g)); err != nil {
		return nil, err
	}
	p, err := c.ReadPacket()
	if err != nil {
		return nil, fmt.Errorf("reading handshake response: %w", err)
	}
	tlsOn := false
	if IsSSLRequest(p) {
		if cfg.TLS == nil {
			return nil, fmt.Errorf("%w: client asked for TLS, which was not offered", ErrMalformed)
		}
		tc := tls.Server(c.handOver(), cfg.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c.SetNetConn(tc)
		tlsOn = true
		c.tlsOn = true
		if p, err = c.ReadPacket(); err != nil {
			return nil, fmt.Errorf("reading handshake response: %w", err)
		}
	}
	resp, err := ParseHandshakeResponse(p)
	if err != nil {
		c.sendErr(NewError(ERHandshakeError, SSHandshakeError, "Bad handshake"))
		return nil, err
	}
	hello := &Hello{
		Capabilities: resp.Capabilities & caps, Collation: resp.Collation, User: resp.User,
		DB: resp.DB, Attrs: resp.Attrs, TLS: tlsOn, MaxPacket: resp.MaxPacket,
		MariaDBCaps: resp.MariaDBCaps & ext, Password: len(resp.AuthResponse) > 0,
	}
	denied := func(reason string) (*Hello, error) {
		if cfg.Denied != nil {
			cfg.Denied(ctx, resp.User)
			_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second)) // the wait may have used the handshake's time
		}
		used := "YES"
		if len(resp.AuthResponse) == 0 {
			used = "NO"
		}
		c.sendErr(NewError(ERAccessDeniedError, SSAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", resp.User, remoteHost, used))
		return hello, fmt.Errorf("%w for user %q: %s", ErrAccessDenied, resp.User, reason)
	}
	reason, err := c.verify(ctx, cfg, attempt{User: resp.User, Plugin: resp.Plugin,
		PluginAuth: resp.Capabilities&CapabilityClientPluginAuth != 0, AuthData: resp.AuthResponse,
		Nonce: nonce, SwitchNonce: NewNonce()})
	if err != nil {
		return nil, err
	}
	if reason != "" {
		return denied(reason)
	}
	if cfg.Check != nil {
		if err := cfg.Check(ctx, hello); err != nil {
			se, ok := err.(*SQLError)
			if !ok {
				se = NewError(ERUnknownError, SSUnknown, "%v", err)
			}
			c.sendErr(se)
			return hello, err
		}
	}
	if err := c.WritePacket(AppendOK(nil, 0, 0, ServerStatusAutocommit, 0)); err != nil {
		return nil, err
	}
	return hello, c.Flush()
}

func checkNative(reply, nonce []byte, cred Credentials) bool {
	if len(cred.NativeHash) == 0 {
		return len(reply) == 0 && cred.Plain == ""
	}
	if len(reply) != sha1.Size {
		return false
	}
	return gomysql.CompareNativePassword(reply, cred.NativeHash, nonce)
}

// cachingSha2 runs caching_sha2_password: the fast path when the user is
// cached, else full authentication with the cleartext over TLS or RSA.
func (c *Conn) cachingSha2(ctx context.Context, cfg *ServerConfig, nonce, reply []byte, cred Credentials, user string, tlsOn bool) (bool, error) {
	if cred.Plain == "" && len(cred.NativeHash) == 0 {
		return len(reply) == 0, nil // no password
	}
	if cred.Plain != "" && cfg.ShaCache != nil {
		if _, cached := cfg.ShaCache.m.Load(user); cached {
			expect := gomysql.CalcCachingSha2Password(nonce, []byte(cred.Plain))
			if subtle.ConstantTimeCompare(expect, reply) == 1 {
				return true, c.WritePacket([]byte{AuthMoreData, cachingSha2FastAuthOK})
			}
			// A mismatch asks for full authentication, as for a user not
			// cached (or unknown): the answer says nothing about the cache.
		}
	}
	// Full authentication. A user known only by its native hash is
	// checked by hashing the cleartext the same way.
	if err := c.WritePacket([]byte{AuthMoreData, cachingSha2FullAuth}); err != nil {
		return false, err
	}
	if err := c.Flush(); err != nil {
		return false, err
	}
	p, err := c.ReadPacket()
	if err != nil {
		return false, fmt.Errorf("caching_sha2_password full auth: %w", err)
	}
	var plain []byte
	switch {
	case tlsOn:
		plain = bytes.TrimRight(p, "\x00")
	case len(p) == 1 && p[0] == cachingSha2RequestKey:
		if cfg.RSAKey == nil {
			return false, fmt.Errorf("caching_sha2_password: client asked for the RSA key and none is configured; use TLS")
		}
		der, err := x509.MarshalPKIXPublicKey(&cfg.RSAKey.PublicKey)
		if err != nil {
			return false, err
		}
		pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		if err := c.WritePacket(append([]byte{AuthMoreData}, pemKey...)); err != nil {
			return false, err
		}
		if err := c.Flush(); err != nil {
			return false, err
		}
		enc, err := c.ReadPacket()
		if err != nil {
			return false, err
		}
		dec, err := rsa.DecryptOAEP(sha1.New(), nil, cfg.RSAKey, enc, nil)
		if err != nil {
			return false, nil
		}
		for i := range dec {
			dec[i] ^= nonce[i%len(nonce)]
		}
		plain = bytes.TrimRight(dec, "\x00")
	default:
		return false, fmt.Errorf("caching_sha2_password full auth needs TLS or an RSA key request")
	}
	if cred.Plain == "" {
		return subtle.ConstantTimeCompare(gomysql.NativePasswordHash(plain), cred.NativeHash) == 1, nil
	}
	if subtle.ConstantTimeCompare(sha256Sum(plain), sha256Sum([]byte(cred.Plain))) != 1 {
		return false, nil
	}
	if cfg.ShaCache != nil {
		cfg.ShaCache.m.Store(user, struct{}{})
	}
	return true, nil
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func (c *Conn) sendErr(e *SQLError) {
	_ = c.WritePacket(AppendErr(nil, e))
	_ = c.Flush()
}

// WriteErr sends an ERR packet as the reply to the current command.
func (c *Conn) WriteErr(e *SQLError) error {
	if err := c.WritePacket(AppendErr(nil, e)); err != nil {
		return err
	}
	return c.Flush()
}

// CheckNative verifies a mysql_native_password scramble against cred.
func CheckNative(reply, nonce []byte, cred Credentials) bool {
	if cred.NativeHash == nil && cred.Plain != "" {
		cred.NativeHash = gomysql.NativePasswordHash([]byte(cred.Plain))
	}
	return checkNative(reply, nonce, cred)
}

func nativeHash(pw string) []byte { return gomysql.NativePasswordHash([]byte(pw)) }
