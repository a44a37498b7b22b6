package sqlscan

import "testing"

var normalizeTests = []struct{ q, want string }{
	// the examples of the package documentation
	{"select  c from sbtest1 where id = 42", "SELECT c FROM sbtest1 WHERE id = ?"},
	{"SELECT * FROM t WHERE a IN (1,2, 3) AND b='x'", "SELECT * FROM t WHERE a IN (...) AND b = ?"},
	{"INSERT INTO t (a,b) VALUES (1,'a'),(2,'b')", "INSERT INTO t (a, b) VALUES (...)"},

	// sysbench
	{"SELECT c FROM sbtest1 WHERE id=?", "SELECT c FROM sbtest1 WHERE id = ?"},
	{"SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c", "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"},
	{"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 100", "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?"},
	{"UPDATE sbtest1 SET k=k+1 WHERE id=5", "UPDATE sbtest1 SET k = k + ? WHERE id = ?"},
	{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 4993, '0123', '4567')", "INSERT INTO sbtest1 (id, k, c, pad) VALUES (...)"},

	// whitespace, comments, case
	{"  SELECT\n\t1  ", "SELECT ?"},
	{"SELECT 1;", "SELECT ?"},
	{"SELECT 1 ; ; -- done", "SELECT ?"},
	{"/* hello */ SELECT /*+ BKA(t) */ a -- x\nFROM t # y", "SELECT a FROM t"},
	{"select a from T where B = 1", "SELECT a FROM T WHERE B = ?"},
	{"/*!40101 SET NAMES utf8 */", "SET NAMES utf8"},
	{"SELECT /*!50000 SQL_NO_CACHE */ a FROM t", "SELECT SQL_NO_CACHE a FROM t"},
	{"SELECT /*M!100101 1 + */ 2", "SELECT ? + ?"},
	{"SELECT 1; SELECT 2", "SELECT ?; SELECT ?"},
	{"SELECT 1;;; SELECT 2;", "SELECT ?; SELECT ?"},

	// literals
	{"SELECT 'it''s', \"q\\\"x\", N'n', _utf8mb4'u', _binary 'b', X'0A', x'0a', B'01', 0x1F, 0b101, 1.5e-3, .5, 1e10", "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"},
	{"SELECT 'a' 'b' 'c', 'd'", "SELECT ?, ?"},
	{"SELECT NULL, TRUE, false", "SELECT NULL, TRUE, FALSE"},
	{"SELECT a FROM t WHERE b = -5 AND c = - 5 AND d = +5", "SELECT a FROM t WHERE b = ? AND c = ? AND d = ?"},
	{"SELECT a-5, a - 5, a - -5, 1-1, (-5), -a", "SELECT a - ?, a - ?, a - ?, ? - ?, (?), - a"},
	{"SELECT -?", "SELECT - ?"},
	{"SELECT 123abc, `1ea`, t.0a, . 0A FROM t", "SELECT `123abc`, `1ea`, t.`0a`,.`0A` FROM t"},

	// identifiers and variables
	{"SELECT `a`, `Select`, `a b`, `a``b`, `1x`, `status` FROM `db`.`T`", "SELECT a, `Select`, `a b`, `a``b`, `1x`, status FROM db.T"},
	{"SELECT t . a, t.*, db.t.c FROM t", "SELECT t.a, t.*, db.t.c FROM t"},
	{"SELECT @X, @'Y', @@SESSION.Autocommit, @@GLOBAL.x", "SELECT @x, @'Y', @@session.autocommit, @@global.x"},
	{"SET @x := 1", "SET @x := ?"},
	{"SELECT ID, id, Id FROM t", "SELECT ID, id, Id FROM t"},

	// lists and rows
	{"SELECT * FROM t WHERE a IN (?, ?, ?)", "SELECT * FROM t WHERE a IN (...)"},
	{"SELECT * FROM t WHERE a IN ('a')", "SELECT * FROM t WHERE a IN (...)"},
	{"SELECT * FROM t WHERE a NOT IN (-1, +2, NULL)", "SELECT * FROM t WHERE a NOT IN (...)"},
	{"SELECT * FROM t WHERE a IN (SELECT b FROM u WHERE c IN (1,2))", "SELECT * FROM t WHERE a IN (SELECT b FROM u WHERE c IN (...))"},
	{"SELECT * FROM t WHERE a IN (1, b)", "SELECT * FROM t WHERE a IN (?, b)"},
	{"SELECT * FROM t WHERE (a, b) IN ((1, 2), (3, 4))", "SELECT * FROM t WHERE (a, b) IN (...)"},
	{"INSERT INTO t VALUES (1, NULL, DEFAULT, 'x')", "INSERT INTO t VALUES (...)"},
	{"INSERT INTO t VALUE (1)", "INSERT INTO t VALUE (...)"},
	{"INSERT INTO t VALUES (1, NOW()), (2, NOW())", "INSERT INTO t VALUES (?, NOW())"},
	{"INSERT INTO t VALUES (1, NOW()), (2, NOW()), (3, now( ))", "INSERT INTO t VALUES (?, NOW())"},
	{"INSERT INTO t VALUES (1, NOW()), (2, UUID()), (3, UUID())", "INSERT INTO t VALUES (?, NOW()), (?, UUID())"},
	{"INSERT INTO t VALUES (1, 2), (3, NOW()), (4, 5), (6, 7), (8, NOW())", "INSERT INTO t VALUES (...), (?, NOW()), (...), (?, NOW())"},
	{"INSERT INTO t VALUES (a), (b), (a)", "INSERT INTO t VALUES (a), (b), (a)"},
	{"INSERT INTO t VALUES (a + (1)), (a + (2))", "INSERT INTO t VALUES (a + (?))"},
	{"INSERT INTO t VALUES ((SELECT 1 FROM u WHERE x IN (1, 2))), ((SELECT 2 FROM u WHERE x IN (3)))", "INSERT INTO t VALUES ((SELECT ? FROM u WHERE x IN (...)))"},
	{"INSERT INTO t VALUES (1, a), (2, a) AS new ON DUPLICATE KEY UPDATE a = VALUES(a), b = VALUES(b)", "INSERT INTO t VALUES (?, a) AS new ON DUPLICATE KEY UPDATE a = VALUES (a), b = VALUES (b)"},
	{"INSERT INTO t VALUES ROW(1, a), ROW(2, a), (3, a)", "INSERT INTO t VALUES ROW(?, a), (?, a)"},
	{"INSERT INTO t VALUES (1, a), (2, a", "INSERT INTO t VALUES (?, a), (?, a"},
	{"INSERT INTO t VALUES (1, 2), (3, NOW()), (4, 5)", "INSERT INTO t VALUES (...), (?, NOW()), (...)"},
	{"INSERT INTO t VALUES(1),(2),(3) ON DUPLICATE KEY UPDATE a = VALUES(a)", "INSERT INTO t VALUES (...) ON DUPLICATE KEY UPDATE a = VALUES (a)"},
	{"VALUES ROW(1, 2), ROW(3, 4)", "VALUES ROW(...)"},

	// spacing around parentheses
	{"SELECT count( * ), COUNT(DISTINCT a), my_func(1), NOW( ) FROM t", "SELECT COUNT(*), COUNT(DISTINCT a), my_func (?), NOW() FROM t"},
	{"CREATE TABLE t (id int(11) NOT NULL, c varchar (255), PRIMARY KEY (id))", "CREATE TABLE t (id INT(?) NOT NULL, c VARCHAR(?), PRIMARY KEY (id))"},
	{"SELECT a FROM t WHERE EXISTS (SELECT 1)", "SELECT a FROM t WHERE EXISTS (SELECT ?)"},

	// operators
	{"SELECT a<=>b, a:=b, a->'$.x', a->>'$.y', a<>b, a!=b, a||b, a&&b, a<<1", "SELECT a <=> b, a := b, a -> ?, a ->> ?, a <> b, a != b, a || b, a && b, a << ?"},

	// unterminated
	{"SELECT 'abc", "SELECT ?"},
	{"SELECT `abc", "SELECT `abc"},
	{"SELECT 1 /* abc", "SELECT ?"},

	// empty
	{"", ""},
	{" ; -- x", ""},
}

