package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// requireDriversEnv makes a missing driver package a failure instead of a
// skipped driver (make e2e and make compat set it).
const requireDriversEnv = "VIGIL_E2E_REQUIRE_DRIVERS"

// The second account of the driver scenarios' change_user checks; the test
// adds it to Vigil's configuration and to the servers.
const compatUser2, compatPassword2 = "compat2", "compat2pw"

// driverScriptTimeout bounds one run of one driver's scenario;
// driverCompatBudget bounds the whole test (sandbox included): a run that
// would end after it gets only the time left.
const (
	driverScriptTimeout = 60 * time.Second
	driverCompatBudget  = 5 * time.Minute
)

// driverScenario is one client driver and how to run its scenario script
// (compat/drivers/, docs/compatibility.md).
type driverScenario struct {
	name    string   // in the table, the artifacts and the schema names
	script  string   // relative to compat/drivers
	argv    []string // the command; "{script}" is replaced by the script's path
	pkgs    string   // the Debian packages that provide it, for the message
	present []string // a command that succeeds when the driver is installed
}

var driverScenarios = []driverScenario{
	{name: "pymysql", script: "python-pymysql.py", argv: []string{"/usr/bin/python3", "{script}"},
		pkgs: "python3-pymysql", present: []string{"/usr/bin/python3", "-c", "import pymysql"}},
	{name: "mysqlclient", script: "python-mysqlclient.py", argv: []string{"/usr/bin/python3", "{script}"},
		pkgs: "python3-mysqldb", present: []string{"/usr/bin/python3", "-c", "import MySQLdb"}},
	{name: "php-mysqli", script: "php-mysqli.php", argv: []string{"php", "-d", "mysqli.allow_local_infile=1", "{script}"},
		pkgs: "php-cli php-mysql", present: []string{"php", "-r", `exit(extension_loaded("mysqli") ? 0 : 1);`}},
	{name: "php-pdo", script: "php-pdo.php", argv: []string{"php", "{script}"},
		pkgs: "php-cli php-mysql", present: []string{"php", "-r", `exit(extension_loaded("pdo_mysql") ? 0 : 1);`}},
	{name: "perl-dbd-mariadb", script: "perl-dbd-mariadb.pl", argv: []string{"perl", "{script}"},
		pkgs: "libdbd-mariadb-perl", present: []string{"perl", "-MDBD::MariaDB", "-e", "1"}},
	{name: "ruby-mysql2", script: "ruby-mysql2.rb", argv: []string{"ruby", "{script}"},
		pkgs: "ruby-mysql2", present: []string{"ruby", "-rmysql2", "-e", "0"}},
	{name: "node-mysql", script: "node-mysql.js", argv: []string{"node", "{script}"},
		pkgs: "nodejs node-mysql", present: []string{"node", "-e", "require('mysql')"}},
	// The source launcher compiles Compat.java in memory at each run; C1
	// only and the serial collector halve the CPU that costs (it matters
	// on a loaded 2-core machine).
	{name: "connector-j", script: "connector-j/Compat.java",
		argv: []string{"java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", connectorJJar, "{script}"},
		pkgs: "default-jdk-headless libmariadb-java",
		// The source launcher needs the JDK's compiler, not only a JRE.
		present: []string{"sh", "-c", "command -v javac >/dev/null && test -r " + connectorJJar}},
	{name: "mariadb-cli", script: "mariadb-cli.sh", argv: []string{"bash", "{script}"},
		pkgs: "mariadb-client", present: []string{"mariadb", "--version"}},
}

const connectorJJar = "/usr/share/java/mariadb-java-client.jar"

// driverRun is what one run of a scenario printed.
type driverRun struct {
	checks   map[string]driverCheck
	order    []string
	stdout   []byte
	stderr   []byte
	took     time.Duration
	exitErr  error // the script's exit status or timeout, nil when it exited 0
	header   string
	notParse []string // output lines that are neither checks nor comments
}

type driverCheck struct {
	status string // PASS, FAIL or SKIP
	detail string
}

