<?php
// PHP mysqli (Debian php-mysql, on mysqlnd): the compatibility scenario.
//
// Text checks build statements with real_escape_string (mysqli has no
// client-side placeholders); ".ps" checks use mysqli::prepare (server-side
// prepared statements, the binary protocol). mysqli has change_user; its
// automatic reconnect (mysqli.reconnect) is gone since PHP 8.2.
// Run: VIGIL_COMPAT_PORT=... php -d mysqli.allow_local_infile=1 compat/drivers/php-mysqli.php
// Output: "PASS <check>", "FAIL <check>: <detail>", "SKIP <check>: <why>".

require __DIR__ . '/compat_common.php';

mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);

function mconnect(string $user = USER, string $password = PASSWORD): mysqli
{
    $m = mysqli_init();
    $m->options(MYSQLI_OPT_CONNECT_TIMEOUT, 10);
    $m->options(MYSQLI_OPT_READ_TIMEOUT, 30);
    $m->options(MYSQLI_OPT_LOCAL_INFILE, true);
    $m->real_connect(HOST, $user, $password, DB, PORT);
    $m->set_charset('utf8mb4');
    return $m;
}

// rows runs a text query and returns every row as a list.
function rows(mysqli $m, string $sql): array
{
    $r = $m->query($sql);
    if ($r === true) {
        return [];
    }
    $out = $r->fetch_all(MYSQLI_NUM);
    $r->free();
    return $out;
}

// prows prepares, binds (types as bind_param) and executes; returns rows
// (or the affected rows for a statement without a result).
function prows(mysqli $m, string $sql, string $types = '', array $args = [])
{
    $st = $m->prepare($sql);
    if ($types !== '') {
        $st->bind_param($types, ...$args);
    }
    $st->execute();
    $r = $st->get_result();
    if ($r === false) {
        $n = $st->affected_rows;
        $st->close();
        return $n;
    }
    $out = $r->fetch_all(MYSQLI_NUM);
    $st->close();
    return $out;
}

print "# PHP " . PHP_VERSION . " mysqli (" . mysqli_get_client_info() . ")\n";

$m = null;
check('connect', function () use (&$m) {
    $m = mconnect();
    expect('DATABASE()', rows($m, 'SELECT DATABASE()')[0][0], DB);
});
if ($m === null) {
    exit(0);
}
$HEAL = function () use (&$m) {
    heal_with(fn() => rows($m, 'SELECT 1'), function () use (&$m) {
        $m = mconnect();
    });
};
check('setup', function () use ($m) {
    foreach (setup_statements() as $s) {
        $m->query($s);
    }
});

$e = function (string $s) use (&$m) {
    return "'" . $m->real_escape_string($s) . "'";
};