func TestNormalize(t *testing.T) {
	for _, tt := range normalizeTests {
		got := string(Normalize(nil, []byte(tt.q)))
		if got != tt.want {
			t.Errorf("Normalize(%q)\n got %q\nwant %q", tt.q, got, tt.want)
		}
		checkDigest(t, []byte(tt.q))
	}
}

func TestNormalizeAppends(t *testing.T) {
	dst := []byte("prefix:")
	got := string(Normalize(dst, []byte("select 1")))
	if got != "prefix:SELECT ?" {
		t.Errorf("Normalize appended %q", got)
	}
}

// checkDigest checks the properties that tie Scan, Normalize and
// DigestText together.
func checkDigest(t testing.TB, q []byte) {
	t.Helper()
	norm := Normalize(nil, q)
	info := Scan(q)
	if d := DigestText(norm); d != info.Digest {
		t.Fatalf("Scan(%q).Digest = %x, DigestText(Normalize) = %x (normalised %q)", q, info.Digest, d, norm)
	}
	if (info.Digest == 0) != (len(norm) == 0) {
		t.Fatalf("Scan(%q).Digest = %x for normalised text %q", q, info.Digest, norm)
	}
	again := Normalize(nil, norm)
	if string(again) != string(norm) {
		t.Fatalf("Normalize is not idempotent for %q:\n once  %q\n twice %q", q, norm, again)
	}
}

