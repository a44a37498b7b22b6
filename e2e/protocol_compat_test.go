package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// TestProtocolCompat checks, against a replication sandbox, that clients
// see through Vigil what they see from MariaDB itself (issue 13):
//
//   - MariaDB's extended metadata (MARIADB_CLIENT_EXTENDED_METADATA: JSON,
//     UUID, INET6, GEOMETRY type info in column definitions) reaches
//     clients, text and binary protocol;
//   - COM_CHANGE_USER works with every driver that offers it (mysqlclient
//     on MariaDB Connector/C, PHP mysqli on mysqlnd, Node's mysql, and the
//     raw helper), with and without a schema, with both authentication
//     plugins Vigil offers clients, and fails with a wrong password, with
//     the session afterwards as MariaDB leaves it.
func TestProtocolCompat(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 2}, nil)
	direct := env.sb.Addr("node1")
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/?timeout=5s", env.addr))
	mustExec(t, db, "CREATE DATABASE IF NOT EXISTS compat")
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS compat.types (j JSON, u UUID, i INET6, g POINT)")
	mustExec(t, db, "INSERT INTO compat.types VALUES ('{\"a\": 1}', UUID(), '::1', POINT(1, 2))")
	Eventually(t, 20*time.Second, "the row on node2", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		rows, err := env.sb.SQL(ctx, "node2", "SELECT COUNT(*) FROM compat.types")
		if err != nil {
			return err
		}
		if len(rows) != 1 || rows[0][0] == "0" {
			return fmt.Errorf("not replicated yet")
		}
		return nil
	})

	t.Run("ExtendedMetadataCLI", func(t *testing.T) { testExtendedMetadataCLI(t, direct, env.addr) })
	t.Run("ExtendedMetadataProtocol", func(t *testing.T) { testExtendedMetadataProtocol(t, direct, env.addr) })

	directRuns := map[string][]driverCase{}
	for i, plugin := range []string{mysqlproto.AuthNativePassword, mysqlproto.AuthCachingSha2} {
		if i > 0 {
			restartVigilWith(t, env, func(c *config.Config) { c.Clusters[0].AuthPlugin = plugin })
		}
		t.Run("ChangeUser/"+plugin, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c, g, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: env.addr, User: "app", Password: "app"})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if g.Plugin != plugin {
				t.Fatalf("Vigil's greeting offers %s, want %s", g.Plugin, plugin)
			}
			for _, d := range changeUserDrivers {
				t.Run(d.name, func(t *testing.T) {
					if why := d.missing(); why != "" {
						t.Skipf("%s is not installed (scripts/install-deps.sh installs it): %s", d.name, why)
					}
					if directRuns[d.name] == nil {
						directRuns[d.name] = d.run(t, direct)
					}
					compareChangeUser(t, directRuns[d.name], d.run(t, env.addr))
				})
			}
			t.Run("raw", func(t *testing.T) { testChangeUserRaw(t, env.addr) })
		})
	}
}

// restartVigilWith stops the environment's Vigil and starts it again on
// the same addresses with a changed configuration.
func restartVigilWith(t *testing.T, env *clusterEnv, tweak func(*config.Config)) {
	t.Helper()
	cfg, err := config.Load(env.sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	tweak(cfg)
	data, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(env.sb.Dir(), "vigil-e2e-2.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	env.v.stop()
	env.v = startVigil(t, path, env.addr)
	Eventually(t, 15*time.Second, "a routed writer", func() error {
		if w := env.writer(t); w == "" {
			return fmt.Errorf("no writer yet")
		}
		return nil
	})
}

// columnTypes runs the mariadb CLI with --column-type-info and returns
// the "Type:" lines.
func columnTypes(t *testing.T, addr string) []string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("mariadb", "-h", host, "-P", port, "-uapp", "-papp", "--protocol=tcp", "-t", "--column-type-info",
		"-e", "SELECT j, u, i, g FROM compat.types").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb --column-type-info on %s: %v\n%s", addr, err, out)
	}
	var types []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "Type:") {
			types = append(types, strings.Join(strings.Fields(line), " "))
		}
	}
	return types
}

