// MariaDB Connector/J (Debian libmariadb-java): the compatibility scenario.
//
// Every value check runs twice: ".text" on a connection with Connector/J's
// default client-side PreparedStatement (useServerPrepStmts=false) and
// ".ps" with useServerPrepStmts=true (server-side prepared statements, the
// binary protocol). Connector/J has no change_user and reconnects only in
// its failover modes.
// Run (the JDK's source launcher, no build step):
//   VIGIL_COMPAT_PORT=... java -cp /usr/share/java/mariadb-java-client.jar compat/drivers/connector-j/Compat.java
// (the test adds -XX:TieredStopAtLevel=1 -XX:+UseSerialGC: less CPU to start)
// Output: "PASS <check>", "FAIL <check>: <detail>", "SKIP <check>: <why>".

import java.io.File;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

public class Compat {
    static final String HOST = env("VIGIL_COMPAT_HOST", "127.0.0.1");
    static final String PORT = System.getenv("VIGIL_COMPAT_PORT");
    static final String USER = env("VIGIL_COMPAT_USER", "app");
    static final String PASSWORD = env("VIGIL_COMPAT_PASSWORD", "app");
    static final String DB = env("VIGIL_COMPAT_DB", "compat");

    static final String TRICKY = "O'Reilly \"quoted\" back\\slash; -- not a comment";
    static final String EMOJI = "h\u00e9llo w\u00f6rld \uD83D\uDE00\uD83D\uDC2C \uD834\uDD1E \u4e2d\u6587";
    static final String DECIMAL = "12345678901234567890.0123456789";
    static final String DECIMAL2 = "24691357802469135780.0246913578";
    static final String DATETIME6 = "2024-02-29 23:59:58.123456";

