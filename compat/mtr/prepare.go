// Package mtr runs a selection of MariaDB's own test suite
// (mariadb-test-run --extern, from the mariadb-test package) against a
// sandbox directly and through Vigil, and compares the two: a test that
// passes direct but fails through Vigil is a compatibility bug of Vigil,
// unless it is listed in known-differences.txt with a reason.
//
// The steps, each usable on its own (compat/mtr/run.sh and the e2e test
// TestMTRCompat use them all):
//
//   - Prepare makes a sandbox look like the server mariadb-test-run starts
//     itself: mtr.cnf appended to every node's my.cnf (the nodes restart),
//     root@localhost with an empty password, the test and mtr databases,
//     mtr's time zone data, and a baseline that reset.sql restores before
//     every test.
//   - VigilConfig derives a Vigil configuration from the sandbox's one with
//     the users the tests log in as.
//   - Run runs mariadb-test-run once (one address, one protocol) and
//     collects the result and the diff of every test.
//   - Compare and WriteReport put a direct run and a Vigil run side by side.
//
// docs/compatibility.md ("MariaDB test suite") explains the selection and
// the results.
package mtr

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/sandbox"
)

// DefaultMTRDir is where Debian's mariadb-test package installs the suite.
const DefaultMTRDir = "/usr/share/mysql/mysql-test"

var (
	//go:embed mtr.cnf
	mtrCnf string
	//go:embed setup.sql
	setupSQL string
	//go:embed reset.sql
	resetSQL string
	//go:embed mysqltest-wrapper.sh
	wrapperScript string
)

// cnfMarker tells that mtr.cnf was already appended to a my.cnf.
const cnfMarker = "# --- appended by compat/mtr (vigil)"

// Target is a prepared sandbox: where mariadb-test-run's wrapper resets
// the servers.
type Target struct {
	Sandbox  *sandbox.Sandbox
	MTRDir   string
	Primary  sandbox.Node
	Replicas []sandbox.Node
}

// Available reports whether mariadb-test-run and mariadb-test are
// installed (Debian package mariadb-test), and why not.
func Available(mtrDir string) error {
	if mtrDir == "" {
		mtrDir = DefaultMTRDir
	}
	if _, err := os.Stat(filepath.Join(mtrDir, "mariadb-test-run.pl")); err != nil {
		return fmt.Errorf("mariadb-test-run not found in %s (install the Debian package mariadb-test)", mtrDir)
	}
	for _, bin := range []string{"mariadb-test", "mariadb", "perl", "diff"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found in PATH", bin)
		}
	}
	return nil
}

