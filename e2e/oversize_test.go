package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// TestOverMaxAllowedPacket (issue 25 items 2 and 4): with the servers'
// max_allowed_packet at 1 MiB, a statement over it gets 1153 from Vigil,
// for reads, writes and a prepared statement's long data, through
// go-sql-driver/mysql and the mariadb CLI, and no server receives it
// (before, a server closed the connection over it and Vigil sent it to a
// second replica); every refused statement and failed prepare has a
// query-log record; /ui/ refuses a foreign Host.
func TestOverMaxAllowedPacket(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	const limit = 1 << 20
	logPath := filepath.Join(SandboxDir(t), "queries.jsonl")
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, func(c *config.Config) {
		c.Log.Queries = true
		c.Log.File = &config.LogFile{Path: logPath}
	})
	nodes := []string{"node1", "node2", "node3"}
	waitServersOnline(t, env, 3)
	dsn := func(extra string) string {
		return fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&maxAllowedPacket=%d%s", env.addr, 64<<20, extra)
	}
	db := openDB(t, dsn(""))
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS big (id INT AUTO_INCREMENT PRIMARY KEY, v LONGBLOB)")
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := env.sb.SQL(ctx, n, fmt.Sprintf("SET GLOBAL max_allowed_packet = %d", limit))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A SET GLOBAL through Vigil closes its idle pooled connections (they
	// keep the old value): every server connection from now on has the
	// new bound, so a server that gets the statement refuses it.
	mustExec(t, db, fmt.Sprintf("SET GLOBAL max_allowed_packet = %d", limit))
	db.Close()
	time.Sleep(2 * time.Second) // a few monitor checks read the new value
	time.Sleep(time.Second)     // replicas have the table

	// What each server received: its bytes and the connections it closed
	// over a bad packet.
	received := func() map[string][2]int64 {
		m := map[string][2]int64{}
		for _, n := range nodes {
			m[n] = [2]int64{nodeStatus(t, env.sb, n, "Bytes_received"), nodeStatus(t, env.sb, n, "Aborted_clients")}
		}
		return m
	}
	noServerGot := func(t *testing.T, before map[string][2]int64) {
		t.Helper()
		after := received()
		for _, n := range nodes {
			if d := after[n][0] - before[n][0]; d >= limit {
				t.Errorf("%s received %d bytes: the statement reached it", n, d)
			}
			if d := after[n][1] - before[n][1]; d != 0 {
				t.Errorf("%s closed %d client connections (Aborted_clients)", n, d)
			}
		}
	}
	is1153 := func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 1153 && string(me.SQLState[:]) == "08S01"
	}
	pad := strings.Repeat("x", limit+1000)
	client := openDB(t, dsn(""))
	client.SetMaxOpenConns(1)

	t.Run("Read", func(t *testing.T) {
		// Just over the bound, and far over it (16 MiB: a server closes
		// the connection while Vigil still writes, which Vigil took for a
		// connection that never had the statement and resent elsewhere).
		var v string
		for _, big := range []string{pad, strings.Repeat("y", 16<<20)} {
			before := received()
			err := client.QueryRow("SELECT '" + big + "' AS big_read_marker").Scan(&v)
			if !is1153(err) {
				t.Errorf("%d bytes: got %v, want 1153", len(big), err)
			}
			noServerGot(t, before)
		}
		// The session goes on; just under the bound runs.
		if err := client.QueryRow("SELECT '" + pad[:limit-100] + "'").Scan(&v); err != nil {
			t.Fatalf("a statement under max_allowed_packet: %v", err)
		}
	})
	t.Run("Write", func(t *testing.T) {
		before := received()
		_, err := client.Exec("INSERT INTO big (v) VALUES ('" + pad + "') /* big_write_marker */")
		if !is1153(err) {
			t.Fatalf("got %v, want 1153", err)
		}
		noServerGot(t, before)
	})
	t.Run("PreparedLongData", func(t *testing.T) {
		// maxAllowedPacket 2 MiB: the driver sends a parameter over 1 MiB
		// with COM_STMT_SEND_LONG_DATA, in one packet over the servers'
		// bound.
		ps := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&maxAllowedPacket=%d", env.addr, 2<<20))
		ps.SetMaxOpenConns(1)
		before := received()
		_, err := ps.Exec("INSERT INTO big (v) VALUES (?)", []byte(pad))
		if !is1153(err) {
			t.Fatalf("got %v, want 1153", err)
		}
		noServerGot(t, before)
		if _, err := ps.Exec("INSERT INTO big (v) VALUES (?)", []byte("small")); err != nil {
			t.Fatalf("the next execute: %v", err)
		}
	})
	t.Run("MariaDBCLI", func(t *testing.T) {
		if !haveProgram("mariadb") {
			t.Skip("no mariadb client")
		}
		host, port, _ := strings.Cut(env.addr, ":")
		before := received()
		cmd := exec.Command("mariadb", "-h", host, "-P", port, "-u", "app", "-papp", "--max-allowed-packet=64M", "vigil_test")
		cmd.Stdin = strings.NewReader("SELECT '" + pad + "' AS big_cli_marker;\n")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "ERROR 1153 (08S01)") {
			t.Fatalf("mariadb: %v: %.300s", err, out)
		}
		noServerGot(t, before)
	})
	t.Run("QueryLog", func(t *testing.T) {
		if _, err := client.Exec("SELECT 1 AS multi_marker; SELECT 2"); err == nil {
			t.Fatal("a multi-statement was accepted without CLIENT_MULTI_STATEMENTS")
		}
		if _, err := client.Prepare("SELECT * FROM no_such_table_marker"); err == nil {
			t.Fatal("a prepare of a missing table succeeded")
		}
		// Statements are masked (a 1064's names too) and cut at 64 KiB:
		// records are told apart by their outcome. Refused by Vigil with
		// 1153: the two reads, the write, the execute with long data and
		// the CLI's read; with 1064: the multi-statement; the failed prepare
		// is the server's answer (1146, with the server named).
		Eventually(t, 10*time.Second, "the refused statements in the query log", func() error {
			f, err := os.Open(logPath)
			if err != nil {
				return err
			}
			defer f.Close()
			seen := map[float64]int{}
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 4<<20)
			for sc.Scan() {
				var e map[string]any
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("query log line is not JSON: %v", err)
				}
				code, _ := e["error"].(float64)
				switch code {
				case 1153, 1064:
					if e["refused_by"] != "vigil" || e["server"] != "" || e["message"] == nil {
						t.Fatalf("record of a statement Vigil refused: %v", e)
					}
				case 1146:
					if e["refused_by"] != nil || e["server"] == "" || !strings.Contains(fmt.Sprint(e["statement"]), "no_such_table_marker") {
						t.Fatalf("record of a failed prepare: %v", e)
					}
				}
				seen[code]++
			}
			if seen[1153] != 5 || seen[1064] != 1 || seen[1146] != 1 {
				return fmt.Errorf("records by error: %v; want 5 of 1153, 1 of 1064, 1 of 1146", seen)
			}
			return nil
		})
	})
	t.Run("DashboardForeignHost", func(t *testing.T) {
		for host, code := range map[string]int{env.admin: 200, "evil.example:" + strconv.Itoa(port(env.admin)): 403} {
			req, _ := http.NewRequest("GET", "http://"+env.admin+"/ui/", nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != code {
				t.Errorf("GET /ui/ with Host %s: %d, want %d", host, resp.StatusCode, code)
			}
		}
	})
}

// port is the port of a host:port address.
func port(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	n, _ := strconv.Atoi(p)
	return n
}
