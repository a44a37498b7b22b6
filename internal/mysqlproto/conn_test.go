package mysqlproto

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

func pipe(t testing.TB) (*Conn, *Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	t.Cleanup(func() { a.Close(); b.Close() })
	return NewConn(a), NewConn(b)
}

func TestPacketRoundTrip(t *testing.T) {
	a, b := pipe(t)
	sizes := []int{0, 1, 100, defaultReadBuf - 4, defaultReadBuf, defaultReadBuf + 10, MaxPayload - 1, MaxPayload, MaxPayload + 5, 2*MaxPayload + 3}
	var payloads [][]byte
	for _, n := range sizes {
		payloads = append(payloads, bytes.Repeat([]byte{byte(n)}, n))
	}
	sendPackets(t, a, payloads...)
	for _, n := range sizes {
		b.Seq = 0
		p, err := b.ReadPacket()
		if err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
		if len(p) != n || (n > 0 && (p[0] != byte(n) || p[n-1] != byte(n))) {
			t.Fatalf("size %d: got %d bytes", n, len(p))
		}
	}
}

func TestSequenceMismatch(t *testing.T) {
	a, b := pipe(t)
	a.Seq = 3
	_ = a.WritePacket([]byte("x"))
	_ = a.Flush()
	b.Seq = 0
	if _, err := b.ReadPacket(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("want ErrMalformed, got %v", err)
	}
}

func TestPacketTooLarge(t *testing.T) {
	a, b := pipe(t)
	b.MaxPacket = MaxPayload + 10
	go func() {
		_ = a.WritePacket(make([]byte, MaxPayload+100))
		_ = a.Flush()
	}()
	if _, err := b.ReadPacket(); !errors.Is(err, ErrPacketTooLarge) {
		t.Fatalf("want ErrPacketTooLarge, got %v", err)
	}
}

func TestOKParseAndStrip(t *testing.T) {
	// OK with session state: status has SERVER_SESSION_STATE_CHANGED.
	var state []byte
	var entry []byte
	entry = AppendLenEncString(entry, []byte("autocommit"))
	entry = AppendLenEncString(entry, []byte("OFF"))
	state = append(state, SessionTrackSystemVariables)
	state = AppendLenEncString(state, entry)
	state = append(state, SessionTrackSchema)
	state = AppendLenEncString(state, AppendLenEncString(nil, []byte("db1")))
	p := AppendOK(nil, 3, 7, ServerStatusAutocommit|ServerSessionStateChanged, 1)
	p = AppendLenEncString(p, []byte("info text"))
	p = AppendLenEncString(p, state)
	ok, good := ParseOK(p, true)
	if !good || ok.AffectedRows != 3 || ok.LastInsertID != 7 || string(ok.Info) != "info text" || !ok.Tail {
		t.Fatalf("bad parse: %+v %v", ok, good)
	}
	var got []string
	if err := EachSessionChange(ok.SessionState, func(c SessionChange) {
		got = append(got, string(c.Name)+"="+string(c.Value))
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "autocommit=OFF" || got[1] != "db1=" {
		t.Fatalf("changes: %v", got)
	}
	stripped := StripSessionState(nil, p, ok)
	ok2, good := ParseOK(stripped, false)
	if !good || ok2.Status&ServerSessionStateChanged != 0 || ok2.AffectedRows != 3 {
		t.Fatalf("stripped: %+v", ok2)
	}
	// The info text stays length-encoded, as the server sends it to a
	// client without session tracking (mysqlnd reads it so).
	if want := "\x09info text"; string(ok2.Info) != want {
		t.Fatalf("stripped info %q, want %q", ok2.Info, want)
	}
	empty := AppendOK(nil, 1, 0, ServerStatusAutocommit|ServerSessionStateChanged, 0)
	empty = AppendLenEncString(empty, nil)
	empty = AppendLenEncString(empty, state)
	ok3, _ := ParseOK(empty, true)
	if got, want := StripSessionState(nil, empty, ok3), AppendOK(nil, 1, 0, ServerStatusAutocommit, 0); string(got) != string(want) {
		t.Fatalf("stripped OK without info: %x, want %x", got, want)
	}
}

func TestHandshakeNativeAndSha2(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]Credentials{"app": {Plain: "secret"}, "hashed": {NativeHash: nativeHash("pw2")}}
	cache := &ShaCache{}
	cfg := &ServerConfig{ServerVersion: "10.11.6-MariaDB-vigil", RSAKey: key, ShaCache: cache,
		Lookup: func(u string) (Credentials, bool) { c, ok := users[u]; return c, ok }}
	cases := []struct {
		name, user, pass, plugin string
		wantErr                  bool
	}{
		{"native ok", "app", "secret", AuthNativePassword, false},
		{"native wrong", "app", "nope", AuthNativePassword, true},
		{"unknown user", "ghost", "x", AuthNativePassword, true},
		{"hashed ok", "hashed", "pw2", AuthNativePassword, false},
		{"sha2 full auth via RSA", "app", "secret", AuthCachingSha2, false},
		{"sha2 fast path", "app", "secret", AuthCachingSha2, false},
		{"sha2 wrong", "app", "bad", AuthCachingSha2, true},
		{"sha2 for hashed user switches to native", "hashed", "pw2", AuthCachingSha2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan error, 1)
			go func() {
				nc, err := ln.Accept()
				if err != nil {
					done <- err
					return
				}
				defer nc.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err = NewConn(nc).Accept(ctx, cfg, 42, "127.0.0.1")
				done <- err
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, g, err := dialPlugin(ctx, ln.Addr().String(), tc.user, tc.pass, tc.plugin)
			serr := <-done
			if tc.wantErr {
				if err == nil {
					t.Fatal("client: expected access denied")
				}
				var se *SQLError
				if !errors.As(err, &se) || se.Code != ERAccessDeniedError {
					t.Fatalf("client: want 1045, got %v", err)
				}
				if !errors.Is(serr, ErrAccessDenied) {
					t.Fatalf("server: want ErrAccessDenied, got %v", serr)
				}
				return
			}
			if err != nil || serr != nil {
				t.Fatalf("client %v, server %v", err, serr)
			}
			c.Close()
			if g.ConnectionID != 42 || g.ServerVersion != "10.11.6-MariaDB-vigil" {
				t.Fatalf("greeting %+v", g)
			}
		})
	}
}

