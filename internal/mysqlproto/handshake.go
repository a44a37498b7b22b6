package mysqlproto

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// Greeting is the server's initial handshake (protocol v10).
type Greeting struct {
	ServerVersion string
	ConnectionID  uint32
	Capabilities  uint32
	Collation     byte
	Status        uint16
	Nonce         []byte // 20 bytes of auth plugin data
	Plugin        string
	// MariaDBCaps are MariaDB's extended capabilities, in the last 4
	// bytes of the filler when CLIENT_MYSQL is clear in Capabilities.
	MariaDBCaps uint32
}

// AppendGreeting appends the payload of an initial handshake packet.
func AppendGreeting(dst []byte, g *Greeting) []byte {
	dst = append(dst, 10)
	dst = append(dst, g.ServerVersion...)
	dst = append(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, g.ConnectionID)
	dst = append(dst, g.Nonce[:8]...)
	dst = append(dst, 0)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(g.Capabilities))
	dst = append(dst, g.Collation)
	dst = binary.LittleEndian.AppendUint16(dst, g.Status)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(g.Capabilities>>16))
	dst = append(dst, byte(len(g.Nonce)+1))
	dst = append(dst, make([]byte, 6)...)
	var ext uint32
	if g.Capabilities&CapabilityClientLongPassword == 0 {
		ext = g.MariaDBCaps
	}
	dst = binary.LittleEndian.AppendUint32(dst, ext)
	dst = append(dst, g.Nonce[8:]...)
	dst = append(dst, 0)
	dst = append(dst, g.Plugin...)
	return append(dst, 0)
}

// ParseGreeting decodes an initial handshake payload.
func ParseGreeting(p []byte) (*Greeting, error) {
	bad := func(what string) error { return fmt.Errorf("%w: handshake %s", ErrMalformed, what) }
	if len(p) < 1 {
		return nil, bad("empty")
	}
	if p[0] == ErrPacket {
		return nil, ParseErr(p)
	}
	if p[0] != 10 {
		return nil, fmt.Errorf("server speaks protocol version %d, Vigil needs 10", p[0])
	}
	g := &Greeting{}
	ver, pos, ok := ReadNulString(p, 1)
	if !ok {
		return nil, bad("server version")
	}
	g.ServerVersion = string(ver)
	if pos+4+8+1+2 > len(p) {
		return nil, bad("too short")
	}
	g.ConnectionID = binary.LittleEndian.Uint32(p[pos:])
	pos += 4
	nonce := append([]byte(nil), p[pos:pos+8]...)
	pos += 9
	g.Capabilities = uint32(binary.LittleEndian.Uint16(p[pos:]))
	pos += 2
	if pos+16 <= len(p) {
		g.Collation = p[pos]
		g.Status = binary.LittleEndian.Uint16(p[pos+1:])
		g.Capabilities |= uint32(binary.LittleEndian.Uint16(p[pos+3:])) << 16
		authLen := int(p[pos+5])
		if g.Capabilities&CapabilityClientLongPassword == 0 {
			g.MariaDBCaps = binary.LittleEndian.Uint32(p[pos+12:])
		}
		pos += 16
		if g.Capabilities&CapabilityClientSecureConnection != 0 {
			n := max(13, authLen-8)
			if pos+n > len(p) {
				n = len(p) - pos
			}
			part := p[pos : pos+n]
			part = bytes.TrimRight(part, "\x00")
			nonce = append(nonce, part...)
			pos += n
		}
		if g.Capabilities&CapabilityClientPluginAuth != 0 && pos < len(p) {
			name, _, ok := ReadNulString(p, pos)
			if !ok {
				name = p[pos:]
			}
			g.Plugin = string(name)
		}
	}
	g.Nonce = nonce
	return g, nil
}

// HandshakeResponse is the client's answer to the greeting.
type HandshakeResponse struct {
	Capabilities uint32
	MaxPacket    uint32
	Collation    byte
	User         string
	AuthResponse []byte
	DB           string
	Plugin       string
	Attrs        map[string]string
	// MariaDBCaps are MariaDB's extended capabilities, in the last 4
	// bytes of the filler when CLIENT_MYSQL is clear in Capabilities.
	MariaDBCaps uint32
}

// IsSSLRequest reports whether p is the short SSL request that precedes TLS.
func IsSSLRequest(p []byte) bool {
	return len(p) == 32 && binary.LittleEndian.Uint32(p)&CapabilityClientSSL != 0
}

