package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// secretPrefix starts every password of TestSecretsNeverLogged. Secrets
// are letters and digits only, so that a leaked one stays one token in
// normalised text (Sekr1t-3 would be written "Sekr1t - ?"), and the
// search is for the prefix, so that a secret cut short is found too.
const secretPrefix = "Sekr1t"

func secret(n int) string { return fmt.Sprintf("%s%02dxyz", secretPrefix, n) }

// TestSecretsNeverLogged runs, through Vigil with the query log on
// (statements masked, logins logged), every statement form that carries a
// password — valid, refused and misspelled, as text and prepared — plus
// logins and COM_CHANGE_USER with wrong passwords, each with its own
// secret. Then no secret may appear in the query log, Vigil's log, the
// admin API (events, sessions, digests, config, query log, metrics...) or
// any file of the state directory (journal, salvage).
func TestSecretsNeverLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	var stateDir string
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 2}, func(c *config.Config) {
		stateDir = c.StateDir
		auth := true
		c.Log.Queries, c.Log.Auth, c.Log.Statements = true, &auth, "masked"
		c.Log.File = &config.LogFile{Path: filepath.Join(c.StateDir, "queries.jsonl")}
	})
	waitServersOnline(t, env, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr))
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cleanup := func() {
		for _, q := range []string{"DROP USER IF EXISTS 'vigil_sec'@'%', 'vigil_sec2'@'%'", "DROP SERVER IF EXISTS vigil_sec",
			"RESET SLAVE 'vigil_sec' ALL"} {
			_, _ = db.ExecContext(context.Background(), q)
		}
	}
	cleanup()
	t.Cleanup(cleanup)

	// code returns the error number of err, 0 for none, -1 for an error
	// that is not the server's.
	code := func(err error) int {
		var me *mysql.MySQLError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &me):
			return int(me.Number)
		}
		return -1
	}
	// want checks the outcome a statement must have for the test to
	// exercise what it means to.
	want := func(got int, q string, codes ...int) {
		for _, c := range codes {
			if got == c {
				return
			}
		}
		t.Errorf("%s: error %d, want one of %v", q, got, codes)
	}
	stmt := func(q string, codes ...int) {
		_, err := conn.ExecContext(ctx, q)
		t.Logf("%s: %v", q, err)
		want(code(err), q, codes...)
	}

	// Text statements.
	stmt("CREATE USER 'vigil_sec'@'%' IDENTIFIED BY '"+secret(1)+"'", 0)
	stmt("ALTER USER 'vigil_sec'@'%' IDENTIFIED BY '"+secret(2)+"'", 0)
	stmt("ALTER USR 'vigil_sec'@'%' IDENTIFIED BY '"+secret(3)+"'", 1064)
	stmt("SET PASSWORD FOR 'vigil_sec'@'%' = PASSWORD('"+secret(4)+"')", 0)
	stmt("GRANT SELECT ON vigil_test.* TO 'vigil_sec'@'%' IDENTIFIED BY '"+secret(5)+"'", 0)
	// A named connection: the servers' own replication stays as it is.
	stmt("CHANGE MASTER 'vigil_sec' TO MASTER_HOST='127.0.0.1', MASTER_PORT=1, MASTER_USER='vigil_sec', MASTER_PASSWORD='"+secret(6)+"'", 0, 1227)
	stmt("CHANGE REPLICATION SOURCE TO SOURCE_PASSWORD='"+secret(7)+"'", 1064)
	stmt("CREATE SERVER vigil_sec FOREIGN DATA WRAPPER mysql OPTIONS (HOST '127.0.0.1', DATABASE 'vigil_test', USER 'vigil_sec', PASSWORD '"+secret(8)+"', PORT 1)", 0)
	stmt("ALTER USER 'vigil_sec'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('"+secret(11)+"')", 0)
	stmt("CREATE USER 'vigil_sec2'@'%' IDENTIFIED BY '"+secret(12)+"', 'vigil_sec'@'%' IDENTIFIED BY '"+secret(13)+"'", 1396)
	// A quote missing: the password lexes as a name, outside any string.
	stmt("CREATE USER 'vigil_sec2'@'% IDENTIFIED BY '"+secret(14)+"'", 1064)
	// A backquote never closed: the name runs to the end of the text.
	stmt("CREATE USER `vigil_sec2 IDENTIFIED BY '"+secret(24)+"'", 1064)
	stmt("CHANGE MASTR TO MASTER_PASSWORD='"+secret(15)+"'", 1064)
	stmt("CREATE SERVR vigil_sec2 FOREIGN DATA WRAPPER mysql OPTIONS (PASSWORD '"+secret(16)+"')", 1064)
	// SQL-level prepared statements: the text is a string of a string.
	stmt("PREPARE vigil_sec FROM 'ALTER USER ''vigil_sec''@''%'' IDENTIFIED BY ''"+secret(17)+"'''", 0)
	stmt("EXECUTE vigil_sec", 0)
	stmt("DEALLOCATE PREPARE vigil_sec", 0)
	stmt("EXECUTE IMMEDIATE 'ALTER USR ''vigil_sec''@''%'' IDENTIFIED BY ''"+secret(18)+"'''", 1064)

	// Binary prepared statements (COM_STMT_PREPARE, COM_STMT_EXECUTE).
	prepare := func(q string, codes []int, args ...any) {
		ps, err := conn.PrepareContext(ctx, q)
		if err == nil {
			_, err = ps.ExecContext(ctx, args...)
			ps.Close()
		}
		t.Logf("prepared %s: %v", q, err)
		want(code(err), q, codes...)
	}
	prepare("ALTER USER 'vigil_sec'@'%' IDENTIFIED BY '"+secret(19)+"'", []int{0})
	prepare("ALTER USR 'vigil_sec'@'%' IDENTIFIED BY '"+secret(20)+"'", []int{1064})
	prepare("SELECT PASSWORD(?)", []int{0}, secret(21))
	prepare("CREATE SERVER vigil_sec2 FOREIGN DATA WRAPPER mysql OPTIONS (PASSWORD ?)", []int{1064}, secret(22))

	// A statement in flight, while the sessions are listed.
	var sessions string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(time.Second)
		sessions = httpBody(t, env, "/api/v1/sessions")
	}()
	stmt("SELECT SLEEP(3), PASSWORD('"+secret(23)+"')", 0)
	wg.Wait()
	if !strings.Contains(sessions, "SLEEP") {
		t.Errorf("the statement in flight is not in the session list: %s", sessions)
	}

	// Logins: a wrong password, then COM_CHANGE_USER with a wrong one.
	bad := openDB(t, fmt.Sprintf("app:%s@tcp(%s)/?timeout=5s", secret(9), env.addr))
	want(code(bad.PingContext(ctx)), "login with a wrong password", 1045)
	bad = openDB(t, fmt.Sprintf("vigil_sec:%s@tcp(%s)/?timeout=5s", secret(1), env.addr))
	want(code(bad.PingContext(ctx)), "login of a user Vigil does not know", 1045)
	c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: env.addr, User: "app", Password: "app"})
	if err != nil {
		t.Fatal(err)
	}
	err = changeUser(c, "app", secret(10), "")
	c.Close()
	var se *mysqlproto.SQLError
	if !errors.As(err, &se) || se.Code != 1045 {
		t.Errorf("COM_CHANGE_USER with a wrong password: %v, want error 1045", err)
	}

	cleanup()
	// Let the query log's writer flush its file.
	Eventually(t, 10*time.Second, "the query log", func() error {
		b, _ := os.ReadFile(filepath.Join(stateDir, "queries.jsonl"))
		if !strings.Contains(string(b), `"error":1064`) || !strings.Contains(string(b), `"type":"auth"`) {
			return fmt.Errorf("no syntax error or login yet in the query log")
		}
		return nil
	})

	// Everything Vigil shows or keeps.
	places := map[string]string{"/api/v1/sessions (in flight)": sessions}
	for _, p := range []string{"/api/v1/events?limit=1000", "/api/v1/sessions", "/api/v1/digests?limit=10000", "/api/v1/config",
		"/api/v1/query_log", "/api/v1/servers", "/api/v1/clusters", "/api/v1/rules", "/api/v1/query_cache", "/metrics"} {
		places["GET "+p] = httpBody(t, env, p)
	}
	if out, err := env.ctl(t, "events", "--limit", "1000"); err == nil {
		places["vigil ctl events"] = out
	}
	log, err := os.ReadFile(env.v.logf)
	if err != nil {
		t.Fatal(err)
	}
	places["vigil's log "+env.v.logf] = string(log)
	err = filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		places[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	qlog := places[filepath.Join(stateDir, "queries.jsonl")]
	for _, line := range strings.Split(qlog, "\n") {
		if strings.Contains(line, `"message"`) {
			t.Logf("query log: %s", line)
		}
	}
	if !strings.Contains(qlog, `near ? at line ?`) {
		t.Errorf("no masked syntax error message in the query log")
	}
	for where, text := range places {
		if leaks := findSecrets(text); len(leaks) > 0 {
			t.Errorf("secrets in %s:\n%s", where, strings.Join(leaks, "\n"))
		}
	}
}

var reSecret = regexp.MustCompile(`(?i)` + secretPrefix)

// findSecrets returns each line of text that holds a secret, cut to a
// window around it.
func findSecrets(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if loc := reSecret.FindStringIndex(line); loc != nil {
			lo, hi := max(loc[0]-300, 0), min(loc[1]+100, len(line))
			out = append(out, "  …"+line[lo:hi]+"…")
		}
	}
	return out
}

// httpBody returns the body of a GET of the admin API.
func httpBody(t testing.TB, env *clusterEnv, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + env.admin + path)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}
