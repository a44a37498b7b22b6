package mysqlproto

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

// attempt is one authentication, at login (Accept) or by COM_CHANGE_USER
// (AuthChangeUser): both go through verify, so every policy — plugins,
// the TLS requirement, what an unknown user sees — is one implementation.
type attempt struct {
	User string
	// Plugin is the plugin the client answered with; PluginAuth whether
	// it speaks CLIENT_PLUGIN_AUTH (without it, its answer is a
	// mysql_native_password scramble and it cannot be switched).
	Plugin     string
	PluginAuth bool
	AuthData   []byte
	// Nonce is the scramble the client answered; SwitchNonce the one an
	// auth switch carries (a new one at login; the same one for
	// COM_CHANGE_USER, which MariaDB Connector/C depends on).
	Nonce, SwitchNonce []byte
	// AlwaysSwitch: a client that speaks CLIENT_PLUGIN_AUTH is switched
	// to mysql_native_password even when it answered with it
	// (COM_CHANGE_USER, as MariaDB does).
	AlwaysSwitch bool
}

// decoy stands in for an unknown user, so that an unknown user and a
// wrong password go through the same packets and the same work: a client
// cannot tell which accounts exist (the denial is checked last).
var decoy = func() Credentials {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	pw := hex.EncodeToString(b)
	return Credentials{Plain: pw, NativeHash: gomysql.NativePasswordHash([]byte(pw))}
}()

// verify authenticates a; reason is empty on success and says why not
// otherwise (for logs: the client gets the same access-denied error
// whatever the reason); err is an I/O or protocol failure.
func (c *Conn) verify(ctx context.Context, cfg *ServerConfig, a attempt) (reason string, err error) {
	cred, found := cfg.Lookup(a.User)
	if !found {
		cred = decoy
	}
	if cred.NativeHash == nil && cred.Plain != "" {
		cred.NativeHash = gomysql.NativePasswordHash([]byte(cred.Plain))
	}
	plugin := a.Plugin
	if !a.PluginAuth {
		plugin = AuthNativePassword
	}
	var ok bool
	switch plugin {
	case AuthCachingSha2:
		if ok, err = c.cachingSha2(ctx, cfg, a.Nonce, a.AuthData, cred, a.User, c.tlsOn); err != nil {
			return "", err
		}
	default:
		authData, nonce := a.AuthData, a.Nonce
		if plugin != AuthNativePassword || (a.AlwaysSwitch && a.PluginAuth) {
			c.nonce = a.SwitchNonce
			sw := append([]byte{AuthSwitchRequest}, AuthNativePassword...)
			sw = append(append(append(sw, 0), a.SwitchNonce...), 0)
			if err := c.sendAuth(sw); err != nil {
				return "", err
			}
			reply, err := c.ReadPacket()
			if err != nil {
				return "", fmt.Errorf("reading auth switch response: %w", err)
			}
			authData, nonce = append([]byte(nil), reply...), a.SwitchNonce
		}
		ok = checkNative(authData, nonce, cred)
	}
	switch {
	case !found:
		return "unknown user", nil
	case !ok:
		return "wrong password", nil
	case cred.RequireTLS && !c.tlsOn:
		// Checked after the password, so that it says nothing to a client
		// that does not know the password.
		return "the user requires TLS", nil
	case cfg.Blocked != nil && cfg.Blocked(a.User):
		return "blocked after repeated failed logins", nil
	}
	return "", nil
}