// --- text protocol (escaped literals) ---
check('params.text', function () use ($m, $e) {
    $r = rows($m, 'SELECT ' . $e(TRICKY) . ', ' . 42);
    expect('SELECT', [$r[0][0], (int)$r[0][1]], [TRICKY, 42]);
    $m->query('INSERT INTO vals (k, i, s) VALUES (' . $e('params-text') . ', 42, ' . $e(TRICKY) . ')');
    expect('row', rows($m, "SELECT i, s FROM vals WHERE k = 'params-text'"), [['42', TRICKY]]);
});
check('nulls.text', function () use ($m) {
    $m->query("INSERT INTO vals (k, i, s, d, dt, b) VALUES ('nulls-text', NULL, NULL, NULL, NULL, NULL)");
    expect('row', rows($m, "SELECT i, s, d, dt, b FROM vals WHERE k = 'nulls-text'"), [[null, null, null, null, null]]);
});
check('emoji.text', function () use ($m, $e) {
    expect('SELECT', rows($m, 'SELECT ' . $e(EMOJI))[0][0], EMOJI);
    $m->query("INSERT INTO vals (k, s) VALUES ('emoji-text', " . $e(EMOJI) . ')');
    expect('row', rows($m, "SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = 'emoji-text'"),
        [[EMOJI, (string)EMOJI_CHARS, (string)strlen(EMOJI)]]);
});
check('decimal.text', function () use ($m) {
    $m->query("INSERT INTO vals (k, d) VALUES ('decimal-text', '" . DECIMAL . "')");
    expect('row', rows($m, "SELECT d, d * 2 FROM vals WHERE k = 'decimal-text'"), [[DECIMAL, DECIMAL2]]);
});
check('datetime6.text', function () use ($m) {
    $m->query("INSERT INTO vals (k, dt) VALUES ('datetime6-text', '" . DATETIME6 . "')");
    expect('row', rows($m, "SELECT dt, MICROSECOND(dt) FROM vals WHERE k = 'datetime6-text'"), [[DATETIME6, '123456']]);
});
check('blob.text', function () use ($m) {
    $data = random_bytes(1 << 20);
    $m->query("INSERT INTO vals (k, b) VALUES ('blob-text', _binary'" . $m->real_escape_string($data) . "')");
    blob_verify(rows($m, "SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = 'blob-text'")[0], $data);
});
check('txn.commit', function () use ($m) {
    $m->begin_transaction();
    $m->query("INSERT INTO tx VALUES (1, 'committed')");
    expect('inside the transaction', rows($m, 'SELECT v FROM tx WHERE id = 1'), [['committed']]);
    $m->commit();
    expect('after COMMIT', rows($m, 'SELECT v FROM tx WHERE id = 1'), [['committed']]);
});
check('txn.rollback', function () use ($m) {
    $m->begin_transaction();
    $m->query("INSERT INTO tx VALUES (2, 'rolled back')");
    expect('inside the transaction', rows($m, 'SELECT COUNT(*) FROM tx WHERE id = 2')[0][0], '1');
    $m->rollback();
    expect('after ROLLBACK', rows($m, 'SELECT COUNT(*) FROM tx WHERE id = 2')[0][0], '0');
});
check('load_data_local.text', function () use ($m) {
    $path = load_file();
    try {
        $m->query('DELETE FROM loaded');
        $m->query(load_sql($path));
        expect('affected rows', $m->affected_rows, 1000);
        load_verify(rows($m, 'SELECT COUNT(*), SUM(id), MAX(name), (SELECT name FROM loaded WHERE id = 1000) FROM loaded')[0]);
    } finally {
        unlink($path);
    }
});
check('call_multi_result.text', function () use ($m) {
    $m->multi_query('CALL two_results(7)');
    $sets = [];
    do {
        if ($r = $m->store_result()) {
            $sets[] = $r->fetch_all(MYSQLI_NUM);
            $r->free();
        }
    } while ($m->more_results() && $m->next_result());
    expect('result sets', $sets, [[['7']], [['second-7', '14']]]);
    expect('SELECT after the CALL', rows($m, "SELECT 'still working'")[0][0], 'still working');
});
check('dup_key.text', function () use ($m) {
    $m->query("INSERT INTO dup VALUES (1, 'first')");
    dup_verify(fn() => $m->query("INSERT INTO dup VALUES (1, 'second')"));
    expect('SELECT after the error', rows($m, 'SELECT v FROM dup WHERE id = 1'), [['first']]);
});
check('ok_info.text', function () use ($m) {
    // OK packets with an info string (multi-row INSERT, UPDATE), then the
    // session goes on.
    $m->query('DELETE FROM dup WHERE id >= 100');
    $m->query("INSERT INTO dup VALUES (100, 'x'), (101, 'y')");
    expect('affected rows, info of INSERT', [$m->affected_rows, $m->info], [2, 'Records: 2  Duplicates: 0  Warnings: 0']);
    $m->query("UPDATE dup SET v = 'z' WHERE id >= 100");
    expect('affected rows, info of UPDATE', [$m->affected_rows, $m->info], [2, 'Rows matched: 2  Changed: 2  Warnings: 0']);
    expect('SELECT after', rows($m, "SELECT COUNT(*) FROM dup WHERE v = 'z'"), [['2']]);
});
check('last_insert_id.text', function () use ($m) {
    $m->query("INSERT INTO vals (k) VALUES ('lid-text')");
    $id = $m->insert_id;
    if (!$id) {
        throw new CheckFailed('no insert id in the OK packet');
    }
    expect('SELECT LAST_INSERT_ID()', (int)rows($m, 'SELECT LAST_INSERT_ID()')[0][0], $id);
    expect("the row's id", (int)rows($m, "SELECT id FROM vals WHERE k = 'lid-text'")[0][0], $id);
});
check('use_schema.text', function () use ($m) {
    try {
        $m->query('USE `' . DB . '_a`');
        expect('USE a; SELECT', rows($m, 'SELECT v FROM t'), [['from-a']]);
        $m->query('USE `' . DB . '_b`');
        expect('USE b; SELECT', rows($m, 'SELECT v FROM t'), [['from-b']]);
    } finally {
        $m->select_db(DB);
    }
    expect('DATABASE() after select_db', rows($m, 'SELECT DATABASE()')[0][0], DB);
});