// Prepare readies a standalone (one node) or replication sandbox for
// mariadb-test-run. It is idempotent: nodes restart only the first time.
// Every node runs with mtr.cnf; root@localhost gets an empty password (so
// tests log in over TCP as mtr's root does; the socket still works);
// sbtest and vigil_test are dropped (tests list databases), test and mtr
// are created as mtr's bootstrap does, with mtr's time zone data; then the
// baseline of reset.sql is recorded and the replicas caught up.
func Prepare(ctx context.Context, sb *sandbox.Sandbox, mtrDir string, logf func(format string, args ...any)) (*Target, error) {
	if mtrDir == "" {
		mtrDir = DefaultMTRDir
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	t := &Target{Sandbox: sb, MTRDir: mtrDir}
	switch sb.Topology() {
	case sandbox.Standalone:
		if len(sb.Nodes()) != 1 {
			return nil, fmt.Errorf("a standalone sandbox for mtr must have one node, not %d", len(sb.Nodes()))
		}
		t.Primary = sb.Nodes()[0]
	case sandbox.Replication:
		for _, n := range sb.Nodes() {
			if n.Role == "primary" && t.Primary.Name == "" {
				t.Primary = n
			} else {
				t.Replicas = append(t.Replicas, n)
			}
		}
		if t.Primary.Name == "" {
			return nil, errors.New("the replication sandbox has no primary")
		}
	default:
		return nil, fmt.Errorf("mtr runs on standalone or replication sandboxes, not %s", sb.Topology())
	}

	restart := false
	for _, n := range sb.Nodes() {
		data, err := os.ReadFile(n.Config)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(data, []byte(cnfMarker)) {
			continue
		}
		f, err := os.OpenFile(n.Config, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(mtrCnf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		restart = true
	}
	if restart {
		t0 := time.Now()
		// Replicas first, so that none logs a lost primary at length.
		for _, n := range append(append([]sandbox.Node{}, t.Replicas...), t.Primary) {
			if err := sb.Stop(ctx, n.Name); err != nil {
				return nil, err
			}
		}
		for _, n := range append([]sandbox.Node{t.Primary}, t.Replicas...) {
			if err := sb.Start(ctx, n.Name); err != nil {
				return nil, err
			}
		}
		logf("mtr: restarted %d node(s) with mtr.cnf in %s", len(sb.Nodes()), time.Since(t0).Round(time.Millisecond))
	}

	// Tests load ../../std_data/... relative to the data directory, which
	// is mtr's vardir/std_data on its own server.
	link := filepath.Join(sb.Dir(), "std_data")
	if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
		if err := os.Symlink(filepath.Join(mtrDir, "std_data"), link); err != nil {
			return nil, err
		}
	}

	p := t.Primary.Name
	if err := sb.Exec(ctx, p,
		"ALTER USER root@localhost IDENTIFIED BY ''",
		"DROP DATABASE IF EXISTS sbtest",
		"DROP DATABASE IF EXISTS vigil_test",
		"DROP DATABASE IF EXISTS test",
		"CREATE DATABASE test CHARACTER SET latin1 COLLATE latin1_swedish_ci",
		"DROP DATABASE IF EXISTS mtr",
		"CREATE DATABASE mtr CHARACTER SET latin1",
	); err != nil {
		return nil, fmt.Errorf("prepare %s: %w", p, err)
	}
	rows, err := sb.SQL(ctx, p, "SELECT COUNT(*) FROM mysql.time_zone_name")
	if err != nil {
		return nil, err
	}
	if len(rows) == 1 && rows[0][0] == "0" {
		tz, err := os.ReadFile(filepath.Join(filepath.Dir(mtrDir), "mysql_test_data_timezone.sql"))
		if err != nil {
			return nil, fmt.Errorf("mtr's time zone data: %w", err)
		}
		if err := t.client(ctx, t.Primary, "mysql", tz); err != nil {
			return nil, fmt.Errorf("loading mtr's time zone data: %w", err)
		}
	}
	install, err := MTRProcedures(mtrDir)
	if err != nil {
		return nil, err
	}
	if err := t.client(ctx, t.Primary, "mtr", install); err != nil {
		return nil, fmt.Errorf("installing mtr's procedures: %w", err)
	}
	if err := t.client(ctx, t.Primary, "mtr", []byte(setupSQL)); err != nil {
		return nil, fmt.Errorf("recording the baseline: %w", err)
	}
	if err := t.CatchUp(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// MTRProcedures is what mtr's bootstrap installs in its mtr database
// (include/mtr_warnings.sql and include/mtr_check.sql), rewritten for the
// mariadb client: mysqltest's "delimiter ||;" becomes "delimiter ||", and
// a "--SELECT" comment inside a procedure, which the client would send as
// code, goes.
func MTRProcedures(mtrDir string) ([]byte, error) {
	var out bytes.Buffer
	for _, f := range []string{"mtr_warnings.sql", "mtr_check.sql"} {
		data, err := os.ReadFile(filepath.Join(mtrDir, "include", f))
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			switch {
			case strings.TrimSpace(line) == "delimiter ||;":
				line = "delimiter ||"
			case strings.HasPrefix(strings.TrimSpace(line), "--SELECT"):
				continue
			}
			out.WriteString(line)
			out.WriteByte('\n')
		}
		out.WriteString("delimiter ;\n")
	}
	return out.Bytes(), nil
}

// client runs SQL through the mariadb client as root over a node's socket.
func (t *Target) client(ctx context.Context, n sandbox.Node, db string, sqlText []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mariadb", "--defaults-file="+n.Config, "--batch", db)
	cmd.Stdin = bytes.NewReader(sqlText)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("mariadb on %s: %v: %s", n.Name, err, bytes.TrimSpace(out))
	}
	return nil
}

var gtidPos = regexp.MustCompile(`^[0-9,-]*$`)

// CatchUp waits until every replica has applied what the primary has.
func (t *Target) CatchUp(ctx context.Context) error {
	if len(t.Replicas) == 0 {
		return nil
	}
	rows, err := t.Sandbox.SQL(ctx, t.Primary.Name, "SELECT @@gtid_binlog_pos")
	if err != nil {
		return err
	}
	pos := rows[0][0]
	if !gtidPos.MatchString(pos) {
		return fmt.Errorf("odd gtid_binlog_pos %q", pos)
	}
	for _, r := range t.Replicas {
		rows, err := t.Sandbox.SQL(ctx, r.Name, fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', 60)", pos))
		if err != nil {
			return err
		}
		if rows[0][0] != "0" {
			return fmt.Errorf("%s did not reach %s within 60s", r.Name, pos)
		}
	}
	return nil
}