    static String env(String k, String def) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? def : v;
    }

    static class CheckFailed extends Exception {
        CheckFailed(String m) {
            super(m);
        }
    }

    interface Body {
        void run() throws Exception;
    }

    static String oneLine(Object s) {
        return String.valueOf(s).trim().replaceAll("\\s+", " ");
    }

    // heal, when set, runs after a failed check: it replaces a connection
    // that the failure left unusable, so one failure does not fail every
    // later check.
    static Runnable heal;

    static void check(String name, Body b) {
        try {
            b.run();
            System.out.println("PASS " + name);
            System.out.flush();
            return;
        } catch (CheckFailed e) {
            System.out.println("FAIL " + name + ": " + oneLine(e.getMessage()));
        } catch (Throwable e) {
            System.out.println("FAIL " + name + ": " + e.getClass().getSimpleName() + ": " + oneLine(e.getMessage()));
            e.printStackTrace();
        }
        System.out.flush();
        if (heal != null) {
            heal.run();
        }
    }

    // healer probes conns[i] and replaces it when it no longer works.
    static Runnable healer(Connection[] conns, int i) {
        return () -> {
            try {
                text(conns[i], "SELECT 1");
            } catch (SQLException e) {
                System.out.println("# the connection is unusable after that failure: reconnecting");
                try {
                    conns[i].close();
                } catch (SQLException ignored) {
                    // it is broken anyway
                }
                try {
                    conns[i] = connect(i == 1);
                } catch (SQLException e2) {
                    System.out.println("# reconnecting failed: " + oneLine(e2.getMessage()));
                }
            }
        };
    }

    // current is a Connection that forwards every call to conns[i] as it is
    // now, so checks keep working after heal replaced it.
    static Connection current(Connection[] conns, int i) {
        return (Connection) java.lang.reflect.Proxy.newProxyInstance(Connection.class.getClassLoader(),
                new Class<?>[] {Connection.class}, (proxy, method, args) -> {
                    try {
                        return method.invoke(conns[i], args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    static void skip(String name, String why) {
        System.out.println("SKIP " + name + ": " + why);
    }

    static String show(Object v) {
        String s;
        if (v instanceof byte[] b) {
            s = "<" + b.length + " bytes>";
        } else if (v instanceof List<?> l) {
            List<String> parts = new ArrayList<>();
            for (Object x : l) {
                parts.add(show(x));
            }
            s = "[" + String.join(", ", parts) + "]";
        } else if (v instanceof String) {
            s = "'" + v + "'";
        } else {
            s = String.valueOf(v);
        }
        return s.length() > 300 ? s.substring(0, 300) + "…" : s;
    }

    static void expect(String what, Object got, Object want) throws CheckFailed {
        if (!Objects.equals(show(got), show(want))) {
            throw new CheckFailed(what + ": got " + show(got) + ", want " + show(want));
        }
    }

    static Connection connect(boolean serverPrepare) throws SQLException {
        String url = "jdbc:mariadb://" + HOST + ":" + PORT + "/" + DB
                + "?connectTimeout=10000&socketTimeout=30000&allowLocalInfile=true"
                + "&useServerPrepStmts=" + serverPrepare;
        return DriverManager.getConnection(url, USER, PASSWORD);
    }

    // rows reads every row of a result set as a list of column values.
    static List<Object> rows(ResultSet rs) throws SQLException {
        List<Object> out = new ArrayList<>();
        int n = rs.getMetaData().getColumnCount();
        while (rs.next()) {
            List<Object> row = new ArrayList<>();
            for (int i = 1; i <= n; i++) {
                row.add(rs.getObject(i));
            }
            out.add(row);
        }
        rs.close();
        return out;
    }

    static List<Object> query(Connection c, String sql, Object... args) throws SQLException {
        try (PreparedStatement st = c.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                st.setObject(i + 1, args[i]);
            }
            if (!st.execute()) {
                return List.of(st.getUpdateCount());
            }
            return rows(st.getResultSet());
        }
    }

    static List<Object> text(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement()) {
            if (!st.execute(sql)) {
                return List.of(st.getUpdateCount());
            }
            return rows(st.getResultSet());
        }
    }

    static List<Object> row(Object... v) {
        return Arrays.asList(v);
    }

    static String sha256(byte[] b) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    public static void main(String[] argv) throws Exception {
        if (PORT == null || PORT.isEmpty()) {
            System.err.println("set VIGIL_COMPAT_HOST, VIGIL_COMPAT_PORT, VIGIL_COMPAT_USER, VIGIL_COMPAT_PASSWORD and VIGIL_COMPAT_DB");
            System.exit(2);
        }
        Connection[] conns = new Connection[2];
        check("connect", () -> {
            conns[0] = connect(false);
            conns[1] = connect(true);
            System.out.println("# Java " + System.getProperty("java.version") + " MariaDB Connector/J "
                    + conns[0].getMetaData().getDriverVersion());
            for (Connection c : conns) {
                expect("DATABASE()", text(c, "SELECT DATABASE()"), List.of(row(DB)));
            }
        });
        if (conns[1] == null) {
            return;
        }
        check("setup", () -> {
            for (String s : new String[] {
                "DROP TABLE IF EXISTS vals, tx, dup, loaded",
                "CREATE TABLE vals (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL UNIQUE,"
                    + " i INT NULL, s VARCHAR(255) NULL, d DECIMAL(30,10) NULL, dt DATETIME(6) NULL, b LONGBLOB NULL)"
                    + " DEFAULT CHARSET=utf8mb4",
                "CREATE TABLE tx (id INT PRIMARY KEY, v VARCHAR(32))",
                "CREATE TABLE dup (id INT PRIMARY KEY, v VARCHAR(32))",
                "CREATE TABLE loaded (id INT PRIMARY KEY, name VARCHAR(64)) DEFAULT CHARSET=utf8mb4",
                "DROP PROCEDURE IF EXISTS two_results",
                "CREATE PROCEDURE two_results(IN n INT) BEGIN SELECT n AS first; "
                    + "SELECT CONCAT('second-', n) AS second, n * 2 AS twice; END",
            }) {
                text(conns[0], s);
            }
        });
        SecureRandom rnd = new SecureRandom();
        String[] modes = {"text", "ps"};
        for (int m = 0; m < 2; m++) {
            String mode = modes[m];
            Connection c = current(conns, m);
            heal = healer(conns, m);
            check("params." + mode, () -> {
                expect("SELECT ?, ?", query(c, "SELECT ?, ?", TRICKY, 42), List.of(row(TRICKY, 42)));
                query(c, "INSERT INTO vals (k, i, s) VALUES (?, ?, ?)", "params-" + mode, 42, TRICKY);
                expect("row", query(c, "SELECT i, s FROM vals WHERE k = ?", "params-" + mode), List.of(row(42, TRICKY)));
            });
            check("nulls." + mode, () -> {
                try (PreparedStatement st = c.prepareStatement("INSERT INTO vals (k, i, s, d, dt, b) VALUES (?, ?, ?, ?, ?, ?)")) {
                    st.setString(1, "nulls-" + mode);
                    st.setNull(2, java.sql.Types.INTEGER);
                    st.setNull(3, java.sql.Types.VARCHAR);
                    st.setNull(4, java.sql.Types.DECIMAL);
                    st.setNull(5, java.sql.Types.TIMESTAMP);
                    st.setNull(6, java.sql.Types.BLOB);
                    st.executeUpdate();
                }
                expect("row", query(c, "SELECT i, s, d, dt, b, ? IS NULL FROM vals WHERE k = ?", null, "nulls-" + mode),
                        List.of(row(null, null, null, null, null, 1)));
            });
            check("emoji." + mode, () -> {
                expect("SELECT ?", query(c, "SELECT ?", EMOJI), List.of(row(EMOJI)));
                query(c, "INSERT INTO vals (k, s) VALUES (?, ?)", "emoji-" + mode, EMOJI);
                expect("row", query(c, "SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = ?", "emoji-" + mode),
                        List.of(row(EMOJI, (long) EMOJI.codePointCount(0, EMOJI.length()), (long) EMOJI.getBytes(StandardCharsets.UTF_8).length)));
            });
            check("decimal." + mode, () -> {
                query(c, "INSERT INTO vals (k, d) VALUES (?, ?)", "decimal-" + mode, new BigDecimal(DECIMAL));
                expect("row", query(c, "SELECT d, d * 2 FROM vals WHERE k = ?", "decimal-" + mode),
                        List.of(row(new BigDecimal(DECIMAL), new BigDecimal(DECIMAL2))));
            });
            check("datetime6." + mode, () -> {
                query(c, "INSERT INTO vals (k, dt) VALUES (?, ?)", "datetime6-" + mode, Timestamp.valueOf(DATETIME6));
                try (PreparedStatement st = c.prepareStatement("SELECT dt, MICROSECOND(dt) FROM vals WHERE k = ?")) {
                    st.setString(1, "datetime6-" + mode);
                    ResultSet rs = st.executeQuery();
                    if (!rs.next()) {
                        throw new CheckFailed("no row");
                    }
                    Timestamp ts = rs.getTimestamp(1);
                    expect("getTimestamp, getNanos, MICROSECOND(dt)", row(ts.toString(), ts.getNanos(), rs.getInt(2)),
                            row("2024-02-29 23:59:58.123456", 123456000, 123456));
                }
            });
            check("blob." + mode, () -> {
                byte[] data = new byte[1 << 20];
                rnd.nextBytes(data);
                try (PreparedStatement st = c.prepareStatement("INSERT INTO vals (k, b) VALUES (?, ?)")) {
                    st.setString(1, "blob-" + mode);
                    st.setBytes(2, data);
                    st.executeUpdate();
                }
                String sha = sha256(data);
                try (PreparedStatement st = c.prepareStatement("SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = ?")) {
                    st.setString(1, "blob-" + mode);
                    ResultSet rs = st.executeQuery();
                    if (!rs.next()) {
                        throw new CheckFailed("no row");
                    }
                    expect("LENGTH, SHA2 on the server", row(rs.getLong(1), rs.getString(2)), row(1L << 20, sha));
                    byte[] got = rs.getBytes(3);
                    expect("sha256 of the value read back (length " + got.length + ")", sha256(got), sha);
                }
            });
            if (mode.equals("text")) {
                check("txn.commit", () -> {
                    c.setAutoCommit(false);
                    try {
                        query(c, "INSERT INTO tx VALUES (1, 'committed')");
                        expect("inside the transaction", query(c, "SELECT v FROM tx WHERE id = 1"), List.of(row("committed")));
                        c.commit();
                    } finally {
                        c.setAutoCommit(true);
                    }
                    expect("after COMMIT", query(c, "SELECT v FROM tx WHERE id = 1"), List.of(row("committed")));
                });
                check("txn.rollback", () -> {
                    c.setAutoCommit(false);
                    try {
                        query(c, "INSERT INTO tx VALUES (2, 'rolled back')");
                        expect("inside the transaction", query(c, "SELECT COUNT(*) FROM tx WHERE id = 2"), List.of(row(1L)));
                        c.rollback();
                    } finally {
                        c.setAutoCommit(true);
                    }
                    expect("after ROLLBACK", query(c, "SELECT COUNT(*) FROM tx WHERE id = 2"), List.of(row(0L)));
                });
            }
            check("load_data_local." + mode, () -> {
                File f = File.createTempFile("compat-load-", ".csv");
                try {
                    StringBuilder b = new StringBuilder();
                    for (int i = 1; i <= 1000; i++) {
                        b.append(i).append(",name-").append(i).append(i == 1000 ? " \uD83D\uDC2C" : "").append('\n');
                    }
                    Files.writeString(f.toPath(), b.toString(), StandardCharsets.UTF_8);
                    text(c, "DELETE FROM loaded");
                    String sql = "LOAD DATA LOCAL INFILE '" + f.getPath() + "' INTO TABLE loaded CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' (id, name)";
                    // .text through Statement, .ps through a (server-side) PreparedStatement.
                    Object n = mode.equals("text") ? text(c, sql) : query(c, sql);
                    expect("affected rows", n, List.of(1000));
                    expect("COUNT, SUM, MAX(name), the emoji row",
                            query(c, "SELECT COUNT(*), SUM(id), MAX(name), (SELECT name FROM loaded WHERE id = 1000) FROM loaded"),
                            List.of(row(1000L, new BigDecimal(500500), "name-999", "name-1000 \uD83D\uDC2C")));
                } finally {
                    f.delete();
                }
            });
            check("call_multi_result." + mode, () -> {
                List<Object> sets = new ArrayList<>();
                if (mode.equals("text")) {
                    try (Statement st = c.createStatement()) {
                        boolean isRs = st.execute("CALL two_results(7)");
                        while (isRs || st.getUpdateCount() != -1) {
                            if (isRs) {
                                sets.add(rows(st.getResultSet()));
                            }
                            isRs = st.getMoreResults();
                        }
                    }
                } else {
                    try (PreparedStatement st = c.prepareStatement("CALL two_results(?)")) {
                        st.setInt(1, 7);
                        boolean isRs = st.execute();
                        while (isRs || st.getUpdateCount() != -1) {
                            if (isRs) {
                                sets.add(rows(st.getResultSet()));
                            }
                            isRs = st.getMoreResults();
                        }
                    }
                }
                expect("result sets", sets, List.of(List.of(row(7)), List.of(row("second-7", 14L))));
                expect("SELECT after the CALL", query(c, "SELECT 'still working'"), List.of(row("still working")));
            });
            check("dup_key." + mode, () -> {
                if (mode.equals("text")) {
                    text(c, "INSERT INTO dup VALUES (1, 'first')");
                }
                try {
                    query(c, "INSERT INTO dup VALUES (?, ?)", 1, "second");
                    throw new CheckFailed("the duplicate INSERT succeeded");
                } catch (SQLException e) {
                    expect("error code, SQLSTATE", row(e.getErrorCode(), e.getSQLState()), row(1062, "23000"));
                }
                expect("SELECT after the error", query(c, "SELECT v FROM dup WHERE id = ?", 1), List.of(row("first")));
            });
            check("ok_info." + mode, () -> {
                // OK packets with an info string (multi-row INSERT, UPDATE),
                // then the session goes on.
                int base = mode.equals("text") ? 100 : 200;
                query(c, "DELETE FROM dup WHERE id >= ?", base);
                expect("affected rows of INSERT", query(c, "INSERT INTO dup VALUES (?, ?), (?, ?)", base, "x", base + 1, "y"), List.of(2));
                expect("affected rows of UPDATE", query(c, "UPDATE dup SET v = ? WHERE id >= ?", "z-" + mode, base), List.of(2));
                expect("SELECT after", query(c, "SELECT COUNT(*) FROM dup WHERE v = ?", "z-" + mode), List.of(row(2L)));
            });
            check("last_insert_id." + mode, () -> {
                long id;
                try (PreparedStatement st = c.prepareStatement("INSERT INTO vals (k) VALUES (?)", Statement.RETURN_GENERATED_KEYS)) {
                    st.setString(1, "lid-" + mode);
                    st.executeUpdate();
                    ResultSet rs = st.getGeneratedKeys();
                    if (!rs.next()) {
                        throw new CheckFailed("no generated key");
                    }
                    id = rs.getLong(1);
                }
                expect("SELECT LAST_INSERT_ID()", query(c, "SELECT LAST_INSERT_ID()"), List.of(row(id)));
                expect("the row's id", query(c, "SELECT id FROM vals WHERE k = ?", "lid-" + mode), List.of(row((int) id)));
            });
            check(mode.equals("text") ? "use_schema.text" : "ps_schema", () -> {
                try {
                    text(c, "USE `" + DB + "_a`");
                    try (PreparedStatement sa = c.prepareStatement("SELECT v FROM t")) {
                        expect("USE a; prepare; execute", rows(sa.executeQuery()), List.of(row("from-a")));
                        text(c, "USE `" + DB + "_b`");
                        try (PreparedStatement sb = c.prepareStatement("SELECT v FROM t")) {
                            expect("USE b; prepare the same text; execute", rows(sb.executeQuery()), List.of(row("from-b")));
                        }
                        if (mode.equals("ps")) { // a client-side statement runs in the current schema
                            expect("the first statement again", rows(sa.executeQuery()), List.of(row("from-a")));
                        }
                    }
                } finally {
                    text(c, "USE `" + DB + "`");
                }
            });
            check("read_your_writes." + mode, () -> {
                // Prepared right after the DDL, executed right after each write.
                String t = "ryw_" + mode;
                text(c, "DROP TABLE IF EXISTS " + t);
                text(c, "CREATE TABLE " + t + " (id INT PRIMARY KEY, n INT)");
                try (PreparedStatement st = c.prepareStatement("SELECT COUNT(*), SUM(n) FROM " + t)) {
                    expect("prepare and execute right after CREATE TABLE", rows(st.executeQuery()), List.of(row(0L, null)));
                    text(c, "INSERT INTO " + t + " SELECT seq, seq FROM seq_1_to_10000");
                    expect("execute right after INSERT ... SELECT", rows(st.executeQuery()), List.of(row(10000L, new BigDecimal(50005000))));
                    query(c, "UPDATE " + t + " SET n = n + ?", 1);
                    expect("execute right after a prepared UPDATE", rows(st.executeQuery()), List.of(row(10000L, new BigDecimal(50015000))));
                }
            });
            check("warnings.select." + mode, () -> {
                try (PreparedStatement st = c.prepareStatement("SELECT CAST('12abc' AS SIGNED)")) {
                    expect("SELECT CAST", rows(st.executeQuery()), List.of(row(12L)));
                    SQLWarning w = st.getWarnings();
                    expect("getWarnings()", w == null ? null : row(w.getErrorCode(), w.getMessage()),
                            row(1292, "Truncated incorrect INTEGER value: '12abc'"));
                }
                List<Object> w = query(c, "SHOW WARNINGS");
                expect("SHOW WARNINGS after SELECT CAST('12abc' AS SIGNED)", w,
                        List.of(row("Warning", 1292L, "Truncated incorrect INTEGER value: '12abc'")));
            });
            check("warnings.dml." + mode, () -> {
                query(c, "INSERT IGNORE INTO dup VALUES (1, 'ignored')");
                List<Object> w = query(c, "SHOW WARNINGS");
                expect("SHOW WARNINGS after INSERT IGNORE of a duplicate", w,
                        List.of(row("Warning", 1062L, "Duplicate entry '1' for key 'PRIMARY'")));
            });
        }
        heal = healer(conns, 0);
        check("warnings.fresh", () -> {
            for (int i = 0; i < 4; i++) {
                text(conns[0], "SELECT CAST('x' AS SIGNED)");
            }
            try (Connection f = connect(false)) {
                expect("first SHOW WARNINGS of a new connection", text(f, "SHOW WARNINGS"), List.of());
            }
        });
        check("connection_id", () -> {
            long id = ((org.mariadb.jdbc.MariaDbConnection) conns[0]).getServerThreadId();
            expect("SELECT CONNECTION_ID() vs the handshake's thread id", text(conns[0], "SELECT CONNECTION_ID()"), List.of(row(id)));
        });
        check("reconnect", () -> {
            text(conns[0], "SET @compat_marker = 'old session'");
            long old = ((org.mariadb.jdbc.MariaDbConnection) conns[0]).getServerThreadId();
            conns[0].close();
            conns[0] = connect(false);
            expect("user variable and schema after reconnecting", text(conns[0], "SELECT @compat_marker, DATABASE()"), List.of(row(null, DB)));
            if (((org.mariadb.jdbc.MariaDbConnection) conns[0]).getServerThreadId() == old) {
                throw new CheckFailed("same thread id " + old + " after reconnecting");
            }
        });
        skip("driver_reconnect", "Connector/J reconnects only in its failover modes");
        skip("change_user", "Connector/J has no change_user");
        for (Connection c : conns) {
            c.close();
        }
    }
}
