package sqlscan

import (
	"fmt"
	"strings"
	"testing"
)

// refsTests: the names each text names, "name" certain and "name?" a
// candidate, in order of first appearance; "..." at the end: Overflow.
var refsTests = []struct {
	q    string
	want string
	use  string
}{
	{q: "SELECT 1"},
	{q: "SELECT c FROM t WHERE id = 1"},
	{q: "SELECT * FROM db.t", want: "db"},
	{q: "SELECT t.c FROM t", want: "t?"},
	{q: "SELECT x.c FROM db.t AS x", want: "x? db"},
	{q: "SELECT db.t.c FROM t", want: "db"},
	{q: "SELECT * FROM `my db`.`t`", want: "my db"},
	{q: "SELECT * FROM `a``b`.t", want: "a`b"},
	{q: "SELECT * FROM `a``b`.t, `a``b`.u", want: "a`b"},
	{q: "SELECT * FROM a . t", want: "a"},
	{q: "SELECT db.f(1)", want: "db?"},
	{q: "SELECT t.* FROM db.t", want: "t? db"},
	{q: "SELECT db.t.* FROM db.t", want: "db"},
	{q: "SELECT * FROM a.t1, b.t2 WHERE a.t1.x = b.t2.y", want: "a b"},
	{q: "SELECT * FROM a.t1 JOIN b.t2 ON t1.x = t2.y", want: "a b t1? t2?"},
	{q: "SELECT * FROM a.t1 x LEFT JOIN b.t2 y USING (id)", want: "a b"},
	{q: "SELECT * FROM (SELECT * FROM a.t) s, b.u", want: "a b?"},
	{q: "INSERT INTO a.t SELECT * FROM b.u", want: "a b"},
	{q: "INSERT a.t VALUES (1, 2), (3, 4)", want: "a"},
	{q: "INSERT IGNORE INTO a.t (x) VALUES (1) ON DUPLICATE KEY UPDATE t.x = 2", want: "a t?"},
	{q: "REPLACE INTO a.t VALUES (1)", want: "a"},
	{q: "UPDATE a.t SET x = 1", want: "a"},
	{q: "UPDATE a.t1, b.t2 SET t1.x = t2.y", want: "a b t1? t2?"},
	{q: "DELETE FROM a.t WHERE id IN (1, 2) AND b.f(x)", want: "a b?"},
	{q: "DELETE t1 FROM a.t1 JOIN b.t2", want: "a b"},
	{q: "TRUNCATE a.t", want: "a"},
	{q: "TRUNCATE TABLE a.t", want: "a"},
	{q: "ALTER TABLE a.t ADD COLUMN c INT", want: "a"},
	{q: "ALTER TABLE a.t RENAME TO b.t", want: "a b"},
	{q: "CREATE TABLE a.t (id INT REFERENCES b.p (id))", want: "a b"},
	{q: "CREATE TEMPORARY TABLE IF NOT EXISTS a.t LIKE b.u", want: "a b?"},
	{q: "DROP TABLE IF EXISTS a.t, b.u", want: "a b"},
	{q: "DROP TEMPORARY TABLE a.t", want: "a"},
	{q: "CREATE TABLE a.t (x INT) SELECT x.y, z.w FROM b.u", want: "a x? z? b"},
	{q: "RENAME TABLE a.t TO b.t, c.t TO d.t", want: "a b c d"},
	{q: "LOCK TABLES a.t READ, b.t WRITE", want: "a b"},
	{q: "DESCRIBE a.t", want: "a"},
	{q: "DESC a.t", want: "a"},
	{q: "EXPLAIN a.t", want: "a"},
	{q: "EXPLAIN SELECT * FROM a.t", want: "a"},
	{q: "SELECT x FROM t ORDER BY x DESC, y.z", want: "y?"},
	{q: "TABLE a.t", want: "a"},
	{q: "CALL a.p(1)", want: "a"},
	{q: "CREATE VIEW a.v AS SELECT * FROM b.t", want: "a b"},
	{q: "CREATE OR REPLACE PROCEDURE a.p() SELECT 1", want: "a"},
	{q: "GRANT SELECT ON a.* TO u", want: "a?"},
	{q: "USE db", want: "db", use: "db"},
	{q: "USE `my``db`", want: "my`db", use: "my`db"},
	{q: "USE a; USE b", want: "a b", use: "b"},
	{q: "USE a; SELECT * FROM b.t", want: "a b", use: "a"},
	{q: "SHOW TABLES FROM db", want: "db"},
	{q: "SHOW FULL TABLES IN db LIKE 'x%'", want: "db"},
	{q: "SHOW TABLE STATUS FROM db", want: "db"},
	{q: "SHOW TRIGGERS IN db", want: "db"},
	{q: "SHOW EVENTS FROM db", want: "db"},
	{q: "SHOW OPEN TABLES FROM db", want: "db"},
	{q: "SHOW PROCEDURE STATUS WHERE Db IN ('a')"},
	{q: "SHOW TABLES WHERE Tables_in_db IN ('a')"},
	{q: "SHOW COLUMNS FROM t FROM db", want: "db"},
	{q: "SHOW COLUMNS FROM t"},
	{q: "SHOW FULL FIELDS FROM a.t", want: "a"},
	{q: "SHOW INDEX FROM t IN db", want: "db"},
	{q: "SHOW KEYS FROM t FROM db", want: "db"},
	{q: "SHOW CREATE TABLE a.t", want: "a"},
	{q: "SHOW CREATE DATABASE db", want: "db"},
	{q: "SHOW CREATE SCHEMA IF NOT EXISTS db", want: "db"},
	{q: "CREATE DATABASE db", want: "db"},
	{q: "CREATE DATABASE IF NOT EXISTS `db`", want: "db"},
	{q: "CREATE SCHEMA db CHARACTER SET utf8mb4", want: "db"},
	{q: "CREATE OR REPLACE DATABASE db", want: "db"},
	{q: "DROP DATABASE IF EXISTS db", want: "db"},
	{q: "DROP SCHEMA db", want: "db"},
	{q: "ALTER DATABASE db CHARACTER SET utf8mb4", want: "db"},
	{q: "ALTER DATABASE CHARACTER SET utf8mb4"},
	{q: "SELECT SCHEMA(), DATABASE()"},
	{q: "SELECT * FROM t /* db.t */ WHERE 1", want: ""},
	{q: "SELECT * FROM t -- db.t\n", want: ""},
	{q: "SELECT * FROM t # db.t", want: ""},
	{q: "SELECT /*! a.x */ 1", want: "a?"},
	{q: "SELECT 'db.t', \"db.t\" FROM t", want: ""},
	{q: "SELECT 1.5, .5, 1.e3, x.5 FROM t"},
	{q: "SELECT @x.y, @@global.max_connections, @'a'.b"},
	{q: "SELECT * FROM db.t; SELECT * FROM db2.t", want: "db db2"},
	{q: "SELECT * FROM db.t; USE db2", want: "db db2", use: "db2"},
	{q: "SELECT a.x FROM a.t", want: "a"},
	{q: "SELECT `a`.x FROM a.t", want: "a"},
	{q: "SELECT a.`select`, `a`.`b`.`c`", want: "a"},
	{q: "SELECT * FROM ``.t"},
	{q: "SELECT * FROM `db", want: ""},
	{q: "SELECT * FROM `db`.`t", want: "db"},
	{q: "SELECT * FROM `d``b", want: ""},
	{q: "SELECT a.", want: ""},
	{q: "SELECT .x", want: ""},
	{q: "SELECT * FROM .t", want: ""},
	{q: "SELECT * FROM status.t, `from`.t, mydb . t", want: "status from mydb"},
	{q: "SELECT a..b", want: ""},
	{q: "SELECT * FROM a1.t, a2.t, a3.t, a4.t, a5.t, a6.t, a7.t, a8.t", want: "a1 a2 a3 a4 a5 a6 a7 a8"},
	{q: "SELECT * FROM a1.t, a2.t, a3.t, a4.t, a5.t, a6.t, a7.t, a8.t, a1.u, a9.t", want: "a1 a2 a3 a4 a5 a6 a7 a8 ..."},
	{q: "BEGIN NOT ATOMIC INSERT INTO a.t VALUES (1); UPDATE b.t SET x = 1; END", want: "a b"},
	{q: "WITH c AS (SELECT * FROM a.t) SELECT * FROM c JOIN b.u", want: "a b"},
}