check('read_your_writes.text', function () use ($m) {
    // DDL, then a read at once; a big write, then a read at once.
    $m->query('DROP TABLE IF EXISTS ryw_text');
    $m->query('CREATE TABLE ryw_text (id INT PRIMARY KEY, n INT)');
    expect('SELECT right after CREATE TABLE', rows($m, 'SELECT COUNT(*) FROM ryw_text'), [['0']]);
    $m->query('INSERT INTO ryw_text SELECT seq, seq FROM seq_1_to_10000');
    expect('SELECT right after INSERT ... SELECT', rows($m, 'SELECT COUNT(*), SUM(n) FROM ryw_text'), [['10000', '50005000']]);
});

// --- server-side prepared statements ---
check('params.ps', function () use ($m) {
    $r = prows($m, 'SELECT ?, ?', 'si', [TRICKY, 42]);
    expect('SELECT ?, ?', $r, [[TRICKY, 42]]);
    prows($m, 'INSERT INTO vals (k, i, s) VALUES (?, ?, ?)', 'sis', ['params-ps', 42, TRICKY]);
    expect('row', prows($m, 'SELECT i, s FROM vals WHERE k = ?', 's', ['params-ps']), [[42, TRICKY]]);
});
check('nulls.ps', function () use ($m) {
    $n = null;
    prows($m, 'INSERT INTO vals (k, i, s, d, dt, b) VALUES (?, ?, ?, ?, ?, ?)', 'sissss', ['nulls-ps', $n, $n, $n, $n, $n]);
    expect('row', prows($m, 'SELECT i, s, d, dt, b, ? IS NULL FROM vals WHERE k = ?', 'ss', [$n, 'nulls-ps']),
        [[null, null, null, null, null, 1]]);
});
check('emoji.ps', function () use ($m) {
    expect('SELECT ?', prows($m, 'SELECT ?', 's', [EMOJI])[0][0], EMOJI);
    prows($m, 'INSERT INTO vals (k, s) VALUES (?, ?)', 'ss', ['emoji-ps', EMOJI]);
    expect('row', prows($m, 'SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = ?', 's', ['emoji-ps']),
        [[EMOJI, EMOJI_CHARS, strlen(EMOJI)]]);
});
check('decimal.ps', function () use ($m) {
    prows($m, 'INSERT INTO vals (k, d) VALUES (?, ?)', 'ss', ['decimal-ps', DECIMAL]);
    expect('row', prows($m, 'SELECT d, d * 2 FROM vals WHERE k = ?', 's', ['decimal-ps']), [[DECIMAL, DECIMAL2]]);
});
check('datetime6.ps', function () use ($m) {
    prows($m, 'INSERT INTO vals (k, dt) VALUES (?, ?)', 'ss', ['datetime6-ps', DATETIME6]);
    expect('row', prows($m, 'SELECT dt, MICROSECOND(dt) FROM vals WHERE k = ?', 's', ['datetime6-ps']), [[DATETIME6, 123456]]);
});
check('blob.ps', function () use ($m) {
    $data = random_bytes(1 << 20);
    prows($m, 'INSERT INTO vals (k, b) VALUES (?, ?)', 'ss', ['blob-ps', $data]);
    blob_verify(prows($m, 'SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = ?', 's', ['blob-ps'])[0], $data);
});
check('blob.long_data', function () use ($m) {
    // bind_param 'b' + send_long_data: COM_STMT_SEND_LONG_DATA in 64 KiB pieces.
    $data = random_bytes(1 << 20);
    $st = $m->prepare('INSERT INTO vals (k, b) VALUES (?, ?)');
    $k = 'blob-long-data';
    $null = null;
    $st->bind_param('sb', $k, $null);
    foreach (str_split($data, 65536) as $piece) {
        $st->send_long_data(1, $piece);
    }
    $st->execute();
    $st->close();
    blob_verify(prows($m, 'SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = ?', 's', [$k])[0], $data);
});
check('load_data_local.ps', function () use ($m) {
    $path = load_file();
    try {
        $m->query('DELETE FROM loaded');
        expect('affected rows', prows($m, load_sql($path)), 1000);
        load_verify(prows($m, 'SELECT COUNT(*), SUM(id), MAX(name), (SELECT name FROM loaded WHERE id = 1000) FROM loaded')[0]);
    } finally {
        unlink($path);
    }
});
check('call_multi_result.ps', function () use ($m) {
    $st = $m->prepare('CALL two_results(?)');
    $n = 7;
    $st->bind_param('i', $n);
    $st->execute();
    $sets = [];
    do {
        if ($r = $st->get_result()) {
            $sets[] = $r->fetch_all(MYSQLI_NUM);
            $r->free();
        }
    } while ($st->more_results() && $st->next_result());
    $st->close();
    expect('result sets', $sets, [[[7]], [['second-7', 14]]]);
    expect('SELECT after the CALL', prows($m, "SELECT 'still working'")[0][0], 'still working');
});
check('dup_key.ps', function () use ($m) {
    dup_verify(fn() => prows($m, 'INSERT INTO dup VALUES (?, ?)', 'is', [1, 'third']));
    expect('SELECT after the error', prows($m, 'SELECT v FROM dup WHERE id = ?', 'i', [1]), [['first']]);
});
check('ok_info.ps', function () use ($m) {
    prows($m, 'DELETE FROM dup WHERE id >= ?', 'i', [200]);
    expect('affected rows of INSERT', prows($m, 'INSERT INTO dup VALUES (?, ?), (?, ?)', 'isis', [200, 'x', 201, 'y']), 2);
    expect('affected rows of UPDATE', prows($m, 'UPDATE dup SET v = ? WHERE id >= ?', 'si', ['w', 200]), 2);
    expect('SELECT after', prows($m, 'SELECT COUNT(*) FROM dup WHERE v = ?', 's', ['w']), [[2]]);
});
check('last_insert_id.ps', function () use ($m) {
    $st = $m->prepare('INSERT INTO vals (k) VALUES (?)');
    $k = 'lid-ps';
    $st->bind_param('s', $k);
    $st->execute();
    $id = $st->insert_id;
    $st->close();
    if (!$id) {
        throw new CheckFailed('no insert id in the OK packet');
    }
    expect('SELECT LAST_INSERT_ID()', prows($m, 'SELECT LAST_INSERT_ID()')[0][0], $id);
    expect("the row's id", prows($m, 'SELECT id FROM vals WHERE k = ?', 's', [$k])[0][0], $id);
});
check('ps_schema', function () use ($m) {
    try {
        $m->query('USE `' . DB . '_a`');
        $sa = $m->prepare('SELECT v FROM t');
        $sa->execute();
        expect('USE a; prepare; execute', $sa->get_result()->fetch_all(MYSQLI_NUM), [['from-a']]);
        $m->query('USE `' . DB . '_b`');
        $sb = $m->prepare('SELECT v FROM t');
        $sb->execute();
        expect('USE b; prepare the same text; execute', $sb->get_result()->fetch_all(MYSQLI_NUM), [['from-b']]);
        $sa->execute();
        expect('the first statement again', $sa->get_result()->fetch_all(MYSQLI_NUM), [['from-a']]);
        $sa->close();
        $sb->close();
    } finally {
        $m->query('USE `' . DB . '`');
    }
});