func testExtendedMetadataCLI(t *testing.T, direct, proxy string) {
	want := columnTypes(t, direct)
	if len(want) != 4 || want[0] != "Type: BLOB (format=json)" || want[1] != "Type: STRING (type=uuid)" {
		t.Fatalf("the server itself shows %q: not the MariaDB this test expects", want)
	}
	if got := columnTypes(t, proxy); !reflect.DeepEqual(got, want) {
		t.Fatalf("through Vigil: %q\ndirect:        %q", got, want)
	}
}

// extendedInfo decodes the extended type info of a column definition sent
// with MARIADB_CLIENT_EXTENDED_METADATA: after catalog, schema, table,
// org_table, name and org_name, a length-encoded block of (kind, value)
// pairs, kind 0 a type name and 1 a format. It returns "type=…"/"format=…".
func extendedInfo(def []byte) ([]string, error) {
	pos := 0
	for range 6 {
		var ok bool
		if _, pos, ok = mysqlproto.ReadLenEncString(def, pos); !ok {
			return nil, errors.New("short column definition")
		}
	}
	block, _, ok := mysqlproto.ReadLenEncString(def, pos)
	if !ok {
		return nil, errors.New("no extended type info block")
	}
	var out []string
	for q := 0; q < len(block); {
		kind := block[q]
		v, next, ok := mysqlproto.ReadLenEncString(block, q+1)
		if !ok {
			return nil, fmt.Errorf("bad extended type info %q", block)
		}
		name := map[byte]string{0: "type", 1: "format"}[kind]
		out = append(out, name+"="+string(v))
		q = next
	}
	return out, nil
}

// preparedMetadata prepares and executes a statement over the binary
// protocol as a client that negotiated extended metadata, and returns the
// extended type info of the columns in the prepare reply and in the
// execute reply.
func preparedMetadata(t *testing.T, addr string) (prepared, executed [][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, g, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr, User: "app", Password: "app",
		Flavour: mysqlproto.Flavour(mysqlproto.CapabilityClientDeprecateEOF, mysqlproto.MariaDBClientExtendedMetadata)})
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if g.MariaDBCaps&mysqlproto.MariaDBClientExtendedMetadata == 0 {
		t.Fatalf("%s (%s) did not offer MARIADB_CLIENT_EXTENDED_METADATA", addr, g.ServerVersion)
	}
	read := func() []byte {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if p[0] == mysqlproto.ErrPacket {
			t.Fatalf("%s: %v", addr, mysqlproto.ParseErr(p))
		}
		return append([]byte(nil), p...)
	}
	info := func(def []byte) []string {
		in, err := extendedInfo(def)
		if err != nil {
			t.Fatalf("%s: %v in %q", addr, err, def)
		}
		return in
	}
	c.Seq = 0
	_ = c.WritePacket(append([]byte{mysqlproto.ComStmtPrepare}, "SELECT j, u, i, g FROM compat.types"...))
	_ = c.Flush()
	ok := read()
	id := binary.LittleEndian.Uint32(ok[1:])
	cols, params := int(binary.LittleEndian.Uint16(ok[5:])), int(binary.LittleEndian.Uint16(ok[7:]))
	for range params {
		read()
	}
	for range cols {
		prepared = append(prepared, info(read()))
	}
	c.Seq = 0
	exec := []byte{mysqlproto.ComStmtExecute, 0, 0, 0, 0, 0, 1, 0, 0, 0}
	binary.LittleEndian.PutUint32(exec[1:], id)
	_ = c.WritePacket(exec)
	_ = c.Flush()
	n, _, _ := mysqlproto.ReadLenEncInt(read(), 0)
	for range n {
		executed = append(executed, info(read()))
	}
	// Binary rows start with 0x00; the terminator is an OK with 0xfe.
	for {
		if p := read(); p[0] == mysqlproto.EOFPacket {
			return prepared, executed
		}
	}
}

func testExtendedMetadataProtocol(t *testing.T, direct, proxy string) {
	wantP, wantE := preparedMetadata(t, direct)
	if len(wantP) != 4 || !reflect.DeepEqual(wantP[0], []string{"format=json"}) {
		t.Fatalf("the server itself sends %q", wantP)
	}
	gotP, gotE := preparedMetadata(t, proxy)
	if !reflect.DeepEqual(gotP, wantP) || !reflect.DeepEqual(gotE, wantE) {
		t.Fatalf("through Vigil: prepare %q execute %q\ndirect:        prepare %q execute %q", gotP, gotE, wantP, wantE)
	}
}