// ParseHandshakeResponse decodes a HandshakeResponse41 payload.
func ParseHandshakeResponse(p []byte) (*HandshakeResponse, error) {
	bad := func(what string) error { return fmt.Errorf("%w: handshake response %s", ErrMalformed, what) }
	if len(p) < 32 {
		return nil, bad("too short")
	}
	r := &HandshakeResponse{}
	r.Capabilities = binary.LittleEndian.Uint32(p)
	if r.Capabilities&CapabilityClientProtocol41 == 0 {
		return nil, fmt.Errorf("client does not speak protocol 4.1; Vigil needs CLIENT_PROTOCOL_41")
	}
	r.MaxPacket = binary.LittleEndian.Uint32(p[4:])
	r.Collation = p[8]
	if r.Capabilities&CapabilityClientLongPassword == 0 {
		r.MariaDBCaps = binary.LittleEndian.Uint32(p[28:])
	}
	pos := 32
	user, pos, ok := ReadNulString(p, pos)
	if !ok {
		return nil, bad("user name")
	}
	r.User = string(user)
	switch {
	case r.Capabilities&CapabilityClientPluginAuthLenencClientData != 0:
		var a []byte
		if a, pos, ok = ReadLenEncString(p, pos); !ok {
			return nil, bad("auth data")
		}
		r.AuthResponse = a
	case r.Capabilities&CapabilityClientSecureConnection != 0:
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			return nil, bad("auth data")
		}
		n := int(p[pos])
		r.AuthResponse = p[pos+1 : pos+1+n]
		pos += 1 + n
	default:
		var a []byte
		if a, pos, ok = ReadNulString(p, pos); !ok {
			return nil, bad("auth data")
		}
		r.AuthResponse = a
	}
	r.AuthResponse = append([]byte(nil), r.AuthResponse...)
	if r.Capabilities&CapabilityClientConnectWithDB != 0 && pos < len(p) {
		var db []byte
		if db, pos, ok = ReadNulString(p, pos); !ok {
			return nil, bad("database")
		}
		r.DB = string(db)
	}
	if r.Capabilities&CapabilityClientPluginAuth != 0 && pos < len(p) {
		var pl []byte
		if pl, pos, ok = ReadNulString(p, pos); !ok {
			pl, pos = p[pos:], len(p)
		}
		r.Plugin = string(pl)
	}
	if r.Capabilities&CapabilityClientConnectAttrs != 0 && pos < len(p) {
		block, _, ok := ReadLenEncString(p, pos)
		if !ok {
			return nil, bad("connection attributes")
		}
		r.Attrs = map[string]string{}
		for q := 0; q < len(block); {
			k, nq, ok1 := ReadLenEncString(block, q)
			v, nq2, ok2 := ReadLenEncString(block, nq)
			if !ok1 || !ok2 {
				return nil, bad("connection attribute")
			}
			r.Attrs[string(k)] = string(v)
			q = nq2
		}
	}
	return r, nil
}

// AppendHandshakeResponse appends a HandshakeResponse41 payload.
func AppendHandshakeResponse(dst []byte, r *HandshakeResponse) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, r.Capabilities)
	dst = binary.LittleEndian.AppendUint32(dst, r.MaxPacket)
	dst = append(dst, r.Collation)
	dst = append(dst, make([]byte, 19)...)
	var ext uint32
	if r.Capabilities&CapabilityClientLongPassword == 0 {
		ext = r.MariaDBCaps
	}
	dst = binary.LittleEndian.AppendUint32(dst, ext)
	dst = append(dst, r.User...)
	dst = append(dst, 0)
	switch {
	case r.Capabilities&CapabilityClientPluginAuthLenencClientData != 0:
		dst = AppendLenEncString(dst, r.AuthResponse)
	case r.Capabilities&CapabilityClientSecureConnection != 0:
		dst = append(dst, byte(len(r.AuthResponse)))
		dst = append(dst, r.AuthResponse...)
	default:
		dst = append(dst, r.AuthResponse...)
		dst = append(dst, 0)
	}
	if r.Capabilities&CapabilityClientConnectWithDB != 0 {
		dst = append(dst, r.DB...)
		dst = append(dst, 0)
	}
	if r.Capabilities&CapabilityClientPluginAuth != 0 {
		dst = append(dst, r.Plugin...)
		dst = append(dst, 0)
	}
	if r.Capabilities&CapabilityClientConnectAttrs != 0 {
		dst = appendAttrs(dst, r.Attrs)
	}
	return dst
}

// appendAttrs appends a connection-attributes block (lenenc length, then
// lenenc key and value pairs).
func appendAttrs(dst []byte, attrs map[string]string) []byte {
	var block []byte
	for k, v := range attrs {
		block = AppendLenEncString(block, []byte(k))
		block = AppendLenEncString(block, []byte(v))
	}
	return AppendLenEncString(dst, block)
}