var driverCheckLine = regexp.MustCompile(`^(PASS|FAIL|SKIP) ([A-Za-z0-9_.]+)(?:: (.*))?$`)

func parseDriverOutput(out []byte) *driverRun {
	r := &driverRun{checks: map[string]driverCheck{}, stdout: out}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := driverCheckLine.FindStringSubmatch(line); m != nil {
			if _, dup := r.checks[m[2]]; !dup {
				r.order = append(r.order, m[2])
			}
			r.checks[m[2]] = driverCheck{status: m[1], detail: m[3]}
			continue
		}
		if strings.HasPrefix(line, "# ") {
			if r.header == "" {
				r.header = strings.TrimPrefix(line, "# ")
			}
			continue
		}
		if strings.TrimSpace(line) != "" {
			r.notParse = append(r.notParse, line)
		}
	}
	return r
}

// TestDriverCompat runs each real client driver's scenario
// (compat/drivers/) three times: straight to the primary, through Vigil,
// and through Vigil's sharded listener (its schemas on the second of two
// clusters, so that every statement is routed by schema), and fails for
// every check that passes direct but not through Vigil. A check
// that fails direct is a problem of the scenario (or of the driver), shown
// in the table but not failed. Outputs and the table go to
// test-artifacts/TestDriverCompat/. docs/compatibility.md explains it.
func TestDriverCompat(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	RequireMariaDB(t)
	t0 := time.Now()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	scripts := filepath.Join(root, "compat", "drivers")

	// Which drivers are installed (before the sandbox: a missing package
	// is cheap to report).
	var drivers []driverScenario
	for _, d := range driverScenarios {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, d.present[0], d.present[1:]...)
		cmd.Env = driverEnv(nil)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			msg := fmt.Sprintf("driver %s is not installed (%v: %s): install the Debian packages %s (scripts/install-deps.sh does)",
				d.name, err, bytes.TrimSpace(out), d.pkgs)
			if os.Getenv(requireDriversEnv) != "" {
				t.Errorf("%s; %s is set, so this is a failure", msg, requireDriversEnv)
			} else {
				t.Logf("skipping %s; set %s=1 to fail instead", msg, requireDriversEnv)
			}
			continue
		}
		drivers = append(drivers, d)
	}
	if len(drivers) == 0 {
		t.Skip("no driver installed")
	}

	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 2, Clusters: 2}, func(c *config.Config) {
		c.Users = append(c.Users, config.User{Name: compatUser2, Password: compatPassword2})
	})
	(&proxyEnv{admin: env.admin}).waitAllOnline(t)
	primary := ""
	var direct string
	for _, n := range env.sb.Nodes() {
		if n.Role == sandbox.RolePrimary && primary == "" { // the first cluster's
			primary, direct = n.Name, n.Addr()
		}
	}
	if primary == "" {
		t.Fatal("the sandbox has no primary")
	}
	app := env.sb.Accounts().App

	// Schemas: per driver and target (runs never share tables), each with
	// <db>_a and <db>_b for the schema-binding checks; the second account.
	// The sharded listener's schemas are on the second cluster: the
	// first is its default, so nothing reaches them but by schema.
	second := env.sb.Clusters()[1]
	targets := []struct{ name, addr, node string }{{"direct", direct, primary}, {"vigil", env.addr, primary}, {"shards", env.sb.ShardsAddr(), second.Nodes[0]}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stmts := map[string][]string{}
	for _, c := range env.sb.Clusters() {
		stmts[c.Nodes[0]] = []string{
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", compatUser2, compatPassword2),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON `compat\\_%%`.* TO '%s'@'%%'", compatUser2),
		}
	}
	for _, d := range drivers {
		for _, tg := range targets {
			db := driverSchema(d.name, tg.name)
			stmts[tg.node] = append(stmts[tg.node],
				"CREATE DATABASE `"+db+"` CHARACTER SET utf8mb4",
				"CREATE DATABASE `"+db+"_a`", "CREATE TABLE `"+db+"_a`.t (v VARCHAR(16))", "INSERT INTO `"+db+"_a`.t VALUES ('from-a')",
				"CREATE DATABASE `"+db+"_b`", "CREATE TABLE `"+db+"_b`.t (v VARCHAR(16))", "INSERT INTO `"+db+"_b`.t VALUES ('from-b')")
		}
	}
	for _, c := range env.sb.Clusters() {
		p := c.Nodes[0]
		if err := env.sb.Exec(ctx, p, stmts[p]...); err != nil {
			t.Fatalf("creating the schemas on %s: %v", p, err)
		}
		// Every replica has them before a scenario reads through Vigil.
		pos, err := env.sb.SQL(ctx, p, "SELECT @@gtid_binlog_pos")
		if err != nil || len(pos) != 1 {
			t.Fatalf("gtid_binlog_pos: %v %v", pos, err)
		}
		for _, n := range c.Nodes[1:] {
			rows, err := env.sb.SQL(ctx, n, fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', 30)", pos[0][0]))
			if err != nil || len(rows) != 1 || rows[0][0] != "0" {
				t.Fatalf("%s did not replicate the schemas: %v %v", n, rows, err)
			}
		}
	}

	art := filepath.Join(root, "test-artifacts", unsafeName.ReplaceAllString(t.Name(), "_"))
	if err := os.RemoveAll(art); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = copyFile(env.v.logf, filepath.Join(art, "vigil.log")) })
	t.Logf("sandbox and Vigil ready in %s; running %d drivers", time.Since(t0).Round(time.Millisecond), len(drivers))

	results := map[string]map[string]*driverRun{}
	for _, d := range drivers {
		results[d.name] = map[string]*driverRun{}
		for _, tg := range targets {
			limit := min(driverScriptTimeout, time.Until(t0.Add(driverCompatBudget)))
			if limit < 5*time.Second {
				t.Errorf("%s %s: not run: the test's budget of %s is spent", d.name, tg.name, driverCompatBudget)
				continue
			}
			r := runDriverScenario(t, d, filepath.Join(scripts, d.script), tg.addr, driverSchema(d.name, tg.name), app, limit)
			results[d.name][tg.name] = r
			base := filepath.Join(art, d.name+"-"+tg.name)
			_ = os.WriteFile(base+".out", r.stdout, 0o644)
			_ = os.WriteFile(base+".err", r.stderr, 0o644)
			status := "exit 0"
			if r.exitErr != nil {
				status = r.exitErr.Error()
			}
			t.Logf("%-16s %-6s %3d checks in %5.1fs (%s) %s", d.name, tg.name, len(r.checks), r.took.Seconds(), status, r.header)
		}
	}

	table, regressions, directFails := driverCompatTable(drivers, results)
	_ = os.WriteFile(filepath.Join(art, "results.txt"), []byte(table), 0o644)
	t.Logf("driver compatibility (%s; outputs in %s):\n%s", time.Since(t0).Round(time.Second), art, table)
	for _, f := range directFails {
		t.Logf("fails direct (a scenario or driver problem, not counted): %s", f)
	}
	for _, r := range regressions {
		t.Errorf("passes direct, fails through Vigil: %s", r)
	}
}