func TestDigestEquality(t *testing.T) {
	same := [][]string{
		{
			"SELECT c FROM sbtest1 WHERE id=1",
			"select c from sbtest1 where id = 99999",
			"SELECT c\n  FROM sbtest1\n WHERE id = ?",
			"/* app:42 */ SELECT c FROM sbtest1 WHERE id='7' -- trailing",
			"SELECT c FROM `sbtest1` WHERE `id` = -3;",
			"SELECT /*+ NO_ICP(sbtest1) */ c FROM sbtest1 WHERE id = 0x10",
		},
		{
			"SELECT * FROM t WHERE a IN (1)",
			"SELECT * FROM t WHERE a IN (1, 2, 3, 4, 5)",
			"select * from t where a in ('x','y')",
			"SELECT * FROM t WHERE a IN (?,?,?)",
		},
		{
			"INSERT INTO t (a, b) VALUES (1, 2)",
			"INSERT INTO t (a, b) VALUES (1, 2), (3, 4), (5, 6)",
			"insert into t(a,b) values(?,?)",
			"INSERT INTO `t` (`a`, `b`) VALUES ('x', NULL)",
		},
		{
			"INSERT INTO t (a, b, c) VALUES (1, 'x', NOW())",
			"INSERT INTO t (a, b, c) VALUES (1, 'x', NOW()), (2, 'y', NOW()), (3, 'z', NOW())",
			"INSERT INTO t (a, b, c) VALUES (?, ?, now())",
		},
		{
			"SELECT COUNT(*) FROM t",
			"select count (*) from t",
		},
		{
			"BEGIN",
			"begin;",
			"  Begin  ",
		},
		{
			"SELECT @@session.autocommit",
			"select @@SESSION.AUTOCOMMIT",
		},
	}
	for _, group := range same {
		want := Scan([]byte(group[0])).Digest
		for _, q := range group[1:] {
			if got := Scan([]byte(q)).Digest; got != want {
				t.Errorf("digest of %q (%q) differs from %q (%q)", q, Normalize(nil, []byte(q)), group[0], Normalize(nil, []byte(group[0])))
			}
		}
	}

	different := []string{
		"SELECT c FROM sbtest1 WHERE id = 1",
		"SELECT c FROM sbtest2 WHERE id = 1",
		"SELECT c FROM sbtest1 WHERE k = 1",
		"SELECT pad FROM sbtest1 WHERE id = 1",
		"SELECT c FROM sbtest1 WHERE id > 1",
		"SELECT c FROM sbtest1 WHERE id = 1 FOR UPDATE",
		"SELECT c FROM sbtest1 WHERE id = a",
		"SELECT c FROM sbtest1 WHERE id = NULL",
		"SELECT c FROM sbtest1 WHERE id IN (1, a)",
		"SELECT c FROM sbtest1 WHERE id = 1; SELECT 1",
		"SELECT c FROM SBTEST1 WHERE id = 1",
		"SELECT `select` FROM sbtest1 WHERE id = 1",
		"SELECT `c` `x` FROM sbtest1 WHERE id = 1",
	}
	seen := map[uint64]string{}
	for _, q := range different {
		d := Scan([]byte(q)).Digest
		if prev, ok := seen[d]; ok {
			t.Errorf("%q and %q have the same digest", q, prev)
		}
		seen[d] = q
	}
}

func TestDigestText(t *testing.T) {
	if DigestText(nil) != 0 {
		t.Error("DigestText(nil) != 0")
	}
	// FNV-1a 64 of "a" (a published test vector).
	if got := DigestText([]byte("a")); got != 0xaf63dc4c8601ec8c {
		t.Errorf("DigestText(a) = %x", got)
	}
}
