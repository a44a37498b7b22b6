"""The compatibility scenario for Python DB-API drivers (PyMySQL and
mysqlclient), shared by pymysql.py and mysqlclient.py.

Both drivers bind parameters on the client only (paramstyle "format"):
every check runs over the text protocol. Output: one line per check,
"PASS <check>", "FAIL <check>: <detail>" or "SKIP <check>: <reason>"
(docs/compatibility.md).
"""

import decimal
import hashlib
import os
import sys
import tempfile
import traceback

if not os.environ.get("VIGIL_COMPAT_PORT"):
    sys.exit("set VIGIL_COMPAT_HOST, VIGIL_COMPAT_PORT, VIGIL_COMPAT_USER, VIGIL_COMPAT_PASSWORD and VIGIL_COMPAT_DB")
HOST = os.environ.get("VIGIL_COMPAT_HOST", "127.0.0.1")
PORT = int(os.environ["VIGIL_COMPAT_PORT"])
USER = os.environ.get("VIGIL_COMPAT_USER", "app")
PASSWORD = os.environ.get("VIGIL_COMPAT_PASSWORD", "app")
DB = os.environ.get("VIGIL_COMPAT_DB", "compat")
USER2 = os.environ.get("VIGIL_COMPAT_USER2", "")
PASSWORD2 = os.environ.get("VIGIL_COMPAT_PASSWORD2", "")

TRICKY = "O'Reilly \"quoted\" back\\slash; -- not a comment"
EMOJI = "h\u00e9llo w\u00f6rld \U0001F600\U0001F42C \U0001D11E \u4e2d\u6587"
DECIMAL = "12345678901234567890.0123456789"
DECIMAL2 = "24691357802469135780.0246913578"
DATETIME = "2024-02-29 23:59:58.123456"


class CheckFailed(Exception):
    pass


def expect(what, got, want):
    if got != want:
        raise CheckFailed("%s: got %r, want %r" % (what, got, want))


def one_line(s):
    return " ".join(str(s).split())