// driverCase is one change-user case as a driver script reports it.
type driverCase struct {
	Case   string         `json:"case"`
	Result string         `json:"result"`
	State  map[string]any `json:"state"`
}

type changeUserDriver struct {
	name    string
	missing func() string // why the driver cannot run, or ""
	run     func(t *testing.T, addr string) []driverCase
}

// Every case starts from a session as user app in schema mysql with a
// user variable, a session sql_mode, a temporary table, a prepared
// statement and character set latin1, then changes user: to app without a
// schema, to app in compat, with a wrong password without and with a
// schema, to an unknown schema, to an unknown user. The state afterwards
// is what MariaDB leaves: variables back to their global values, the
// temporary table and prepared statement gone, and on failure the
// previous user, schema and character set.
var changeUserDrivers = []changeUserDriver{
	{name: "mysqlclient", missing: func() string {
		if err := exec.Command("/usr/bin/python3", "-c", "import MySQLdb").Run(); err != nil {
			return "python3-mysqldb: " + err.Error()
		}
		return ""
	}, run: func(t *testing.T, addr string) []driverCase {
		return runDriverScript(t, "/usr/bin/python3", "cu.py", mysqlclientScript, addr)
	}},
	{name: "php-mysqli", missing: func() string {
		out, err := exec.Command("php", "-m").Output()
		if err != nil || !strings.Contains(string(out), "mysqli") {
			return fmt.Sprintf("php with mysqli (php-cli, php-mysql): %v", err)
		}
		return ""
	}, run: func(t *testing.T, addr string) []driverCase {
		return runDriverScript(t, "php", "cu.php", mysqliScript, addr)
	}},
	{name: "node-mysql", missing: func() string {
		if _, err := exec.LookPath("node"); err != nil {
			return "nodejs: " + err.Error()
		}
		if _, err := os.Stat("/usr/share/nodejs/mysql"); err != nil {
			return "node-mysql: " + err.Error()
		}
		return ""
	}, run: func(t *testing.T, addr string) []driverCase {
		return runDriverScript(t, "node", "cu.js", nodeScript, addr)
	}},
}

func runDriverScript(t *testing.T, interpreter, name, script, addr string) []driverCase {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, path, host, port)
	cmd.Env = append(os.Environ(), "NODE_PATH=/usr/share/nodejs")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s %s against %s: %v\n%s\n%s", interpreter, name, addr, err, out, ee.Stderr)
		}
		t.Fatalf("%s %s against %s: %v", interpreter, name, addr, err)
	}
	var cases []driverCase
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var c driverCase
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%s against %s printed %q: %v", name, addr, line, err)
		}
		cases = append(cases, c)
	}
	return cases
}

// compareChangeUser checks the driver's results through Vigil against the
// same driver's directly against the primary, and against what the cases
// must give whatever the server says.
func compareChangeUser(t *testing.T, direct, proxy []driverCase) {
	if len(direct) != len(proxy) || len(proxy) < 6 {
		t.Fatalf("%d cases direct, %d through Vigil", len(direct), len(proxy))
	}
	for i, got := range proxy {
		want := direct[i]
		t.Logf("%-22s direct %-9s vigil %-9s %v", got.Case, want.Result, got.Result, got.State)
		if got.Case != want.Case {
			t.Fatalf("case %d: %q vs %q", i, got.Case, want.Case)
		}
		denied := func(r string) bool { return r == "ERR 1045" || r == "ERR 1698" }
		switch {
		case strings.HasPrefix(got.Case, "nobody/"):
			// MariaDB says 1698 for an unknown user; Vigil says 1045
			// (using password: YES), as at login.
			if !denied(got.Result) || !denied(want.Result) {
				t.Errorf("%s: %s through Vigil, %s direct; want access denied", got.Case, got.Result, want.Result)
			}
		case got.Result != want.Result:
			t.Errorf("%s: %s through Vigil, %s direct", got.Case, got.Result, want.Result)
		}
		for k, wv := range want.State {
			gv := got.State[k]
			if k == "db" && got.Result == "ok" && strings.HasSuffix(got.Case, "/None") {
				// A session without a default schema may run on a pooled
				// connection that has one (docs/routing.md).
				continue
			}
			if fmt.Sprint(gv) != fmt.Sprint(wv) {
				t.Errorf("%s: %s is %v through Vigil, %v direct", got.Case, k, gv, wv)
			}
		}
		// What must hold whatever the server says.
		wantResult := map[string]string{"app/app/None": "ok", "app/app/compat": "ok", "app/wrong/None": "ERR 1045",
			"app/wrong/compat": "ERR 1045", "app/app/no_such_db": "ERR 1049", "limit": "ERR 1045,ERR 1045,ERR 1045,ERR 1047"}[got.Case]
		if wantResult != "" && got.Result != wantResult {
			t.Errorf("%s: %s, want %s", got.Case, got.Result, wantResult)
		}
		if got.Case == "app/app/compat" && got.State["db"] != "compat" {
			t.Errorf("%s: schema %v after change user", got.Case, got.State["db"])
		}
		if x, ok := got.State["x"]; ok && x != nil && x != "closed" {
			t.Errorf("%s: user variable survived change user: %v", got.Case, x)
		}
		if tmp, ok := got.State["tmp"]; ok && tmp != "ERR 1146" && tmp != "closed" {
			t.Errorf("%s: temporary table survived change user: %v", got.Case, tmp)
		}
		if cc, ok := got.State["client_charset"]; ok && got.State["charset"] != cc {
			t.Errorf("%s: the server's character set %v is not the client's %v", got.Case, got.State["charset"], cc)
		}
	}
}

