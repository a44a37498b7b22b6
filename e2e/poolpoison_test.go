package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// poolPoisonValidateIdle is the pool's validate_idle in TestPoolPoison:
// short, so that one round of the kill test waits it out (the slow
// checkout path, which also pings) while the others stay under it (the
// fast path, with the cheap socket check alone).
const poolPoisonValidateIdle = 2 * time.Second

// TestPoolPoison checks that a server connection the server closed never
// serves another client (issue 16, item 3): neither one closed after an
// error that closes the connection (a statement larger than the server's
// max_allowed_packet: 1153), nor an idle pooled one the server killed.
func TestPoolPoison(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 2}, func(c *config.Config) {
		// A small pool: the connection given back last is the next one
		// handed out, so a poisoned one is found at once.
		c.Clusters[0].Pool.MaxOpen = 8
		c.Clusters[0].Pool.ValidateIdle = config.Duration{Duration: poolPoisonValidateIdle}
	})
	writer := env.writer(t)
	if writer == "" {
		t.Fatal("no writer")
	}
	dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr)
	setup := openDB(t, dsn)
	mustExec(t, setup, "CREATE TABLE IF NOT EXISTS pp (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0, b LONGBLOB)")
	mustExec(t, setup, "INSERT IGNORE INTO pp (id) VALUES (1)")
	_ = setup.Close()

	t.Run("ClosedAfterPacketTooLarge", func(t *testing.T) { testPoisonPacketTooLarge(t, env, writer, dsn) })
	t.Run("IdleConnectionKilled", func(t *testing.T) { testPoisonIdleKilled(t, env, writer, dsn) })
}

// testPoisonPacketTooLarge sends, from client A, a statement larger than
// the primary's max_allowed_packet: the server answers 1153 and closes the
// connection. Then other clients, one after the other, must all succeed.
func testPoisonPacketTooLarge(t *testing.T, env *clusterEnv, writer, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	rows, err := env.sb.SQL(ctx, writer, "SELECT @@GLOBAL.max_allowed_packet")
	cancel()
	if err != nil || len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("max_allowed_packet on %s: %v %v", writer, rows, err)
	}
	maxPacket, _ := strconv.Atoi(rows[0][0])
	if maxPacket <= 0 || maxPacket > 32<<20 {
		t.Fatalf("max_allowed_packet on %s is %d: the test needs the 16 MiB default", writer, maxPacket)
	}
	// Larger than the server's limit, smaller than Vigil's (64 MiB): Vigil
	// answers 1153 itself once the monitor has read the server's
	// max_allowed_packet (issue 25), else forwards it and the server
	// refuses it (that path: internal/frontend TestClosingErrorNeverPooled
	// and TestServerRefusalNotResent).
	big := "INSERT INTO pp (id, b) VALUES (2, '" + strings.Repeat("x", maxPacket+(1<<20)) + "')"
	for round := range 3 {
		a := openDB(t, dsn)
		a.SetMaxOpenConns(1)
		actx, acancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := a.ExecContext(actx, big)
		acancel()
		_ = a.Close()
		var me *mysql.MySQLError
		switch {
		case err == nil:
			t.Fatalf("round %d: a %d-byte statement over max_allowed_packet %d succeeded", round, len(big), maxPacket)
		case errors.As(err, &me) && (me.Number == 1153 || me.Number == 7004):
			t.Logf("round %d: client A got %d: %s", round, me.Number, me.Message)
		default:
			t.Errorf("round %d: client A got an unclear error (want 1153, or 7004 when the server closed while Vigil still sent): %v", round, err)
		}
		// A's session ends (COM_QUIT) and gives its connections back.
		time.Sleep(300 * time.Millisecond)
		if errs := poisonProbe(dsn, 20); len(errs) > 0 {
			t.Errorf("round %d: %d of 20 unrelated clients failed after the server closed a connection on 1153:\n%s", round, len(errs), strings.Join(errs, "\n"))
		}
	}
}

// testPoisonIdleKilled kills Vigil's idle pooled connections on the
// servers (KILL of each Sleep connection of the app user), then lets new
// clients reuse the pool: none may get a killed connection. Two rounds
// come back before validate_idle (the cheap check on checkout), one after
// (the slow checkout path).
func testPoisonIdleKilled(t *testing.T, env *clusterEnv, writer, dsn string) {
	nodes := env.sb.NodeNames()
	for round, wait := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, poolPoisonValidateIdle + 500*time.Millisecond} {
		warmPool(t, dsn, 4)
		killed := 0
		for _, n := range nodes {
			killed += killIdleApp(t, env.sb, n)
		}
		if killed == 0 {
			t.Fatalf("round %d: no idle pooled connection of app found to kill", round)
		}
		time.Sleep(wait)
		if errs := poisonProbe(dsn, 20); len(errs) > 0 {
			t.Errorf("round %d: %d of 20 clients failed after %d idle pooled connections were killed (%s later):\n%s",
				round, len(errs), killed, wait, strings.Join(errs, "\n"))
		} else {
			t.Logf("round %d: %d idle pooled connections killed; 20 clients after %s: no error", round, killed, wait)
		}
	}
}

// warmPool has n clients hold a writer connection at the same time, so
// the pool keeps n idle connections to the primary afterwards.
func warmPool(t *testing.T, dsn string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			if _, err := tx.ExecContext(ctx, "UPDATE pp SET n = n + 1 WHERE id = 1"); err != nil {
				_ = tx.Rollback()
				errs <- err
				return
			}
			if _, err := tx.ExecContext(ctx, "DO SLEEP(0.3)"); err != nil {
				_ = tx.Rollback()
				errs <- err
				return
			}
			errs <- tx.Commit()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("warming the pool: %v", err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the sessions end and give their connections back
}

// killIdleApp kills, on node, every connection of the app user that is
// idle (Vigil's pooled connections; no client is connected now) and
// returns how many.
func killIdleApp(t *testing.T, sb *sandbox.Sandbox, node string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := sb.SQL(ctx, node, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'app' AND COMMAND = 'Sleep'")
	if err != nil {
		t.Fatalf("processlist on %s: %v", node, err)
	}
	n := 0
	for _, r := range rows {
		if _, err := sb.SQL(ctx, node, "KILL CONNECTION "+r[0]); err != nil && !strings.Contains(err.Error(), "Unknown thread") {
			t.Fatalf("KILL %s on %s: %v", r[0], node, err)
		}
		n++
	}
	return n
}

// poisonProbe runs tries new clients one after the other, each on its
// own connection through Vigil: a write (on the primary) and a read. It
// returns their errors.
func poisonProbe(dsn string, tries int) []string {
	var errs []string
	for i := range tries {
		if err := poisonTry(dsn); err != nil {
			errs = append(errs, fmt.Sprintf("  client %d: %v", i, err))
		}
	}
	return errs
}

func poisonTry(dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "UPDATE pp SET n = n + 1 WHERE id = 1"); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var n int
	if err := c.QueryRowContext(ctx, "SELECT n FROM pp WHERE id = 1").Scan(&n); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}
