package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/sandbox"
)

// vigilProc is a running `vigil run`.
type vigilProc struct {
	cmd    *exec.Cmd
	addr   string
	logf   string
	mu     sync.Mutex
	exited chan struct{}
}

// startVigil runs the vigil binary with cfgPath and waits until it accepts
// MySQL connections on addr. It is stopped at cleanup; its log is kept in
// the test artifacts when the test fails.
func startVigil(t testing.TB, cfgPath, addr string) *vigilProc {
	t.Helper()
	bin := BuildVigil(t)
	rememberAdminToken(cfgPath)
	logf := filepath.Join(filepath.Dir(cfgPath), "vigil-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".log")
	f, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath, "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	v := &vigilProc{cmd: cmd, addr: addr, logf: logf, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(v.exited) }()
	t.Cleanup(func() {
		v.stop()
		if t.Failed() {
			data, _ := os.ReadFile(logf)
			lines := strings.Split(string(data), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("vigil log tail (%s):\n%s", logf, strings.Join(lines, "\n"))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-v.exited:
			data, _ := os.ReadFile(logf)
			t.Fatalf("vigil exited at start:\n%s", data)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("vigil did not listen on %s within 20s", addr)
	return nil
}

func (v *vigilProc) stop() {
	if v.cmd.Process == nil {
		return
	}
	_ = v.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-v.exited:
	case <-time.After(10 * time.Second):
		_ = v.cmd.Process.Kill()
		<-v.exited
	}
}

func (v *vigilProc) pid() int { return v.cmd.Process.Pid }

// rssKiB is the resident memory of the process.
func rssKiB(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VmRSS:") {
			fs := strings.Fields(sc.Text())
			n, _ := strconv.ParseInt(fs[1], 10, 64)
			return n
		}
	}
	return -1
}

func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// nodeStatus reads a global status counter on a node over its socket.
func nodeStatus(t testing.TB, sb *sandbox.Sandbox, node, name string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := sb.SQL(ctx, node, "SHOW GLOBAL STATUS LIKE '"+name+"'")
	if err != nil {
		t.Fatalf("%s on %s: %v", name, node, err)
	}
	if len(rows) != 1 || len(rows[0]) != 2 {
		t.Fatalf("%s on %s: %v", name, node, rows)
	}
	n, _ := strconv.ParseInt(rows[0][1], 10, 64)
	return n
}

// enableUserStats turns on MariaDB's per-user statistics on every node:
// unlike Com_* counters, they do not count what the replication applier
// runs, so they show which server a client's statements reached.
func enableUserStats(t testing.TB, sb *sandbox.Sandbox, nodes []string) {
	t.Helper()
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := sb.SQL(ctx, n, "SET GLOBAL userstat = ON")
		cancel()
		if err != nil {
			t.Fatalf("userstat on %s: %v", n, err)
		}
	}
}

// counters snapshots, per node, the statements the app user ran there:
// "select" (SELECT_COMMANDS) and "write" (UPDATE_COMMANDS: INSERT, UPDATE,
// DELETE, REPLACE).
type counters map[string]map[string]int64

func readCounters(t testing.TB, sb *sandbox.Sandbox, nodes []string) counters {
	t.Helper()
	c := counters{}
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rows, err := sb.SQL(ctx, n, "SELECT IFNULL(SUM(SELECT_COMMANDS),0), IFNULL(SUM(UPDATE_COMMANDS),0) FROM information_schema.USER_STATISTICS WHERE USER = 'app'")
		cancel()
		if err != nil || len(rows) != 1 || len(rows[0]) != 2 {
			t.Fatalf("user statistics on %s: %v %v", n, rows, err)
		}
		sel, _ := strconv.ParseInt(rows[0][0], 10, 64)
		wr, _ := strconv.ParseInt(rows[0][1], 10, 64)
		c[n] = map[string]int64{"select": sel, "write": wr}
	}
	return c
}

func (c counters) delta(before counters, node, name string) int64 {
	return c[node][name] - before[node][name]
}

func mustExec(t testing.TB, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) sql.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

// selfSignedCert writes a certificate and key for 127.0.0.1 into dir.
func selfSignedCert(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vigil-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// freeAddr returns a loopback address with a port that was free just now
// and that no earlier call of this test binary returned: the kernel can
// hand a port just closed out again to the next Listen, and two parts of
// one test given the same port fail in confusing ways.
func freeAddr(t testing.TB) string {
	t.Helper()
	givenMu.Lock()
	defer givenMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		addr := ln.Addr().String()
		ln.Close()
		if !given[port] {
			given[port] = true
			return addr
		}
	}
	t.Fatal("no loopback port that was not handed out before, in 100 tries")
	return ""
}

var (
	givenMu sync.Mutex
	given   = map[int]bool{}
)