func refsString(r *Refs) string {
	var b strings.Builder
	for i := 0; i < r.Len(); i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.Write(r.Name(i))
		if !r.Certain(i) {
			b.WriteByte('?')
		}
	}
	if r.Overflow() {
		b.WriteString(" ...")
	}
	return b.String()
}

func TestScanRefs(t *testing.T) {
	var r Refs
	for _, tt := range refsTests {
		q := []byte(tt.q)
		info := ScanRefs(q, &r)
		if want := Scan(q); info != want {
			t.Errorf("ScanRefs(%q) = %+v, Scan = %+v", tt.q, info, want)
		}
		if got := refsString(&r); got != tt.want {
			t.Errorf("ScanRefs(%q): refs %q, want %q", tt.q, got, tt.want)
		}
		use, ok := r.Use()
		if ok != (tt.use != "") || string(use) != tt.use {
			t.Errorf("ScanRefs(%q): Use() = %q, %v, want %q", tt.q, use, ok, tt.use)
		}
	}
}

// TestScanRefsReuse: a Refs is reset by each ScanRefs.
func TestScanRefsReuse(t *testing.T) {
	var r Refs
	ScanRefs([]byte("USE `a``b`; SELECT * FROM c.t"), &r)
	ScanRefs([]byte("SELECT 1"), &r)
	if r.Len() != 0 || r.Overflow() {
		t.Fatalf("after reuse: %s", refsString(&r))
	}
	if _, ok := r.Use(); ok {
		t.Fatal("after reuse: Use() still set")
	}
}

// TestScanRefsLongQuoted: names to unescape that do not fit set Overflow.
func TestScanRefsLongQuoted(t *testing.T) {
	var b strings.Builder
	b.WriteString("SELECT * FROM ")
	for i := 0; i < 6; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "`%s``%d`.t", strings.Repeat("x", 30), i)
	}
	var r Refs
	ScanRefs([]byte(b.String()), &r)
	if !r.Overflow() {
		t.Fatalf("no overflow: %s", refsString(&r))
	}
	for i := 0; i < r.Len(); i++ {
		if want := strings.Repeat("x", 30) + "`" + fmt.Sprint(i); string(r.Name(i)) != want {
			t.Errorf("Name(%d) = %q, want %q", i, r.Name(i), want)
		}
	}
}

func TestScanRefsDoesNotAllocate(t *testing.T) {
	var r Refs
	for _, q := range [][]byte{benchPointSelect, benchInsert, benchComment, benchUpdate, benchRefs,
		[]byte("USE `a``b`; SHOW COLUMNS FROM t FROM db"),
	} {
		if n := testing.AllocsPerRun(100, func() { ScanRefs(q, &r) }); n != 0 {
			t.Errorf("ScanRefs(%q) allocates %v times", q, n)
		}
	}
}