// testChangeUserRaw runs the raw protocol helper (changeUser in
// proxy_test.go: empty scramble, answers the auth switch) through Vigil,
// and checks that a failed change keeps the session.
func testChangeUserRaw(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr, User: "app", Password: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := changeUser(c, "app", "app", "compat"); err != nil {
		t.Fatalf("change user with a schema: %v", err)
	}
	if err := changeUser(c, "app", "app", ""); err != nil {
		t.Fatalf("change user without a schema: %v", err)
	}
	var se *mysqlproto.SQLError
	if err := changeUser(c, "app", "wrong", ""); !errors.As(err, &se) || se.Code != mysqlproto.ERAccessDeniedError {
		t.Fatalf("change user with a wrong password: %v", err)
	}
	if err := pingQuery(c); err != nil {
		t.Fatalf("the session after a failed change user: %v", err)
	}
}

const mysqlclientScript = `# change_user through mysqlclient (MariaDB Connector/C): one JSON line per case.
import json, sys, MySQLdb
host, port = sys.argv[1], int(sys.argv[2])

def one(c, sql):
    try:
        cur = c.cursor(); cur.execute(sql); r = cur.fetchall()
        return r[0][0] if r else None
    except MySQLdb.Error as e:
        return "ERR %d" % e.args[0]

def state(c):
    return {"user": one(c, "SELECT CURRENT_USER()"), "db": one(c, "SELECT DATABASE()"), "x": one(c, "SELECT @x"),
            "sql_mode": one(c, "SELECT @@session.sql_mode"), "charset": one(c, "SELECT @@character_set_client"),
            "collation": one(c, "SELECT @@collation_connection"), "tmp": one(c, "SELECT COUNT(*) FROM compat.tmp"),
            "ps": one(c, "EXECUTE s1"), "client_charset": c.character_set_name()}

for user, pw, db in [("app", "app", None), ("app", "app", "compat"), ("app", "wrong", None), ("app", "wrong", "compat"),
                     ("app", "app", "no_such_db"), ("nobody", "app", None)]:
    c = MySQLdb.connect(host=host, port=port, user="app", passwd="app", db="mysql")
    c.set_character_set("latin1")
    for q in ["SET @x = 42", "SET SESSION sql_mode = 'ANSI_QUOTES'", "CREATE TEMPORARY TABLE compat.tmp (a INT)", "PREPARE s1 FROM 'SELECT 7'"]:
        c.cursor().execute(q)
    try:
        if db is None:
            c.change_user(user, pw)
        else:
            c.change_user(user, pw, db)
        res = "ok"
    except MySQLdb.Error as e:
        res = "ERR %d" % e.args[0]
    print(json.dumps({"case": "%s/%s/%s" % (user, pw, db), "result": res, "state": state(c)}))
    c.close()

# Three failures, then MariaDB refuses any further attempt with 1047.
c = MySQLdb.connect(host=host, port=port, user="app", passwd="app")
out = []
for pw in ["wrong", "wrong", "wrong", "app"]:
    try:
        c.change_user("app", pw)
        out.append("ok")
    except MySQLdb.Error as e:
        out.append("ERR %d" % e.args[0])
print(json.dumps({"case": "limit", "result": ",".join(out), "state": {"user": one(c, "SELECT CURRENT_USER()")}}))
`

