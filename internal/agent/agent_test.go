package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer collects audit lines from the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls until the audit log contains every substring.
func (s *syncBuffer) waitFor(t *testing.T, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		out := s.String()
		missing := ""
		for _, sub := range subs {
			if !strings.Contains(out, sub) {
				missing = sub
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit log lacks %q:\n%s", missing, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testAgent is an agent on 127.0.0.1:0 whose server is not running (its
// socket does not exist), with certificates from a fresh CA.
type testAgent struct {
	cfg   *Config
	certs InitFiles
	audit *syncBuffer
	addr  string
	srv   *Server
}

func newCerts(t *testing.T) InitFiles {
	t.Helper()
	f, err := Init(InitOptions{Dir: filepath.Join(t.TempDir(), "certs")})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func startAgent(t *testing.T, edit func(*Config)) *testAgent {
	t.Helper()
	certs := newCerts(t)
	base := t.TempDir()
	datadir := filepath.Join(base, "data")
	if err := os.Mkdir(datadir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(datadir, "ibdata1"), []byte("precious"), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{
		Listen:   "127.0.0.1:0",
		TLS:      TLS{CA: certs.CA, Cert: certs.AgentCert, Key: certs.AgentKey},
		Datadir:  datadir,
		Server:   ServerLogin{Socket: filepath.Join(base, "no.sock")},
		Commands: Commands{Start: []string{"true"}, Stop: []string{"true"}, Timeout: 5 * time.Second},
	}
	if edit != nil {
		edit(cfg)
	}
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	srv, addr := serveTest(t, cfg, audit)
	return &testAgent{cfg: cfg, certs: certs, audit: audit, addr: addr, srv: srv}
}

// serveTest runs an agent of cfg on 127.0.0.1:0 until the test ends.
func serveTest(t *testing.T, cfg *Config, audit io.Writer) (*Server, string) {
	t.Helper()
	srv, err := NewServer(cfg, audit)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, ln.Addr().String()
}

func (a *testAgent) client(t *testing.T, token string) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Addr: a.addr, CA: a.certs.CA, Cert: a.certs.ClientCert, Key: a.certs.ClientKey, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestStatusWithClientCertificate(t *testing.T) {
	a := startAgent(t, nil)
	st, err := a.client(t, "").Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Running || st.Answering || st.Datadir != a.cfg.Datadir || st.DatadirBytes != int64(len("precious")) || st.FreeBytes <= 0 {
		t.Errorf("status = %+v", st)
	}
	a.audit.waitFor(t, `"op":"status"`, `"outcome":"ok"`, `"who":"CN=vigil,O=vigil"`)
}

// mTLS is mandatory: no client certificate, or one from another CA, is
// refused at the handshake, and the refusal is audited.
func TestRefusesWithoutValidClientCertificate(t *testing.T) {
	a := startAgent(t, nil)
	other := newCerts(t)
	pool, err := loadCA(a.certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	get := func(tc *tls.Config) error {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
		resp, err := hc.Get("https://" + a.addr + PathStatus)
		if err == nil {
			resp.Body.Close()
			return errors.New("status " + resp.Status)
		}
		return nil
	}
	if err := get(&tls.Config{RootCAs: pool}); err != nil {
		t.Errorf("without a client certificate: got an answer: %v", err)
	}
	foreign, err := tls.LoadX509KeyPair(other.ClientCert, other.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{foreign}}); err != nil {
		t.Errorf("with a certificate of another CA: got an answer: %v", err)
	}
	a.audit.waitFor(t, `"op":"connect"`, `"outcome":"refused"`, "certificate")
	// The server logs each handshake failure on its own goroutine.
	deadline := time.Now().Add(3 * time.Second)
	for strings.Count(a.audit.String(), `"op":"connect"`) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(a.audit.String(), `"op":"connect"`); n < 2 {
		t.Errorf("%d refused connections audited, want 2:\n%s", n, a.audit.String())
	}

	// And the client refuses an agent whose certificate another CA signed.
	c, err := NewClient(ClientConfig{Addr: a.addr, CA: other.CA, Cert: other.ClientCert, Key: other.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client trusting another CA: err = %v, want a certificate error", err)
	}
}

func TestToken(t *testing.T) {
	a := startAgent(t, func(c *Config) { c.Token = "s3cret" })
	for _, tok := range []string{"", "not-the-token"} {
		_, err := a.client(t, tok).Status(context.Background())
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Code != CodeUnauthorized {
			t.Errorf("token %q: err = %v, want 401 unauthorized", tok, err)
		}
	}
	if _, err := a.client(t, "s3cret").Status(context.Background()); err != nil {
		t.Errorf("right token: %v", err)
	}
	a.audit.waitFor(t, `"outcome":"refused"`, "bearer token")
	if strings.Contains(a.audit.String(), "s3cret") || strings.Contains(a.audit.String(), "not-the-token") {
		t.Errorf("the audit log shows a token:\n%s", a.audit.String())
	}
}

// A second mutating operation while one runs is refused with 409.
func TestOneMutationAtATime(t *testing.T) {
	a := startAgent(t, func(c *Config) { c.Commands.Stop = []string{"sleep", "1"} })
	c := a.client(t, "")
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() { _, err := c.Stop(ctx); errc <- err }()
	deadline := time.Now().Add(3 * time.Second)
	for a.srv.busyOp() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_, err := c.Cleanup(ctx)
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != CodeBusy || !strings.Contains(ae.Message, "stop") {
		t.Errorf("cleanup during stop: err = %v, want 409 busy naming stop", err)
	}
	if _, err := c.Restore(ctx, strings.NewReader("x"), RestoreOptions{}); !errors.As(err, &ae) || ae.Code != CodeBusy {
		t.Errorf("restore during stop: err = %v, want 409 busy", err)
	}
	if st, err := c.Status(ctx); err != nil || st.Busy != "stop" {
		t.Errorf("status during stop: busy %q, err %v", st.Busy, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := c.Cleanup(ctx); err != nil {
		t.Errorf("cleanup after stop: %v", err)
	}
	a.audit.waitFor(t, `"op":"cleanup"`, `"outcome":"refused"`, `"code":"busy"`, "one at a time")
}

// restore refuses under a salvage hold and without the space, and a
// stream that is not a backup leaves the datadir as it was.
func TestRestoreRefusalsLeaveDatadir(t *testing.T) {
	a := startAgent(t, nil)
	c := a.client(t, "")
	ctx := context.Background()
	intact := func(what string) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(a.cfg.Datadir, "ibdata1"))
		if err != nil || string(data) != "precious" {
			t.Errorf("%s: datadir changed: %q, %v", what, data, err)
		}
		if left, _ := filepath.Glob(a.cfg.Datadir + ".vigil-*"); len(left) > 0 {
			t.Errorf("%s: left %v", what, left)
		}
	}
	hold := a.cfg.salvageHoldPath()
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := c.Restore(ctx, strings.NewReader("x"), RestoreOptions{})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeSalvageHold || ae.Status != http.StatusConflict {
		t.Errorf("under a salvage hold: err = %v", err)
	}
	// A refusal reaches a client that is still sending a large stream.
	_, err = c.Restore(ctx, io.LimitReader(zeros{}, 256<<20), RestoreOptions{})
	if !errors.As(err, &ae) || ae.Code != CodeSalvageHold {
		t.Errorf("under a salvage hold, while streaming: err = %v", err)
	}
	intact("salvage hold")
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}

	_, err = c.Restore(ctx, strings.NewReader("x"), RestoreOptions{ExpectedSize: 1 << 60})
	if !errors.As(err, &ae) || ae.Code != CodeNoSpace || ae.Status != http.StatusInsufficientStorage {
		t.Errorf("too big: err = %v", err)
	}
	intact("no space")

	if _, err := lookPathOrSkip(t, "mbstream"); err == nil {
		garbage := bytes.Repeat([]byte("not an xbstream "), 10000)
		_, err = c.Restore(ctx, bytes.NewReader(garbage), RestoreOptions{})
		if !errors.As(err, &ae) || ae.Code != CodeFailed {
			t.Errorf("garbage: err = %v", err)
		}
		intact("garbage")
		_, err = c.Restore(ctx, strings.NewReader(""), RestoreOptions{})
		if err == nil {
			t.Errorf("empty stream: no error")
		}
		intact("empty")
	}
	a.audit.waitFor(t, `"code":"salvage_hold"`, `"code":"no_space"`, `"op":"restore"`, `"outcome":"failed"`, "mbstream -x: exit status")
}

// A request body that fails mid-way aborts the restore.
func TestRestoreAbortedStream(t *testing.T) {
	if _, err := lookPathOrSkip(t, "mbstream"); err != nil {
		return
	}
	a := startAgent(t, nil)
	c := a.client(t, "")
	r := io.MultiReader(strings.NewReader(strings.Repeat("x", 1<<20)), errReader{errors.New("donor died")})
	if _, err := c.Restore(context.Background(), r, RestoreOptions{}); err == nil {
		t.Fatal("restore of a cut stream succeeded")
	}
	// The client gives up first; the agent notices and cleans up.
	a.audit.waitFor(t, `"op":"restore"`, `"outcome":"failed"`)
	if left, _ := filepath.Glob(a.cfg.Datadir + ".vigil-*"); len(left) > 0 {
		t.Errorf("left %v", left)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func lookPathOrSkip(t *testing.T, name string) (string, error) {
	t.Helper()
	p, err := execLookPath(name)
	if err != nil {
		t.Logf("%s missing (scripts/install-deps.sh installs it): part of the test skipped", name)
	}
	return p, err
}

// The client takes a backup stream as a success only with the agent's
// "ok" trailer.
func TestBackupNeedsOKTrailer(t *testing.T) {
	certs := newCerts(t)
	tc, err := serverTLS(TLS{CA: certs.CA, Cert: certs.AgentCert, Key: certs.AgentKey})
	if err != nil {
		t.Fatal(err)
	}
	mode := ""
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Trailer", TrailerOK+", "+TrailerErr)
		_, _ = w.Write([]byte("some bytes"))
		switch mode {
		case "ok":
			w.Header().Set(TrailerOK, "ok")
		case "error":
			w.Header().Set(TrailerErr, "mariadb-backup: exit status 1: disk full")
		}
	}))
	srv.TLS = tc
	srv.StartTLS()
	defer srv.Close()
	c, err := NewClient(ClientConfig{Addr: srv.Listener.Addr().String(), CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct{ mode, wantErr string }{
		{"ok", ""}, {"error", "disk full"}, {"", "no outcome"},
	} {
		mode = tc.mode
		var out bytes.Buffer
		n, err := c.Backup(context.Background(), &out, BackupOptions{})
		if n != int64(len("some bytes")) || out.String() != "some bytes" {
			t.Errorf("%q: got %d bytes %q", tc.mode, n, out.String())
		}
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%q: err = %v, want %q", tc.mode, err, tc.wantErr)
		}
	}
}

func TestRunBackupReportsExitAndStderr(t *testing.T) {
	s := &Server{cfg: &Config{Binaries: Binaries{MariadbBackup: "sh"}}}
	var out bytes.Buffer
	n, err := s.runBackup(context.Background(), []string{"-c", "printf abc; echo line1 >&2; echo boom >&2; exit 3"}, &out)
	if n != 3 || out.String() != "abc" || err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "line1 | boom") {
		t.Errorf("n=%d out=%q err=%v", n, out.String(), err)
	}
}

func TestInitFiles(t *testing.T) {
	f := newCerts(t)
	for _, p := range []string{f.CA, f.CAKey, f.AgentCert, f.AgentKey, f.ClientCert, f.ClientKey} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", p, st.Mode(), err)
		}
	}
	if _, err := Init(InitOptions{Dir: filepath.Dir(f.CA)}); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("second init: %v", err)
	}
}

func TestBinlogInfo(t *testing.T) {
	var r RestoreResult
	parseBinlogInfo("mysql-bin.000002\t1234\t0-1-17,1-2-3\n", &r)
	if r.BinlogFile != "mysql-bin.000002" || r.BinlogPos != 1234 || r.GTID != "0-1-17,1-2-3" {
		t.Errorf("%+v", r)
	}
	if g := gtidFromSlaveInfo("SET GLOBAL gtid_slave_pos = '0-1-5';\nCHANGE MASTER TO master_use_gtid = slave_pos"); g != "0-1-5" {
		t.Errorf("slave info gtid %q", g)
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 10}
	for i := 0; i < 100; i++ {
		_, _ = tb.Write([]byte("abcdefgh\n"))
	}
	if len(tb.b) != 10 {
		t.Errorf("kept %d bytes", len(tb.b))
	}
}

// A stream that names files outside its directory writes nothing there:
// mbstream skips such names, and the restore fails at prepare.
func TestRestoreStreamCannotEscape(t *testing.T) {
	if _, err := lookPathOrSkip(t, "mbstream"); err != nil {
		return
	}
	a := startAgent(t, nil)
	src := filepath.Join(t.TempDir(), "in")
	if err := os.Mkdir(src, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(src), "escaped"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "xtrabackup_checkpoints"), []byte("backup_type = log-applied\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := execCommand("mbstream", "-c", "xtrabackup_checkpoints", "../escaped")
	cmd.Dir = src
	stream, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.client(t, "").Restore(context.Background(), bytes.NewReader(stream), RestoreOptions{})
	if err == nil {
		t.Fatal("a hand-made stream was restored")
	}
	t.Logf("refused: %v", err)
	base := filepath.Dir(a.cfg.Datadir)
	if _, err := os.Stat(filepath.Join(base, "escaped")); err == nil {
		t.Errorf("the stream wrote %s", filepath.Join(base, "escaped"))
	}
	if left, _ := filepath.Glob(a.cfg.Datadir + ".vigil-*"); len(left) > 0 {
		t.Errorf("left %v", left)
	}
}