// AppendSSLRequest appends the 32-byte SSL request payload.
func AppendSSLRequest(dst []byte, caps uint32, collation byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, caps|CapabilityClientSSL)
	dst = binary.LittleEndian.AppendUint32(dst, DefaultMaxAllowedBytes)
	dst = append(dst, collation)
	return append(dst, make([]byte, 23)...)
}

// NewNonce returns 20 random printable bytes without NUL, as servers send.
func NewNonce() []byte {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		b[i] = b[i]&0x7f | 1
		if b[i] == '$' {
			b[i] = '#'
		}
	}
	return b
}

// ChangeUser is a COM_CHANGE_USER request.
type ChangeUser struct {
	User         string
	AuthResponse []byte
	DB           string
	// Collation is the client's character set and collation id; 0 when
	// the client did not send one.
	Collation uint16
	Plugin    string
	Attrs     map[string]string
	// PluginAuth: the client negotiated CLIENT_PLUGIN_AUTH, so it can
	// answer an auth switch.
	PluginAuth bool
}

// ParseChangeUser decodes a COM_CHANGE_USER packet (command byte
// included) from a client that negotiated caps. Everything after the auth
// data is optional, as old clients stop early. Missing or unreadable
// connection attributes are ignored (MariaDB refuses such a packet with
// 1047; being lenient costs nothing).
func ParseChangeUser(p []byte, caps uint32) (*ChangeUser, error) {
	bad := func(what string) error { return fmt.Errorf("%w: COM_CHANGE_USER %s", ErrMalformed, what) }
	if len(p) < 1 || p[0] != ComChangeUser {
		return nil, bad("command")
	}
	user, pos, ok := ReadNulString(p, 1)
	if !ok {
		return nil, bad("user name")
	}
	cu := &ChangeUser{User: string(user), PluginAuth: caps&CapabilityClientPluginAuth != 0}
	var auth []byte
	if caps&CapabilityClientSecureConnection != 0 {
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			return nil, bad("auth data")
		}
		auth = p[pos+1 : pos+1+int(p[pos])]
		pos += 1 + int(p[pos])
	} else if auth, pos, ok = ReadNulString(p, pos); !ok {
		return nil, bad("auth data")
	}
	cu.AuthResponse = append([]byte(nil), auth...)
	if pos < len(p) {
		var db []byte
		if db, pos, ok = ReadNulString(p, pos); !ok {
			return nil, bad("database")
		}
		cu.DB = string(db)
	}
	if pos+2 <= len(p) {
		cu.Collation = binary.LittleEndian.Uint16(p[pos:])
		pos += 2
	}
	if caps&CapabilityClientPluginAuth != 0 && pos < len(p) {
		pl, next, ok := ReadNulString(p, pos)
		if !ok {
			pl, next = p[pos:], len(p)
		}
		cu.Plugin, pos = string(pl), next
	}
	if caps&CapabilityClientConnectAttrs != 0 && pos < len(p) {
		if block, _, ok := ReadLenEncString(p, pos); ok {
			attrs := map[string]string{}
			for q := 0; q < len(block); {
				k, nq, ok1 := ReadLenEncString(block, q)
				v, nq2, ok2 := ReadLenEncString(block, nq)
				if !ok1 || !ok2 {
					break
				}
				attrs[string(k)] = string(v)
				q = nq2
			}
			cu.Attrs = attrs
		}
	}
	return cu, nil
}

// AppendChangeUser appends a COM_CHANGE_USER packet for cu, as a client
// that negotiated caps sends it: every optional field is written (an empty
// schema, collation 0), the plugin with CLIENT_PLUGIN_AUTH, the attributes
// with CLIENT_CONNECT_ATTRS when cu has any. With
// CLIENT_SECURE_CONNECTION the auth data is at most 255 bytes.
func AppendChangeUser(dst []byte, cu *ChangeUser, caps uint32) []byte {
	dst = append(append(dst, ComChangeUser), cu.User...)
	dst = append(dst, 0)
	if caps&CapabilityClientSecureConnection != 0 {
		auth := cu.AuthResponse
		if len(auth) > 255 {
			auth = auth[:255]
		}
		dst = append(append(dst, byte(len(auth))), auth...)
	} else {
		dst = append(append(dst, cu.AuthResponse...), 0)
	}
	dst = append(append(dst, cu.DB...), 0)
	dst = binary.LittleEndian.AppendUint16(dst, cu.Collation)
	if caps&CapabilityClientPluginAuth != 0 {
		dst = append(append(dst, cu.Plugin...), 0)
	}
	if caps&CapabilityClientConnectAttrs != 0 && cu.Attrs != nil {
		dst = appendAttrs(dst, cu.Attrs)
	}
	return dst
}