check('read_your_writes.ps', function () use ($m) {
    // Prepared right after the DDL, executed right after each write.
    $m->query('DROP TABLE IF EXISTS ryw_ps');
    $m->query('CREATE TABLE ryw_ps (id INT PRIMARY KEY, n INT)');
    $st = $m->prepare('SELECT COUNT(*), SUM(n) FROM ryw_ps');
    $st->execute();
    expect('prepare and execute right after CREATE TABLE', $st->get_result()->fetch_all(MYSQLI_NUM), [[0, null]]);
    $m->query('INSERT INTO ryw_ps SELECT seq, seq FROM seq_1_to_10000');
    $st->execute();
    expect('execute right after INSERT ... SELECT', $st->get_result()->fetch_all(MYSQLI_NUM), [[10000, '50005000']]);
    prows($m, 'UPDATE ryw_ps SET n = n + ?', 'i', [1]);
    $st->execute();
    expect('execute right after a prepared UPDATE', $st->get_result()->fetch_all(MYSQLI_NUM), [[10000, '50015000']]);
    $st->close();
});

// --- session ---
check('warnings.select', function () use ($m) {
    expect('SELECT CAST', rows($m, "SELECT CAST('12abc' AS SIGNED)")[0][0], '12');
    $w = rows($m, 'SHOW WARNINGS');
    if (count($w) != 1 || $w[0][1] != 1292 || !str_contains($w[0][2], '12abc')) {
        throw new CheckFailed("SHOW WARNINGS after SELECT CAST('12abc' AS SIGNED): " . json_encode($w));
    }
});
check('warnings.dml', function () use ($m) {
    $m->query("INSERT IGNORE INTO dup VALUES (1, 'ignored')");
    expect('warning_count', $m->warning_count, 1);
    $w = rows($m, 'SHOW WARNINGS');
    if (count($w) != 1 || $w[0][1] != 1062) {
        throw new CheckFailed('SHOW WARNINGS after INSERT IGNORE of a duplicate: ' . json_encode($w));
    }
});
check('warnings.fresh', function () use ($m) {
    for ($i = 0; $i < 4; $i++) {
        rows($m, "SELECT CAST('x' AS SIGNED)");
    }
    $f = mconnect();
    try {
        expect('first SHOW WARNINGS of a new connection', rows($f, 'SHOW WARNINGS'), []);
    } finally {
        $f->close();
    }
});
check('connection_id', function () use ($m) {
    expect("SELECT CONNECTION_ID() vs the handshake's thread id", (int)rows($m, 'SELECT CONNECTION_ID()')[0][0], $m->thread_id);
});
check('reconnect', function () use (&$m) {
    $m->query("SET @compat_marker = 'old session'");
    $old = $m->thread_id;
    $m->close();
    $m = mconnect();
    expect('user variable and schema after reconnecting', rows($m, 'SELECT @compat_marker, DATABASE()'), [[null, DB]]);
    if ($m->thread_id == $old) {
        throw new CheckFailed("same thread id $old after reconnecting");
    }
});
skip('driver_reconnect', 'mysqli.reconnect was removed in PHP 8.2');
if (USER2 === '') {
    skip('change_user', 'VIGIL_COMPAT_USER2 is not set');
} else {
    check('change_user', function () use ($m) {
        $m->query("SET @compat_marker = 'before change_user'");
        $m->change_user(USER2, PASSWORD2, DB);
        expect('after change_user to ' . USER2, rows($m, 'SELECT CURRENT_USER(), DATABASE(), @compat_marker'),
            [[USER2 . '@%', DB, null]]);
        $m->change_user(USER, PASSWORD, DB);
        expect('after change_user back', rows($m, 'SELECT CURRENT_USER()')[0][0], USER . '@%');
    });
}
$m->close();