const mysqliScript = `<?php
// change_user through PHP mysqli (mysqlnd): one JSON line per case.
mysqli_report(MYSQLI_REPORT_OFF);
[$host, $port] = [$argv[1], (int)$argv[2]];
function one($m, $sql) {
  $r = $m->query($sql);
  if ($r === false) return "ERR " . $m->errno;
  if ($r === true) return null;
  $row = $r->fetch_row();
  return $row ? $row[0] : null;
}
$cases = [["app", "app", null], ["app", "app", "compat"], ["app", "wrong", null], ["app", "wrong", "compat"],
          ["app", "app", "no_such_db"], ["nobody", "app", null]];
foreach ($cases as [$user, $pw, $db]) {
  $m = new mysqli($host, "app", "app", "mysql", $port);
  if ($m->connect_errno) { fwrite(STDERR, "connect: " . $m->connect_error . "\n"); exit(1); }
  $m->set_charset("latin1");
  foreach (["SET @x = 42", "SET SESSION sql_mode = 'ANSI_QUOTES'", "CREATE TEMPORARY TABLE compat.tmp (a INT)"] as $q) { $m->query($q); }
  $st = $m->prepare("SELECT 7");
  $res = $m->change_user($user, $pw, $db) ? "ok" : "ERR " . $m->errno;
  $ps = @$st->execute() ? "ok" : "ERR " . $st->errno;
  $state = ["user" => one($m, "SELECT CURRENT_USER()"), "db" => one($m, "SELECT DATABASE()"), "x" => one($m, "SELECT @x"),
            "sql_mode" => one($m, "SELECT @@session.sql_mode"), "charset" => one($m, "SELECT @@character_set_client"),
            "collation" => one($m, "SELECT @@collation_connection"), "tmp" => one($m, "SELECT COUNT(*) FROM compat.tmp"),
            "ps" => $ps, "client_charset" => $m->character_set_name()];
  echo json_encode(["case" => "$user/$pw/" . ($db ?? "None"), "result" => $res, "state" => $state]), "\n";
  $m->close();
}
`

const nodeScript = `// changeUser through Node's mysql package: one JSON line per case. The
// driver closes the connection when changeUser fails ("closed").
const mysql = require('mysql');
const [host, port] = [process.argv[2], parseInt(process.argv[3])];
const cases = [['app', 'app', null], ['app', 'app', 'compat'], ['app', 'wrong', null], ['app', 'wrong', 'compat'],
  ['app', 'app', 'no_such_db'], ['nobody', 'app', null]];
(async () => {
  for (const [user, password, database] of cases) {
    const c = mysql.createConnection({host, port, user: 'app', password: 'app', database: 'mysql', charset: 'latin1_swedish_ci'});
    const q = (sql) => new Promise((res) => c.query(sql, (e, r) =>
      res(e ? (e.errno ? 'ERR ' + e.errno : 'closed') : (Array.isArray(r) && r.length ? Object.values(r[0])[0] : null))));
    for (const s of ["SET @x = 42", "SET SESSION sql_mode = 'ANSI_QUOTES'", "CREATE TEMPORARY TABLE compat.tmp (a INT)"]) await q(s);
    const opts = {user, password, charset: 'utf8mb4_general_ci'};
    if (database) opts.database = database;
    const res = await new Promise((r) => c.changeUser(opts, (e) => r(e ? 'ERR ' + e.errno : 'ok')));
    const state = {user: await q('SELECT CURRENT_USER()'), db: await q('SELECT DATABASE()'), x: await q('SELECT @x'),
      sql_mode: await q('SELECT @@session.sql_mode'), charset: await q('SELECT @@character_set_client'),
      collation: await q('SELECT @@collation_connection'), tmp: await q('SELECT COUNT(*) FROM compat.tmp'),
      ignore_space: await q('SELECT COUNT (*) FROM compat.types')};
    console.log(JSON.stringify({case: user + '/' + password + '/' + (database || 'None'), result: res, state}));
    c.destroy();
  }
})();
`