// dialPlugin is Dial with the client's first scramble forced to plugin.
func dialPlugin(ctx context.Context, addr, user, pass, plugin string) (*Conn, *Greeting, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	c := NewConn(nc)
	c.forcePlugin = plugin
	g, err := c.handshakeClient(ctx, &DialConfig{Addr: addr, User: user, Password: pass})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, g, nil
}

func FuzzReadPacket(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0, 1, 2})
	f.Add([]byte{5, 0, 0, 1, 1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go func() { _, _ = a.Write(data); a.Close() }()
		c := NewConn(b)
		c.MaxPacket = 1 << 20
		for range 4 {
			p, err := c.ReadPacket()
			if err != nil {
				return
			}
			if len(p) > 1<<20+MaxPayload {
				t.Fatalf("packet beyond limit: %d", len(p))
			}
			_, _ = ParseOK(p, true)
			_ = ParseErr(p)
		}
	})
}

func FuzzHandshakeResponse(f *testing.F) {
	r := &HandshakeResponse{Capabilities: ServerCapabilities, MaxPacket: 1 << 24, Collation: 45, User: "app",
		AuthResponse: []byte("01234567890123456789"), DB: "db", Plugin: AuthNativePassword, Attrs: map[string]string{"a": "b"}}
	f.Add(AppendHandshakeResponse(nil, r))
	f.Add(AppendSSLRequest(nil, ServerCapabilities, 45))
	g := &Greeting{ServerVersion: "10.11", ConnectionID: 1, Capabilities: ServerCapabilities, Collation: 45, Nonce: NewNonce(), Plugin: AuthNativePassword}
	f.Add(AppendGreeting(nil, g))
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := ParseHandshakeResponse(data); err == nil {
			again, err := ParseHandshakeResponse(AppendHandshakeResponse(nil, r))
			if err != nil || again.User != r.User || !bytes.Equal(again.AuthResponse, r.AuthResponse) {
				t.Fatalf("round trip: %v %+v %+v", err, r, again)
			}
		}
		_, _ = ParseGreeting(data)
		_ = EachSessionChange(data, func(SessionChange) {})
	})
}