class Scenario:
    def __init__(self, name, driver, connect, error_code, sqlstate, change_user=None,
                 driver_reconnect=None, info=None):
        """connect(db=..., user=..., password=...) opens a connection with
        autocommit on and LOCAL INFILE allowed; error_code(e) and
        sqlstate(e, conn) read a driver error (sqlstate None: not exposed); change_user(conn, user, password,
        db), driver_reconnect(conn) and info(conn) (the info string of the
        last OK packet) are None when the driver offers no such thing."""
        self.name = name
        self.driver = driver
        self.connect = connect
        self.error_code = error_code
        self.sqlstate = sqlstate
        self.change_user = change_user
        self.driver_reconnect = driver_reconnect
        self.info = info
        self.conn = None

    def check(self, name, fn):
        try:
            fn()
        except CheckFailed as e:
            print("FAIL %s: %s" % (name, one_line(e)), flush=True)
        except Exception as e:  # a driver error is a failed check, not the end
            print("FAIL %s: %s: %s" % (name, type(e).__name__, one_line(e)), flush=True)
            traceback.print_exc(file=sys.stderr)
        else:
            print("PASS %s" % name, flush=True)
            return
        self.heal()

    def heal(self):
        """Replaces the connection when a failure left it unusable, so one
        failure does not fail every later check."""
        if self.conn is None:
            return
        try:
            self.q("SELECT 1")
        except Exception:
            print("# the connection is unusable after that failure: reconnecting", flush=True)
            try:
                self.conn.close()
            except Exception:
                pass
            try:
                self.conn = self.connect()
            except Exception as e:
                print("# reconnecting failed: %s" % one_line(e), flush=True)

    def skip(self, name, why):
        print("SKIP %s: %s" % (name, why), flush=True)

    def q(self, sql, args=None, conn=None):
        cur = (conn or self.conn).cursor()
        try:
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else cur.rowcount
        finally:
            cur.close()

    # --- the checks ---

    def c_connect(self):
        self.conn = self.connect()
        expect("SELECT DATABASE()", self.q("SELECT DATABASE()")[0][0], DB)

    def c_setup(self):
        for s in [
            "DROP TABLE IF EXISTS vals, tx, dup, loaded",
            "CREATE TABLE vals (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL UNIQUE,"
            " i INT NULL, s VARCHAR(255) NULL, d DECIMAL(30,10) NULL, dt DATETIME(6) NULL, b LONGBLOB NULL)"
            " DEFAULT CHARSET=utf8mb4",
            "CREATE TABLE tx (id INT PRIMARY KEY, v VARCHAR(32))",
            "CREATE TABLE dup (id INT PRIMARY KEY, v VARCHAR(32))",
            "CREATE TABLE loaded (id INT PRIMARY KEY, name VARCHAR(64)) DEFAULT CHARSET=utf8mb4",
            "DROP PROCEDURE IF EXISTS two_results",
            "CREATE PROCEDURE two_results(IN n INT) BEGIN SELECT n AS first; "
            "SELECT CONCAT('second-', n) AS second, n * 2 AS twice; END",
        ]:
            self.q(s)

    def c_params(self):
        r = self.q("SELECT %s, %s", (TRICKY, 42))
        expect("SELECT ?, ?", (r[0][0], int(r[0][1])), (TRICKY, 42))
        self.q("INSERT INTO vals (k, i, s) VALUES (%s, %s, %s)", ("params", 42, TRICKY))
        r = self.q("SELECT i, s FROM vals WHERE k = %s", ("params",))
        expect("row", [tuple(x) for x in r], [(42, TRICKY)])

    def c_nulls(self):
        self.q("INSERT INTO vals (k, i, s, d, dt, b) VALUES (%s, %s, %s, %s, %s, %s)",
               ("nulls", None, None, None, None, None))
        r = self.q("SELECT i, s, d, dt, b, %s IS NULL FROM vals WHERE k = %s", (None, "nulls"))
        expect("row", tuple(r[0]), (None, None, None, None, None, 1))

    def c_emoji(self):
        r = self.q("SELECT %s", (EMOJI,))
        expect("SELECT ?", r[0][0], EMOJI)
        self.q("INSERT INTO vals (k, s) VALUES (%s, %s)", ("emoji", EMOJI))
        r = self.q("SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = %s", ("emoji",))
        expect("row", tuple(r[0]), (EMOJI, len(EMOJI), len(EMOJI.encode("utf-8"))))

    def c_decimal(self):
        self.q("INSERT INTO vals (k, d) VALUES (%s, %s)", ("decimal", decimal.Decimal(DECIMAL)))
        r = self.q("SELECT d, d * 2 FROM vals WHERE k = %s", ("decimal",))
        expect("row", (str(r[0][0]), str(r[0][1])), (DECIMAL, DECIMAL2))

    def c_datetime6(self):
        import datetime
        want = datetime.datetime(2024, 2, 29, 23, 59, 58, 123456)
        self.q("INSERT INTO vals (k, dt) VALUES (%s, %s)", ("datetime6", want))
        r = self.q("SELECT dt, MICROSECOND(dt), CAST(dt AS CHAR) FROM vals WHERE k = %s", ("datetime6",))
        expect("row", tuple(r[0]), (want, 123456, DATETIME))

    def c_blob(self):
        data = os.urandom(1 << 20)
        sha = hashlib.sha256(data).hexdigest()
        self.q("INSERT INTO vals (k, b) VALUES (%s, %s)", ("blob", data))
        r = self.q("SELECT LENGTH(b), SHA2(b, 256) FROM vals WHERE k = %s", ("blob",))
        expect("LENGTH, SHA2 on the server", tuple(r[0]), (1 << 20, sha))
        r = self.q("SELECT b FROM vals WHERE k = %s", ("blob",))
        got = bytes(r[0][0])
        expect("sha256 of the value read back (length %d)" % len(got), hashlib.sha256(got).hexdigest(), sha)

    def c_txn_commit(self):
        self.conn.begin()
        self.q("INSERT INTO tx VALUES (1, 'committed')")
        expect("inside the transaction", self.q("SELECT v FROM tx WHERE id = 1"), (("committed",),))
        self.conn.commit()
        expect("after COMMIT", self.q("SELECT v FROM tx WHERE id = 1"), (("committed",),))

    def c_txn_rollback(self):
        self.conn.begin()
        self.q("INSERT INTO tx VALUES (2, 'rolled back')")
        expect("inside the transaction", self.q("SELECT COUNT(*) FROM tx WHERE id = 2")[0][0], 1)
        self.conn.rollback()
        expect("after ROLLBACK", self.q("SELECT COUNT(*) FROM tx WHERE id = 2")[0][0], 0)

    def c_load_data(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, encoding="utf-8") as f:
            for i in range(1, 1001):
                f.write("%d,name-%d%s\n" % (i, i, " \U0001F42C" if i == 1000 else ""))
            path = f.name
        try:
            self.q("DELETE FROM loaded")
            n = self.q("LOAD DATA LOCAL INFILE %s INTO TABLE loaded CHARACTER SET utf8mb4"
                       " FIELDS TERMINATED BY ',' (id, name)", (path,))
            expect("affected rows", n, 1000)
            r = self.q("SELECT COUNT(*), SUM(id), MAX(name) FROM loaded")
            expect("COUNT, SUM, MAX(name)", (r[0][0], int(r[0][1]), r[0][2]), (1000, 500500, "name-999"))
            expect("the emoji row", self.q("SELECT name FROM loaded WHERE id = 1000")[0][0], "name-1000 \U0001F42C")
        finally:
            os.unlink(path)

    def c_call(self):
        cur = self.conn.cursor()
        try:
            cur.execute("CALL two_results(%s)", (7,))
            expect("first result", [tuple(x) for x in cur.fetchall()], [(7,)])
            expect("another result", bool(cur.nextset()), True)
            got = [(a, int(b)) for a, b in cur.fetchall()]
            expect("second result", got, [("second-7", 14)])
            while cur.nextset():  # the CALL's own status
                pass
        finally:
            cur.close()
        expect("SELECT after the CALL", self.q("SELECT 'still working'")[0][0], "still working")

    def c_dup_key(self):
        self.q("INSERT INTO dup VALUES (1, 'first')")
        cur = self.conn.cursor()
        try:
            cur.execute("INSERT INTO dup VALUES (1, 'second')")
        except Exception as e:
            expect("error code", self.error_code(e), 1062)
            st = self.sqlstate(e, self.conn)  # before the cursor is closed
            if st is not None:
                expect("SQLSTATE", st, "23000")
        else:
            raise CheckFailed("the duplicate INSERT succeeded")
        finally:
            cur.close()
        expect("SELECT after the error", self.q("SELECT v FROM dup WHERE id = 1"), (("first",),))

    def c_ok_info(self):
        # OK packets with an info string (multi-row INSERT, UPDATE), then
        # the session goes on.
        self.q("DELETE FROM dup WHERE id >= 100")
        expect("affected rows of INSERT", self.q("INSERT INTO dup VALUES (100, 'x'), (101, 'y')"), 2)
        if self.info:
            expect("info of INSERT", self.info(self.conn), "Records: 2  Duplicates: 0  Warnings: 0")
        expect("affected rows of UPDATE", self.q("UPDATE dup SET v = 'z' WHERE id >= 100"), 2)
        if self.info:
            expect("info of UPDATE", self.info(self.conn), "Rows matched: 2  Changed: 2  Warnings: 0")
        expect("SELECT after", self.q("SELECT COUNT(*) FROM dup WHERE v = 'z'")[0][0], 2)

    def c_last_insert_id(self):
        cur = self.conn.cursor()
        cur.execute("INSERT INTO vals (k) VALUES (%s)", ("last-insert-id",))
        lid = cur.lastrowid
        cur.close()
        if not lid:
            raise CheckFailed("no insert id in the OK packet: %r" % lid)
        expect("SELECT LAST_INSERT_ID()", self.q("SELECT LAST_INSERT_ID()")[0][0], lid)
        expect("the row's id", self.q("SELECT id FROM vals WHERE k = 'last-insert-id'")[0][0], lid)

    def c_use_schema(self):
        try:
            self.q("USE `%s_a`" % DB)
            expect("USE a; SELECT", self.q("SELECT v FROM t"), (("from-a",),))
            self.q("USE `%s_b`" % DB)
            expect("USE b; SELECT", self.q("SELECT v FROM t"), (("from-b",),))
        finally:
            self.q("USE `%s`" % DB)
        expect("DATABASE()", self.q("SELECT DATABASE()")[0][0], DB)

    def c_read_your_writes(self):
        # DDL, then a read at once; a big write, then a read at once: each
        # read must see what this session just wrote.
        self.q("DROP TABLE IF EXISTS ryw")
        self.q("CREATE TABLE ryw (id INT PRIMARY KEY, n INT)")
        expect("SELECT right after CREATE TABLE", self.q("SELECT COUNT(*) FROM ryw")[0][0], 0)
        self.q("INSERT INTO ryw SELECT seq, seq FROM seq_1_to_10000")
        r = self.q("SELECT COUNT(*), SUM(n) FROM ryw")
        expect("SELECT right after INSERT ... SELECT", (r[0][0], int(r[0][1])), (10000, 50005000))

    def c_warnings_select(self):
        expect("SELECT CAST", self.q("SELECT CAST('12abc' AS SIGNED)")[0][0], 12)
        w = [tuple(x) for x in self.q("SHOW WARNINGS")]
        if len(w) != 1 or w[0][1] != 1292 or "12abc" not in w[0][2]:
            raise CheckFailed("SHOW WARNINGS after SELECT CAST('12abc' AS SIGNED): %r" % (w,))

    def c_warnings_dml(self):
        self.q("INSERT IGNORE INTO dup VALUES (1, 'ignored')")
        w = [tuple(x) for x in self.q("SHOW WARNINGS")]
        if len(w) != 1 or w[0][1] != 1062:
            raise CheckFailed("SHOW WARNINGS after INSERT IGNORE of a duplicate: %r" % (w,))

    def c_warnings_fresh(self):
        for _ in range(4):  # leave warnings behind on this session
            self.q("SELECT CAST('x' AS SIGNED)")
        fresh = self.connect()
        try:
            w = [tuple(x) for x in self.q("SHOW WARNINGS", conn=fresh)]
            expect("first SHOW WARNINGS of a new connection", w, [])
        finally:
            fresh.close()

    def c_connection_id(self):
        expect("SELECT CONNECTION_ID() vs the handshake's thread id",
               self.q("SELECT CONNECTION_ID()")[0][0], self.conn.thread_id())

    def c_reconnect(self):
        self.q("SET @compat_marker = 'old session'")
        old = self.conn.thread_id()
        self.conn.close()
        self.conn = self.connect()
        r = self.q("SELECT @compat_marker, DATABASE()")
        expect("user variable and schema after reconnecting", tuple(r[0]), (None, DB))
        if self.conn.thread_id() == old:
            raise CheckFailed("same thread id %d after reconnecting" % old)

    def c_driver_reconnect(self):
        victim = self.connect()
        old = victim.thread_id()
        self.q("KILL %d" % old)
        self.driver_reconnect(victim)
        try:
            r = self.q("SELECT 'reconnected', DATABASE()", conn=victim)
            expect("SELECT after the driver reconnected", tuple(r[0]), ("reconnected", DB))
            if victim.thread_id() == old:
                raise CheckFailed("same thread id %d after the kill" % old)
        finally:
            victim.close()

    def c_change_user(self):
        self.q("SET @compat_marker = 'before change_user'")
        self.change_user(self.conn, USER2, PASSWORD2, DB)
        r = self.q("SELECT CURRENT_USER(), DATABASE(), @compat_marker")
        expect("after change_user to %s" % USER2, tuple(r[0]), (USER2 + "@%", DB, None))
        self.change_user(self.conn, USER, PASSWORD, DB)
        expect("after change_user back", self.q("SELECT CURRENT_USER()")[0][0], USER + "@%")

    def run(self):
        print("# %s" % self.driver, flush=True)
        self.check("connect", self.c_connect)
        if self.conn is None:
            return
        self.check("setup", self.c_setup)
        for name, fn in [
            ("params.text", self.c_params),
            ("nulls.text", self.c_nulls),
            ("emoji.text", self.c_emoji),
            ("decimal.text", self.c_decimal),
            ("datetime6.text", self.c_datetime6),
            ("blob.text", self.c_blob),
            ("txn.commit", self.c_txn_commit),
            ("txn.rollback", self.c_txn_rollback),
            ("load_data_local.text", self.c_load_data),
            ("call_multi_result.text", self.c_call),
            ("dup_key.text", self.c_dup_key),
            ("ok_info.text", self.c_ok_info),
            ("last_insert_id.text", self.c_last_insert_id),
            ("use_schema.text", self.c_use_schema),
            ("read_your_writes.text", self.c_read_your_writes),
            ("warnings.select", self.c_warnings_select),
            ("warnings.dml", self.c_warnings_dml),
            ("warnings.fresh", self.c_warnings_fresh),
            ("connection_id", self.c_connection_id),
            ("reconnect", self.c_reconnect),
        ]:
            self.check(name, fn)
        if self.driver_reconnect:
            self.check("driver_reconnect", self.c_driver_reconnect)
        else:
            self.skip("driver_reconnect", "%s has no automatic reconnect" % self.name)
        if self.change_user and USER2:
            self.check("change_user", self.c_change_user)
        elif not self.change_user:
            self.skip("change_user", "%s has no change_user" % self.name)
        else:
            self.skip("change_user", "VIGIL_COMPAT_USER2 is not set")
        try:
            self.conn.close()
        except Exception:
            pass
