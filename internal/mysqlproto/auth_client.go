package mysqlproto

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"net"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

// DialConfig describes a connection to a server.
type DialConfig struct {
	Addr     string
	User     string
	Password string
	DB       string
	// Flavour: the flavour the client wants (see Flavour): its
	// FlavourCapabilities bits and its FlavourMariaDBCapabilities bits,
	// which are asked for exactly, and refused when the server lacks them.
	Flavour   uint64
	Collation byte
	TLS       *tls.Config
	Attrs     map[string]string
}

// Dial connects and authenticates to a server. The context bounds the whole
// handshake.
func Dial(ctx context.Context, cfg *DialConfig) (*Conn, *Greeting, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := NewConn(nc)
	g, err := c.handshakeClient(ctx, cfg)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, g, nil
}

func (c *Conn) handshakeClient(ctx context.Context, cfg *DialConfig) (*Greeting, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetDeadline(dl)
		defer c.nc.SetDeadline(noDeadline)
	}
	c.Seq = 0
	p, err := c.ReadPacket()
	if err != nil {
		return nil, fmt.Errorf("reading server greeting: %w", err)
	}
	g, err := ParseGreeting(p)
	if err != nil {
		return nil, err
	}
	want := CapabilityClientLongPassword | CapabilityClientLongFlag | CapabilityClientProtocol41 |
		CapabilityClientTransactions | CapabilityClientSecureConnection | CapabilityClientMultiStatements |
		CapabilityClientMultiResults | CapabilityClientPSMultiResults | CapabilityClientPluginAuth |
		CapabilityClientPluginAuthLenencClientData | CapabilityClientSessionTrack | CapabilityClientLocalFiles |
		CapabilityClientConnectAttrs
	flavourCaps, wantExt := SplitFlavour(cfg.Flavour)
	want |= flavourCaps
	if cfg.DB != "" {
		want |= CapabilityClientConnectWithDB
	}
	caps := want & g.Capabilities
	if flavourCaps&CapabilityClientDeprecateEOF != 0 && g.Capabilities&CapabilityClientDeprecateEOF == 0 {
		return nil, fmt.Errorf("server %s does not support CLIENT_DEPRECATE_EOF", cfg.Addr)
	}
	// MariaDB extended capabilities: exactly those of the flavour, sent
	// only to a server that cleared CLIENT_MYSQL (so caps has it clear
	// too, and the server reads them).
	if wantExt&^g.MariaDBCaps != 0 {
		return nil, fmt.Errorf("server %s (%s) does not offer the MariaDB extended capabilities %#x (extended metadata) that the client negotiated, because every server offered them when Vigil started",
			cfg.Addr, g.ServerVersion, wantExt&^g.MariaDBCaps)
	}
	coll := cfg.Collation
	if coll == 0 {
		coll = DefaultCollationID
	}
	tlsOn := false
	if cfg.TLS != nil {
		if g.Capabilities&CapabilityClientSSL == 0 {
			return nil, fmt.Errorf("server %s does not offer TLS, which the config requires", cfg.Addr)
		}
		caps |= CapabilityClientSSL
		req := AppendSSLRequest(nil, caps, coll)
		if caps&CapabilityClientLongPassword == 0 {
			binary.LittleEndian.PutUint32(req[28:], wantExt)
		}
		if err := c.WritePacket(req); err != nil {
			return nil, err
		}
		if err := c.Flush(); err != nil {
			return nil, err
		}
		tc := tls.Client(c.nc, cfg.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("TLS to %s: %w", cfg.Addr, err)
		}
		c.SetNetConn(tc)
		tlsOn = true
	}
	plugin := g.Plugin
	if plugin == "" {
		plugin = AuthNativePassword
	}
	if c.forcePlugin != "" {
		plugin = c.forcePlugin
	}
	authResp, err := scramble(plugin, g.Nonce, cfg.Password, tlsOn)
	if err != nil {
		return nil, err
	}
	resp := &HandshakeResponse{
		Capabilities: caps, MaxPacket: DefaultMaxAllowedBytes, Collation: coll, User: cfg.User,
		AuthResponse: authResp, DB: cfg.DB, Plugin: plugin, Attrs: cfg.Attrs, MariaDBCaps: wantExt,
	}
	if err := c.WritePacket(AppendHandshakeResponse(nil, resp)); err != nil {
		return nil, err
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	nonce := g.Nonce
	for range 5 {
		p, err := c.ReadPacket()
		if err != nil {
			return nil, fmt.Errorf("authenticating to %s: %w", cfg.Addr, err)
		}
		switch p[0] {
		case OKPacket:
			g.Capabilities = caps
			g.MariaDBCaps = wantExt
			return g, nil
		case ErrPacket:
			return nil, ParseErr(p)
		case AuthSwitchRequest:
			name, pos, ok := ReadNulString(p, 1)
			if !ok || string(name) == "mysql_old_password" {
				// A lone 0xfe is the pre-4.1 request: the greeting's
				// nonce; with the plugin's name, its own nonce follows.
				plugin = "mysql_old_password"
				if ok && len(p) > pos {
					nonce = append([]byte(nil), p[pos:]...)
				}
				var ar []byte
				if cfg.Password != "" {
					ar = append(scrambleOld(nonce, cfg.Password), 0)
				}
				if err := c.sendAuth(ar); err != nil {
					return nil, err
				}
				continue
			}
			plugin = string(name)
			nonce = append([]byte(nil), p[pos:]...)
			if n := len(nonce); n > 0 && nonce[n-1] == 0 {
				nonce = nonce[:n-1]
			}
			ar, err := scramble(plugin, nonce, cfg.Password, tlsOn)
			if err != nil {
				return nil, err
			}
			if err := c.sendAuth(ar); err != nil {
				return nil, err
			}
		case AuthMoreData:
			if plugin != AuthCachingSha2 && plugin != AuthSha256Password {
				return nil, fmt.Errorf("unexpected auth data for plugin %s", plugin)
			}
			if len(p) >= 2 && p[1] == cachingSha2FastAuthOK {
				continue // OK follows
			}
			if len(p) >= 2 && p[1] == cachingSha2FullAuth {
				if tlsOn {
					if err := c.sendAuth(append([]byte(cfg.Password), 0)); err != nil {
						return nil, err
					}
					continue
				}
				if err := c.sendAuth([]byte{cachingSha2RequestKey}); err != nil {
					return nil, err
				}
				continue
			}
			// The server's public key.
			block, _ := pem.Decode(p[1:])
			if block == nil {
				return nil, fmt.Errorf("server %s sent an unreadable RSA key", cfg.Addr)
			}
			pk, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			rk, ok := pk.(*rsa.PublicKey)
			if !ok {
				return nil, fmt.Errorf("server %s sent a non-RSA key", cfg.Addr)
			}
			enc, err := gomysql.EncryptPassword(cfg.Password, nonce, rk)
			if err != nil {
				return nil, err
			}
			if err := c.sendAuth(enc); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: unexpected packet 0x%02x during authentication", ErrMalformed, p[0])
		}
	}
	return nil, fmt.Errorf("authentication to %s did not finish", cfg.Addr)
}

// sendAuth writes one packet of an authentication exchange (either side)
// and flushes it.
func (c *Conn) sendAuth(b []byte) error {
	if err := c.WritePacket(b); err != nil {
		return err
	}
	return c.Flush()
}

func scramble(plugin string, nonce []byte, password string, tlsOn bool) ([]byte, error) {
	switch plugin {
	case AuthNativePassword:
		return gomysql.CalcNativePassword(nonce, []byte(password)), nil
	case AuthCachingSha2:
		return gomysql.CalcCachingSha2Password(nonce, []byte(password)), nil
	case AuthClearPassword:
		if !tlsOn {
			return nil, fmt.Errorf("server asks for the cleartext password without TLS; refusing")
		}
		return append([]byte(password), 0), nil
	case "client_ed25519":
		return gomysql.CalcEd25519Password(nonce, password)
	case AuthSha256Password:
		if tlsOn {
			return append([]byte(password), 0), nil
		}
		return []byte{1}, nil // request the public key
	default:
		return nil, fmt.Errorf("authentication plugin %q is not supported", plugin)
	}
}