func TestFilterSessionState(t *testing.T) {
	entry := func(typ byte, data []byte) []byte {
		return AppendLenEncString([]byte{typ}, data)
	}
	sysvar := func(n, v string) []byte {
		return entry(SessionTrackSystemVariables, AppendLenEncString(AppendLenEncString(nil, []byte(n)), []byte(v)))
	}
	var block []byte
	block = append(block, sysvar("autocommit", "OFF")...)
	block = append(block, sysvar("last_gtid", "0-1-5")...)
	block = append(block, entry(SessionTrackStateChange, AppendLenEncString(nil, []byte("1")))...)
	block = append(block, entry(SessionTrackSchema, AppendLenEncString(nil, []byte("db1")))...)
	mk := func(info string, block []byte) ([]byte, OK) {
		p := AppendOK(nil, 2, 9, ServerStatusAutocommit|ServerSessionStateChanged, 1)
		p = AppendLenEncString(p, []byte(info))
		p = AppendLenEncString(p, block)
		ok, good := ParseOK(p, true)
		if !good {
			t.Fatal("parse")
		}
		return p, ok
	}
	changes := func(p []byte) (names []string, status uint16, info string) {
		ok, good := ParseOK(p, true)
		if !good {
			t.Fatalf("filtered OK does not parse: %x", p)
		}
		_ = EachSessionChange(ok.SessionState, func(c SessionChange) {
			names = append(names, fmt.Sprintf("%d:%s", c.Type, c.Name))
		})
		return names, ok.Status, string(ok.Info)
	}
	p, ok := mk("", block)
	def := &TrackFilter{Vars: DefaultTrackVars, Schema: true}
	out, changed := FilterSessionState(nil, p, ok, def)
	if got, st, _ := changes(out); !changed || fmt.Sprint(got) != "[0:autocommit 1:db1]" || st&ServerSessionStateChanged == 0 {
		t.Fatalf("default tracking kept %v (status %#x)", got, st)
	}
	all := &TrackFilter{AllVars: true, Schema: true, StateChange: true}
	if _, changed := FilterSessionState(nil, p, ok, all); changed {
		t.Fatal("tracking everything must keep the packet as it is")
	}
	// Nothing left: no state block, no flag, no empty info.
	p2, ok2 := mk("", append(sysvar("last_gtid", "0-1-6"), entry(SessionTrackStateChange, AppendLenEncString(nil, []byte("1")))...))
	out, changed = FilterSessionState(nil, p2, ok2, def)
	if want := AppendOK(nil, 2, 9, ServerStatusAutocommit, 1); !changed || string(out) != string(want) {
		t.Fatalf("all dropped: %x, want %x", out, want)
	}
	// The info text stays.
	p3, ok3 := mk("Rows matched: 1", sysvar("last_gtid", "0-1-7"))
	out, _ = FilterSessionState(nil, p3, ok3, def)
	if got, st, info := changes(out); len(got) != 0 || st&ServerSessionStateChanged != 0 || info != "Rows matched: 1" {
		t.Fatalf("info kept: %v %#x %q", got, st, info)
	}
	// A long block (length takes 3 bytes) survives the move.
	var big []byte
	for i := range 40 {
		big = append(big, sysvar(fmt.Sprintf("var_%02d_with_a_long_name_for_size", i), "value")...)
	}
	big = append(big, sysvar("time_zone", "+01:00")...)
	p4, ok4 := mk("", big)
	out, _ = FilterSessionState(nil, p4, ok4, def)
	if got, _, _ := changes(out); fmt.Sprint(got) != "[0:time_zone]" {
		t.Fatalf("long block: %v", got)
	}
	keepAll := &TrackFilter{Vars: []string{"var_03_with_a_long_name_for_size", "time_zone"}}
	out, _ = FilterSessionState(nil, p4, ok4, keepAll)
	if got, _, _ := changes(out); fmt.Sprint(got) != "[0:var_03_with_a_long_name_for_size 0:time_zone]" {
		t.Fatalf("long block, two kept: %v", got)
	}
}