// driverSchema is the schema of one driver's run against one target.
func driverSchema(driver, target string) string {
	return "compat_" + strings.ReplaceAll(driver, "-", "_") + "_" + target
}

// driverEnv is the environment of a driver process: ours, plus where
// Debian's Node.js modules are (a Node.js from elsewhere does not look
// there), plus vars.
func driverEnv(vars map[string]string) []string {
	env := os.Environ()
	nodePath := "/usr/share/nodejs"
	if p := os.Getenv("NODE_PATH"); p != "" {
		nodePath = p + ":" + nodePath
	}
	env = append(env, "NODE_PATH="+nodePath)
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// runDriverScenario runs one scenario against addr, bounded by limit (the
// whole process group is killed at the end).
func runDriverScenario(t *testing.T, d driverScenario, script, addr, db string, app sandbox.Account, limit time.Duration) *driverRun {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	argv := make([]string, len(d.argv))
	for i, a := range d.argv {
		argv[i] = strings.ReplaceAll(a, "{script}", script)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = driverEnv(map[string]string{
		"VIGIL_COMPAT_HOST": host, "VIGIL_COMPAT_PORT": port,
		"VIGIL_COMPAT_USER": app.User, "VIGIL_COMPAT_PASSWORD": app.Password, "VIGIL_COMPAT_DB": db,
		"VIGIL_COMPAT_USER2": compatUser2, "VIGIL_COMPAT_PASSWORD2": compatPassword2,
	})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s", limit)
	}
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of the group, if any
	}
	r := parseDriverOutput(stdout.Bytes())
	r.stderr, r.took = stderr.Bytes(), took
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("exit status %d", exit.ExitCode())
	}
	r.exitErr = err
	return r
}

