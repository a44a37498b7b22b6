package agent_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/sandbox"
)

const testBinary = "/tmp/vigil-agent-test/vigil"

// itSandbox is a 2-node replication sandbox run through the vigil binary,
// with one in-process agent per node.
type itSandbox struct {
	t      *testing.T
	bin    string
	dir    string
	m      sandbox.Manifest
	certs  agent.InitFiles
	audits map[string]*agent.SyncBuffer
}

func requireIntegration(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: real mariadbd sandboxes (run without -short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("the sandbox runs as root")
	}
	for _, p := range []string{"mariadbd", "mariadb-backup", "mbstream"} {
		if _, err := exec.LookPath(p); err != nil {
			if _, err := os.Stat("/usr/sbin/" + p); err != nil {
				t.Skipf("%s missing (scripts/install-deps.sh)", p)
			}
		}
	}
}

func buildVigil(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", testBinary, "./cmd/vigil")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return testBinary
}

func (s *itSandbox) vigil(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.bin, args...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("vigil %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func upSandbox(t *testing.T) *itSandbox {
	t.Helper()
	bin := buildVigil(t)
	dir, err := os.MkdirTemp("", "vigil-agent-it-")
	if err != nil {
		t.Fatal(err)
	}
	s := &itSandbox{t: t, bin: bin, dir: dir, audits: map[string]*agent.SyncBuffer{}}
	t.Cleanup(func() {
		if out, err := exec.Command(bin, "sandbox", "down", "--dir", dir, "--purge").CombinedOutput(); err != nil {
			t.Errorf("sandbox down: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	out := s.vigil("sandbox", "up", "--dir", dir, "--nodes", "2", "--json")
	if err := json.Unmarshal([]byte(out), &s.m); err != nil {
		t.Fatalf("sandbox up --json: %v\n%s", err, out)
	}
	if s.certs, err = agent.Init(agent.InitOptions{Dir: filepath.Join(dir, "agent-certs")}); err != nil {
		t.Fatal(err)
	}
	return s
}

// startAgent runs node's agent in this process and returns its client.
func (s *itSandbox) startAgent(node sandbox.Node) *agent.Client {
	t := s.t
	t.Helper()
	cfg, err := agent.ParseConfig(fmt.Appendf(nil, `
listen: 127.0.0.1:0
tls: {ca: %q, cert: %q, key: %q}
datadir: %q
pid_file: %q
server: {socket: %q, user: root}
commands:
  start: [%q, sandbox, start, %s, --dir, %q]
  stop: [%q, sandbox, stop, %s, --dir, %q]
  timeout: 60s
tmp_dir: %q
`, s.certs.CA, s.certs.AgentCert, s.certs.AgentKey, node.Datadir, node.PIDFile, node.Socket,
		s.bin, node.Name, s.dir, s.bin, node.Name, s.dir, s.dir))
	if err != nil {
		t.Fatal(err)
	}
	audit := &agent.SyncBuffer{}
	s.audits[node.Name] = audit
	return s.serve(cfg, audit)
}

// serve runs an agent of cfg in this process until the test ends and
// returns a client with the sandbox's client certificate.
func (s *itSandbox) serve(cfg *agent.Config, audit io.Writer) *agent.Client {
	t := s.t
	t.Helper()
	addr := agent.ServeTest(t, cfg, audit)
	c, err := agent.NewClient(agent.ClientConfig{Addr: addr, CA: s.certs.CA, Cert: s.certs.ClientCert, Key: s.certs.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (s *itSandbox) db(node sandbox.Node) *sql.DB {
	s.t.Helper()
	db, err := sql.Open("mysql", sandbox.TCPDSN(node.Addr(), s.m.Accounts.App.User, s.m.Accounts.App.Password, "")+"?timeout=5s")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = db.Close() })
	return db
}

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM vigil_test.rows_t").Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func insert(t *testing.T, db *sql.DB, from, to int) {
	t.Helper()
	for i := from; i < to; i += 100 {
		var b strings.Builder
		b.WriteString("INSERT INTO vigil_test.rows_t (id, v) VALUES ")
		for j := i; j < min(i+100, to); j++ {
			if j > i {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "(%d, REPEAT('x', 200))", j)
		}
		if _, err := db.Exec(b.String()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloneThroughAgents backs the primary up through its agent into a
// restore on the replica's agent (stop, swap, start), points the replica
// at the primary from the backup's GTID, and checks rows and replication;
// then that a garbage or cut stream leaves the replica as it was, and that
// the writable primary refuses a restore.
func TestCloneThroughAgents(t *testing.T) {
	requireIntegration(t)
	s := upSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n1, n2 := s.m.Nodes[0], s.m.Nodes[1]
	a1, a2 := s.startAgent(n1), s.startAgent(n2)
	p, r := s.db(n1), s.db(n2)
	if _, err := p.Exec("CREATE TABLE vigil_test.rows_t (id INT PRIMARY KEY, v VARCHAR(255))"); err != nil {
		t.Fatal(err)
	}
	insert(t, p, 0, 5000)
	// VIGIL_AGENT_TEST_MB=N adds N MB of incompressible rows, for numbers
	// on more than the system tablespaces.
	if mb, _ := strconv.Atoi(os.Getenv("VIGIL_AGENT_TEST_MB")); mb > 0 {
		fill(t, p, mb)
	}

	st, err := a1.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || !st.Answering || st.ReadOnly || st.Replica || st.MariadbBackup == "" || st.Mbstream == "" || !strings.Contains(st.Version, "MariaDB") {
		t.Fatalf("primary's status: %+v", st)
	}
	st2, err := a2.Status(ctx)
	if err != nil || !st2.ReadOnly || !st2.Replica {
		t.Fatalf("replica's status: %+v, %v", st2, err)
	}
	// The replica drifts a little from the primary so the restore visibly
	// replaces its datadir: stop its replication first.
	if _, err := r.Exec("STOP SLAVE"); err != nil {
		t.Fatal(err)
	}

	// The writable primary refuses to be overwritten.
	_, err = a1.Restore(ctx, strings.NewReader("anything"), agent.RestoreOptions{})
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != agent.CodeWritable {
		t.Fatalf("restore onto the writable primary: err = %v, want code writable", err)
	}

	// Raw pipe, for comparison: mariadb-backup straight to /dev/null.
	t0 := time.Now()
	raw := exec.CommandContext(ctx, "mariadb-backup", "--no-defaults", "--backup", "--stream=xbstream", "--user=root",
		"--socket="+n1.Socket, "--target-dir="+filepath.Join(s.dir, "raw-target"))
	var rawOut countWriter
	raw.Stdout = &rawOut
	if out, err := func() ([]byte, error) { var e bytes.Buffer; raw.Stderr = &e; err := raw.Run(); return e.Bytes(), err }(); err != nil {
		t.Fatalf("raw mariadb-backup: %v\n%s", err, lastLines(string(out), 10))
	}
	rawTook := time.Since(t0)
	// And the physical limit of a clone here: backup piped into mbstream -x
	// on the same disk, no network, no prepare.
	extractDir := filepath.Join(s.dir, "raw-extract")
	if err := os.Mkdir(extractDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	pipe := exec.CommandContext(ctx, "sh", "-c", `mariadb-backup --no-defaults --backup --stream=xbstream --user=root --socket="$1" --target-dir="$2" 2>/dev/null | mbstream -x -C "$3"`,
		"sh", n1.Socket, filepath.Join(s.dir, "raw-target-pipe"), extractDir)
	if out, err := pipe.CombinedOutput(); err != nil {
		t.Fatalf("raw pipe into mbstream: %v\n%s", err, out)
	}
	pipeTook := time.Since(t0)
	_ = os.RemoveAll(extractDir)

	// The clone.
	t0 = time.Now()
	res, sent, err := agent.Clone(ctx, a1, a2, agent.BackupOptions{}, agent.RestoreOptions{ExpectedSize: rawOut.n})
	if err != nil {
		t.Fatalf("clone: %v\naudit node1:\n%s\naudit node2:\n%s", err, s.audits[n1.Name], s.audits[n2.Name])
	}
	cloneTook := time.Since(t0)
	t.Logf("raw backup to a pipe: %d bytes in %v (%.1f MB/s); raw backup | mbstream -x: %v; through the agents (backup+extract+prepare+swap+start): %d bytes in %v; restore phases: extract %.2fs prepare %.2fs swap %.2fs",
		rawOut.n, rawTook, float64(rawOut.n)/rawTook.Seconds()/1e6, pipeTook, sent, cloneTook, res.ExtractSeconds, res.PrepareSeconds, res.SwapSeconds)
	if res.GTID == "" || res.BytesReceived != sent || !strings.Contains(res.OldDatadir, ".vigil-old-") {
		t.Fatalf("restore result: %+v (sent %d)", res, sent)
	}
	if _, err := os.Stat(res.OldDatadir); err != nil {
		t.Errorf("old datadir: %v", err)
	}
	if want, got := ownerUID(t, res.OldDatadir), ownerUID(t, filepath.Join(n2.Datadir, "ibdata1")); got != want {
		t.Errorf("restored ibdata1 is owned by uid %d, want %d (the old datadir's)", got, want)
	}

	// Point the restored replica at the primary from the backup's GTID.
	for _, q := range []string{
		"STOP SLAVE", "RESET SLAVE ALL",
		fmt.Sprintf("SET GLOBAL gtid_slave_pos = '%s'", res.GTID),
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			n1.Host, n1.Port, s.m.Accounts.Repl.User, s.m.Accounts.Repl.Password),
		"START SLAVE",
	} {
		if _, err := r.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if n := count(t, r); n != 5000 {
		t.Errorf("restored replica has %d rows, want 5000", n)
	}
	insert(t, p, 5000, 6000)
	waitRows(t, r, 6000)

	// A cut stream: a real backup (in a file, so memory stays bounded
	// whatever the dataset), half of it.
	backupPath := filepath.Join(s.dir, "node1.xbstream")
	bf, err := os.Create(backupPath)
	if err != nil {
		t.Fatal(err)
	}
	fullSize, err := a1.Backup(ctx, bf, agent.BackupOptions{})
	if cerr := bf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for name, stream := range map[string]func() io.Reader{
		"garbage": func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte("garbage!"), 1<<16)) },
		"cut":     func() io.Reader { return io.LimitReader(openFile(t, backupPath), fullSize/2) },
	} {
		_, err := a2.Restore(ctx, stream(), agent.RestoreOptions{})
		if err == nil {
			t.Fatalf("%s stream: restore succeeded", name)
		}
		t.Logf("%s stream refused: %v", name, err)
		st, err := a2.Status(ctx)
		if err != nil || !st.Answering {
			t.Fatalf("%s stream: the replica no longer answers: %+v %v", name, st, err)
		}
		if left, _ := filepath.Glob(n2.Datadir + ".vigil-new-*"); len(left) > 0 {
			t.Errorf("%s stream: left %v", name, left)
		}
		insert(t, p, 6000+1000*len(name), 6000+1000*len(name)+10)
	}
	waitRows(t, r, 6020)
	if _, err := os.Stat(res.OldDatadir); err != nil {
		t.Errorf("the old datadir went away without a cleanup: %v", err)
	}

	// A restored datadir that does not start is swapped back out: an agent
	// on a scratch datadir whose start command fails.
	s.rollbackCheck(ctx, backupPath)

	// Warm numbers, interleaved (mariadb-backup's redo copier polls once a
	// second, so single runs vary by about that): the raw pipe and a
	// backup through the agent, three of each.
	var rawTimes, agentTimes []time.Duration
	var rawBytes, agentBytes int64
	for i := range 3 {
		t0 = time.Now()
		raw = exec.CommandContext(ctx, "mariadb-backup", "--no-defaults", "--backup", "--stream=xbstream", "--user=root",
			"--socket="+n1.Socket, "--target-dir="+filepath.Join(s.dir, fmt.Sprintf("raw-target-%d", i)))
		rawOut = countWriter{}
		raw.Stdout = &rawOut
		if err := raw.Run(); err != nil {
			t.Fatal(err)
		}
		rawTimes, rawBytes = append(rawTimes, time.Since(t0)), rawOut.n
		t0 = time.Now()
		var viaAgent countWriter
		if _, err := a1.Backup(ctx, &viaAgent, agent.BackupOptions{}); err != nil {
			t.Fatal(err)
		}
		agentTimes, agentBytes = append(agentTimes, time.Since(t0)), viaAgent.n
	}
	t.Logf("warm backups of the primary: raw mariadb-backup --stream %d bytes in %v; through the agent (mTLS, HTTP) %d bytes in %v",
		rawBytes, rawTimes, agentBytes, agentTimes)

	// A throttled backup takes at least size/rate.
	rate := fullSize / 2 // about 2 s
	t0 = time.Now()
	if _, err := a2.Backup(ctx, io.Discard, agent.BackupOptions{Rate: rate}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < 1500*time.Millisecond {
		t.Errorf("backup at %d B/s of about %d bytes took %v", rate, fullSize, took)
	} else {
		t.Logf("throttled backup of the replica at %d B/s: %v", rate, took)
	}

	cl, err := a2.Cleanup(ctx)
	if err != nil || len(cl.Removed) != 1 || cl.Removed[0] != res.OldDatadir {
		t.Errorf("cleanup: %+v %v", cl, err)
	}
	for _, name := range []string{n1.Name, n2.Name} {
		if strings.Contains(s.audits[name].String(), s.m.Accounts.App.Password+`"`) {
			t.Errorf("audit of %s shows a password", name)
		}
	}
	if a := s.audits[n2.Name].String(); !strings.Contains(a, `"op":"restore"`) || !strings.Contains(a, `"op":"cleanup"`) {
		t.Errorf("node2's audit:\n%s", a)
	}
}

// rollbackCheck restores a good backup onto a scratch datadir whose
// server does not start: the agent must put the old datadir back.
func (s *itSandbox) rollbackCheck(ctx context.Context, backup string) {
	t := s.t
	t.Helper()
	base := t.TempDir()
	datadir := filepath.Join(base, "data")
	if err := os.Mkdir(datadir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(datadir, "marker"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := agent.ParseConfig(fmt.Appendf(nil, `
listen: 127.0.0.1:0
tls: {ca: %q, cert: %q, key: %q}
datadir: %q
server: {socket: %q}
commands: {start: [sh, -c, "echo cannot start >&2; exit 1"], stop: ["true"], timeout: 5s}
`, s.certs.CA, s.certs.AgentCert, s.certs.AgentKey, datadir, filepath.Join(base, "none.sock")))
	if err != nil {
		t.Fatal(err)
	}
	c := s.serve(cfg, io.Discard)
	_, err = c.Restore(ctx, openFile(t, backup), agent.RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "old one is back in place") {
		t.Fatalf("restore with a failing start: err = %v", err)
	}
	t.Logf("failing start rolled back: %v", err)
	if data, err := os.ReadFile(filepath.Join(datadir, "marker")); err != nil || string(data) != "old" {
		t.Errorf("the old datadir is not back: %q %v", data, err)
	}
	if failed, _ := filepath.Glob(datadir + ".vigil-failed-*"); len(failed) != 1 {
		t.Errorf("the restored datadir was not kept aside: %v", failed)
	}
}

// fill writes mb MB of 64 KiB random-ish rows on the primary.
func fill(t *testing.T, db *sql.DB, mb int) {
	t.Helper()
	t0 := time.Now()
	if _, err := db.Exec("CREATE TABLE vigil_test.filler (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)"); err != nil {
		t.Fatal(err)
	}
	rows := mb * 16
	for done := 0; done < rows; done += 160 {
		n := min(160, rows-done)
		if _, err := db.Exec(fmt.Sprintf("INSERT INTO vigil_test.filler (b) SELECT REPEAT(MD5(RAND()), 2048) FROM vigil_test.seq_1_to_%d", n)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("filled %d MB in %v", mb, time.Since(t0))
}

func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func waitRows(t *testing.T, db *sql.DB, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := count(t, db)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			var io, sqlRun, lastErr string
			rows, err := db.Query("SHOW SLAVE STATUS")
			if err == nil {
				cols, _ := rows.Columns()
				vals := make([]sql.NullString, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if rows.Next() && rows.Scan(ptrs...) == nil {
					for i, c := range cols {
						switch c {
						case "Slave_IO_Running":
							io = vals[i].String
						case "Slave_SQL_Running":
							sqlRun = vals[i].String
						case "Last_Error", "Last_IO_Error", "Last_SQL_Error":
							lastErr += " " + vals[i].String
						}
					}
				}
				rows.Close()
			}
			t.Fatalf("replica has %d rows, want %d (io=%s sql=%s%s)", n, want, io, sqlRun, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ownerUID(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestSandboxAgents: `vigil sandbox up --agents` runs `vigil agent run`
// beside every node, status shows them, they stop and start their node,
// clone through them works, and `sandbox down` stops them.
func TestSandboxAgents(t *testing.T) {
	requireIntegration(t)
	bin := buildVigil(t)
	dir, err := os.MkdirTemp("", "vigil-agent-sb-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	down := func() {
		if out, err := exec.Command(bin, "sandbox", "down", "--dir", dir, "--purge").CombinedOutput(); err != nil {
			t.Errorf("sandbox down: %v\n%s", err, out)
		}
	}
	out, err := exec.Command(bin, "sandbox", "up", "--dir", dir, "--nodes", "2", "--agents").CombinedOutput()
	if err != nil {
		down()
		t.Fatalf("sandbox up --agents: %v\n%s", err, out)
	}
	downDone := false
	defer func() {
		if !downDone {
			down()
		}
	}()
	t.Logf("%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := sb.Manifest()
	if len(m.Agents) != 2 {
		t.Fatalf("manifest agents: %+v", m.Agents)
	}
	var st sandbox.StatusReport
	sout, err := exec.Command(bin, "sandbox", "status", "--dir", dir, "--json").Output()
	if err != nil || json.Unmarshal(sout, &st) != nil || len(st.Agents) != 2 || !st.Agents[0].Answering || !st.Agents[1].Answering {
		t.Fatalf("sandbox status: %v\n%s", err, sout)
	}
	a1, err := sb.AgentClient("node1")
	if err != nil {
		t.Fatal(err)
	}
	defer a1.Close()
	a2, err := sb.AgentClient("node2")
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()

	if s, err := a2.Stop(ctx); err != nil || s.Running {
		t.Fatalf("stop node2 through its agent: %+v %v", s, err)
	}
	if running, err := sb.IsRunning("node2"); err != nil || running {
		t.Fatalf("node2 still running after the agent's stop: %v", err)
	}
	if s, err := a2.Start(ctx); err != nil || !s.Answering {
		t.Fatalf("start node2 through its agent: %+v %v", s, err)
	}

	db, err := sql.Open("mysql", sb.DSN("node1", "app", "app", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE vigil_test.rows_t (id INT PRIMARY KEY, v VARCHAR(255))"); err != nil {
		t.Fatal(err)
	}
	insert(t, db, 0, 1000)
	res, _, err := agent.Clone(ctx, a1, a2, agent.BackupOptions{}, agent.RestoreOptions{})
	if err != nil {
		t.Fatalf("clone node1 to node2 through the sandbox's agents: %v", err)
	}
	r, err := sql.Open("mysql", sb.DSN("node2", "app", "app", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := count(t, r); n != 1000 {
		t.Errorf("node2 has %d rows after the clone, want 1000", n)
	}
	if res.GTID == "" {
		t.Errorf("no GTID: %+v", res)
	}
	audit, err := os.ReadFile(m.Agents[1].AuditLog)
	if err != nil || !strings.Contains(string(audit), `"op":"restore"`) {
		t.Errorf("agent2's audit log: %v\n%s", err, audit)
	}

	// The target's agent dies in the middle of a (throttled) clone: the
	// node keeps running with its data, the donor's agent ends its backup
	// and is free again, the restarted agent deletes the partial copy
	// before it serves (never swapped in), and a later clone works.
	cloneErr := make(chan error, 1)
	go func() {
		_, _, err := agent.Clone(ctx, a1, a2, agent.BackupOptions{Rate: 4 << 20}, agent.RestoreOptions{})
		cloneErr <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if left, _ := filepath.Glob(m.Nodes[1].Datadir + ".vigil-new-*"); len(left) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restore never started extracting")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if err := syscall.Kill(m.Agents[1].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-cloneErr; err == nil {
		t.Fatal("clone succeeded although the target's agent was killed")
	} else {
		t.Logf("clone with the target's agent killed: %v", err)
	}
	if n := count(t, r); n != 1000 {
		t.Errorf("node2 has %d rows after its agent died mid-restore, want 1000", n)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		st, err := a1.Status(ctx)
		if err == nil && st.Busy == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the donor's agent is still busy after the target died: %+v %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	restarted := exec.Command(bin, "agent", "run", "--config", m.Agents[1].Config)
	if err := restarted.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = restarted.Process.Kill(); _ = restarted.Wait() }()
	var st2 agent.Status
	deadline = time.Now().Add(10 * time.Second)
	for {
		st2, err = a2.Status(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted agent does not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The restarted agent deleted the partial copy before serving; the
	// datadir was never swapped (one old datadir: the first clone's).
	if len(st2.Leftovers) != 0 || !st2.Answering || len(st2.OldDatadirs) != 1 {
		t.Errorf("restarted agent's status: %+v", st2)
	}
	if left, _ := filepath.Glob(m.Nodes[1].Datadir + ".vigil-new-*"); len(left) != 0 {
		t.Errorf("the interrupted restore's directory is still there: %v", left)
	}
	if audit, err := os.ReadFile(m.Agents[1].AuditLog); err != nil || !strings.Contains(string(audit), `"op":"remove_interrupted","outcome":"ok"`) {
		t.Errorf("the restarted agent did not audit the removal: %v\n%s", err, audit)
	}
	// A later clone through the restarted agent works.
	insert(t, db, 1000, 1500)
	if _, _, err := agent.Clone(ctx, a1, a2, agent.BackupOptions{}, agent.RestoreOptions{}); err != nil {
		t.Fatalf("clone after the target's agent restarted: %v", err)
	}
	if n := count(t, r); n != 1500 {
		t.Errorf("node2 has %d rows after the clone that followed the crash, want 1500", n)
	}
	// Agent to agent: node2's agent pulls the stream from node1's with a
	// ticket node1's agent issued to Vigil; node1's agent serves it to a
	// peer certificate, and only once.
	insert(t, db, 1500, 1800)
	if st, err := a2.Status(ctx); err != nil || !st.PeerPull {
		t.Fatalf("node2's agent cannot pull (%v): %+v", err, st)
	}
	tk, err := a1.Ticket(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := a2.RestoreFrom(ctx, m.Agents[0].Listen.Addr(), tk.Ticket, agent.RestoreOptions{})
	if err != nil {
		t.Fatalf("restore node2 from node1's agent directly: %v", err)
	}
	if n := count(t, r); n != 1800 || pulled.GTID == "" || pulled.BytesReceived == 0 {
		t.Errorf("node2 has %d rows after the direct clone, want 1800 (%+v)", n, pulled)
	}
	if audit, err := os.ReadFile(m.Agents[0].AuditLog); err != nil || !strings.Contains(string(audit), `"op":"backup","who":"CN=vigil-agent,O=vigil"`) || !strings.Contains(string(audit), `"peer":true`) {
		t.Errorf("node1's agent did not audit a backup for a peer: %v\n%s", err, audit)
	}
	if _, err := a2.RestoreFrom(ctx, m.Agents[0].Listen.Addr(), tk.Ticket, agent.RestoreOptions{}); err == nil || !strings.Contains(err.Error(), "no_peer") {
		t.Errorf("a used ticket: %v, want no_peer", err)
	}
	if cl, err := a2.Cleanup(ctx); err != nil || len(cl.Removed) != 3 {
		t.Errorf("cleanup after the crash (the old datadirs of the three clones): %+v %v", cl, err)
	}

	pids := []int{m.Agents[0].PID, m.Agents[1].PID, restarted.Process.Pid}
	downDone = true
	down()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			if data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(data), "agent") {
				t.Errorf("agent pid %d still runs after sandbox down", pid)
			}
		}
	}
}