// driverCompatTable is the table of every check, direct and through Vigil,
// the regressions (passes direct, not through Vigil) and the checks that
// fail direct, each with its details.
func driverCompatTable(drivers []driverScenario, results map[string]map[string]*driverRun) (table string, regressions, directFails []string) {
	var b strings.Builder
	proxied := []string{"vigil", "shards"}
	fmt.Fprintf(&b, "%-16s %-24s %-6s %-6s %-6s\n", "driver", "check", "direct", "vigil", "shards")
	counts := map[string]int{}
	for _, d := range drivers {
		for _, tg := range []string{"direct", "vigil", "shards"} {
			if results[d.name][tg] == nil {
				results[d.name][tg] = &driverRun{checks: map[string]driverCheck{}, exitErr: errors.New("not run")}
			}
		}
		direct := results[d.name]["direct"]
		names := append([]string{}, direct.order...)
		for _, tg := range proxied {
			for _, n := range results[d.name][tg].order {
				if _, ok := direct.checks[n]; !ok && !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
		for _, n := range names {
			dc := direct.checks[n]
			ds := driverStatusOrDash(dc.status)
			mark := ""
			same := ds == "PASS"
			var st []string
			for _, tg := range proxied {
				r := results[d.name][tg]
				vc := r.checks[n]
				vs := driverStatusOrDash(vc.status)
				st = append(st, vs)
				if ds == "PASS" && vs != "PASS" {
					same = false
					mark += "  <-- fails through " + tg
					detail := vc.detail
					if vs == "-" {
						detail = "no result: the script ended early (" + driverExitString(r.exitErr) + ")"
					}
					regressions = append(regressions, fmt.Sprintf("%s %s (%s): %s", d.name, n, tg, detail))
					counts["regression"]++
				}
			}
			if ds == "FAIL" {
				directFails = append(directFails, fmt.Sprintf("%s %s: %s", d.name, n, dc.detail))
				counts["direct-fail"]++
			}
			if same {
				counts["same"]++
			}
			fmt.Fprintf(&b, "%-16s %-24s %-6s %-6s %-6s%s\n", d.name, n, ds, st[0], st[1], mark)
		}
		for _, tg := range []string{"direct", "vigil", "shards"} {
			r := results[d.name][tg]
			if r.exitErr != nil {
				fmt.Fprintf(&b, "%-16s %-24s %s: %s\n", d.name, "(script)", tg, r.exitErr)
			}
			for _, l := range r.notParse {
				fmt.Fprintf(&b, "%-16s %-24s %s printed: %s\n", d.name, "(script)", tg, l)
			}
		}
	}
	fmt.Fprintf(&b, "\n%d checks pass all three ways, %d pass direct but not through Vigil or its sharded listener, %d fail direct\n",
		counts["same"], counts["regression"], counts["direct-fail"])
	if len(regressions) > 0 {
		b.WriteString("\npasses direct, fails through Vigil:\n")
		for _, r := range regressions {
			b.WriteString("  " + r + "\n")
		}
	}
	if len(directFails) > 0 {
		b.WriteString("\nfails direct (the scenario or the driver, not Vigil):\n")
		for _, r := range directFails {
			b.WriteString("  " + r + "\n")
		}
	}
	return b.String(), regressions, directFails
}

func driverStatusOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func driverExitString(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}
