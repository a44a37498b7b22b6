<?php
// PHP PDO_mysql (Debian php-mysql, on mysqlnd): the compatibility scenario.
//
// Every check goes through PDO::prepare/execute, twice: ".text" on a
// connection with PDO::ATTR_EMULATE_PREPARES=true (PDO's default: values
// are quoted into the text on the client) and ".ps" with
// ATTR_EMULATE_PREPARES=false (server-side prepared statements, the binary
// protocol). PDO has no change_user, no automatic reconnect and no thread id.
// Run: VIGIL_COMPAT_PORT=... php compat/drivers/php-pdo.php

require __DIR__ . '/compat_common.php';

function pconnect(bool $emulate): PDO
{
    $dsn = 'mysql:host=' . HOST . ';port=' . PORT . ';dbname=' . DB . ';charset=utf8mb4';
    return new PDO($dsn, USER, PASSWORD, [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        PDO::ATTR_EMULATE_PREPARES => $emulate,
        PDO::ATTR_TIMEOUT => 10,
        PDO::MYSQL_ATTR_LOCAL_INFILE => true,
    ]);
}

// run prepares and executes; returns the rows (as strings or null) or the
// row count of a statement without a result set.
function run(PDO $p, string $sql, array $args = [])
{
    $st = $p->prepare($sql);
    foreach ($args as $i => $a) {
        $st->bindValue($i + 1, $a, $a === null ? PDO::PARAM_NULL : (is_int($a) ? PDO::PARAM_INT : PDO::PARAM_STR));
    }
    $st->execute();
    if ($st->columnCount() == 0) {
        return $st->rowCount();
    }
    $rows = $st->fetchAll(PDO::FETCH_NUM);
    $st->closeCursor();
    return strs($rows);
}

function strs(array $rows): array
{
    return array_map(fn($r) => array_map(fn($v) => $v === null ? null : (string)$v, $r), $rows);
}

print "# PHP " . PHP_VERSION . " PDO_mysql (" . (new ReflectionExtension('pdo_mysql'))->getVersion() . ", mysqlnd)\n";

$conns = [];
check('connect', function () use (&$conns) {
    $conns['text'] = pconnect(true);
    $conns['ps'] = pconnect(false);
    foreach ($conns as $p) {
        expect('DATABASE()', run($p, 'SELECT DATABASE()'), [[DB]]);
    }
});
if (count($conns) != 2) {
    exit(0);
}
check('setup', function () use ($conns) {
    foreach (setup_statements() as $s) {
        $conns['text']->exec($s);
    }
});

foreach (['text', 'ps'] as $mode) {
    $p = $conns[$mode];
    $HEAL = function () use (&$p, &$conns, $mode) {
        heal_with(fn() => run($p, 'SELECT 1'), function () use (&$p, &$conns, $mode) {
            $p = $conns[$mode] = pconnect($mode == 'text');
        });
    };
    check("params.$mode", function () use ($p, $mode) {
        expect('SELECT ?, ?', run($p, 'SELECT ?, ?', [TRICKY, 42]), [[TRICKY, '42']]);
        run($p, 'INSERT INTO vals (k, i, s) VALUES (?, ?, ?)', ["params-$mode", 42, TRICKY]);
        expect('row', run($p, 'SELECT i, s FROM vals WHERE k = ?', ["params-$mode"]), [['42', TRICKY]]);
    });
    check("nulls.$mode", function () use ($p, $mode) {
        run($p, 'INSERT INTO vals (k, i, s, d, dt, b) VALUES (?, ?, ?, ?, ?, ?)', ["nulls-$mode", null, null, null, null, null]);
        expect('row', run($p, 'SELECT i, s, d, dt, b, ? IS NULL FROM vals WHERE k = ?', [null, "nulls-$mode"]),
            [[null, null, null, null, null, '1']]);
    });
    check("emoji.$mode", function () use ($p, $mode) {
        expect('SELECT ?', run($p, 'SELECT ?', [EMOJI]), [[EMOJI]]);
        run($p, 'INSERT INTO vals (k, s) VALUES (?, ?)', ["emoji-$mode", EMOJI]);
        expect('row', run($p, 'SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = ?', ["emoji-$mode"]),
            [[EMOJI, (string)EMOJI_CHARS, (string)strlen(EMOJI)]]);
    });
    check("decimal.$mode", function () use ($p, $mode) {
        run($p, 'INSERT INTO vals (k, d) VALUES (?, ?)', ["decimal-$mode", DECIMAL]);
        expect('row', run($p, 'SELECT d, d * 2 FROM vals WHERE k = ?', ["decimal-$mode"]), [[DECIMAL, DECIMAL2]]);
    });
    check("datetime6.$mode", function () use ($p, $mode) {
        run($p, 'INSERT INTO vals (k, dt) VALUES (?, ?)', ["datetime6-$mode", DATETIME6]);
        expect('row', run($p, 'SELECT dt, MICROSECOND(dt) FROM vals WHERE k = ?', ["datetime6-$mode"]), [[DATETIME6, '123456']]);
    });
    check("blob.$mode", function () use ($p, $mode) {
        $data = random_bytes(1 << 20);
        $st = $p->prepare('INSERT INTO vals (k, b) VALUES (?, ?)');
        $st->bindValue(1, "blob-$mode");
        $st->bindValue(2, $data, PDO::PARAM_LOB);
        $st->execute();
        blob_verify(run($p, 'SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = ?', ["blob-$mode"])[0], $data);
    });
    if ($mode == 'text') {
        check('txn.commit', function () use ($p) {
            $p->beginTransaction();
            run($p, "INSERT INTO tx VALUES (1, 'committed')");
            expect('inside the transaction', run($p, 'SELECT v FROM tx WHERE id = 1'), [['committed']]);
            $p->commit();
            expect('after COMMIT', run($p, 'SELECT v FROM tx WHERE id = 1'), [['committed']]);
        });
        check('txn.rollback', function () use ($p) {
            $p->beginTransaction();
            run($p, "INSERT INTO tx VALUES (2, 'rolled back')");
            expect('inside the transaction', run($p, 'SELECT COUNT(*) FROM tx WHERE id = 2'), [['1']]);
            $p->rollBack();
            expect('after ROLLBACK', run($p, 'SELECT COUNT(*) FROM tx WHERE id = 2'), [['0']]);
        });
    }
    check("load_data_local.$mode", function () use ($p) {
        $path = load_file();
        try {
            $p->exec('DELETE FROM loaded');
            expect('affected rows', run($p, load_sql($path)), 1000);
            load_verify(run($p, 'SELECT COUNT(*), SUM(id), MAX(name), (SELECT name FROM loaded WHERE id = 1000) FROM loaded')[0]);
        } finally {
            unlink($path);
        }
    });
    check("call_multi_result.$mode", function () use ($p) {
        $st = $p->prepare('CALL two_results(?)');
        $st->execute([7]);
        $sets = [];
        do {
            // With native prepares PDO reports the CALL's final status as
            // an empty rowset with columns: only non-empty sets count.
            if ($st->columnCount() > 0 && ($rows = $st->fetchAll(PDO::FETCH_NUM))) {
                $sets[] = strs($rows);
            }
        } while ($st->nextRowset());
        $st->closeCursor();
        expect('result sets', $sets, [[['7']], [['second-7', '14']]]);
        expect('SELECT after the CALL', run($p, "SELECT 'still working'"), [['still working']]);
    });
    check("dup_key.$mode", function () use ($p, $mode) {
        if ($mode == 'text') {
            run($p, "INSERT INTO dup VALUES (1, 'first')");
        }
        dup_verify(fn() => run($p, 'INSERT INTO dup VALUES (?, ?)', [1, 'second']));
        expect('SELECT after the error', run($p, 'SELECT v FROM dup WHERE id = ?', [1]), [['first']]);
    });
    check("ok_info.$mode", function () use ($p, $mode) {
        // OK packets with an info string (multi-row INSERT, UPDATE), then
        // the session goes on.
        $base = $mode == 'text' ? 100 : 200;
        run($p, 'DELETE FROM dup WHERE id >= ?', [$base]);
        expect('affected rows of INSERT', run($p, 'INSERT INTO dup VALUES (?, ?), (?, ?)', [$base, 'x', $base + 1, 'y']), 2);
        expect('affected rows of UPDATE', run($p, 'UPDATE dup SET v = ? WHERE id >= ?', ["z-$mode", $base]), 2);
        expect('SELECT after', run($p, 'SELECT COUNT(*) FROM dup WHERE v = ?', ["z-$mode"]), [['2']]);
    });
    check("last_insert_id.$mode", function () use ($p, $mode) {
        run($p, 'INSERT INTO vals (k) VALUES (?)', ["lid-$mode"]);
        $id = $p->lastInsertId();
        if (!$id) {
            throw new CheckFailed('no insert id in the OK packet');
        }
        expect('SELECT LAST_INSERT_ID()', run($p, 'SELECT LAST_INSERT_ID()'), [[$id]]);
        expect("the row's id", run($p, 'SELECT id FROM vals WHERE k = ?', ["lid-$mode"]), [[$id]]);
    });
    check($mode == 'text' ? 'use_schema.text' : 'ps_schema', function () use ($p) {
        try {
            $p->exec('USE `' . DB . '_a`');
            $sa = $p->prepare('SELECT v FROM t');
            $sa->execute();
            expect('USE a; prepare; execute', strs($sa->fetchAll(PDO::FETCH_NUM)), [['from-a']]);
            $p->exec('USE `' . DB . '_b`');
            $sb = $p->prepare('SELECT v FROM t');
            $sb->execute();
            expect('USE b; prepare the same text; execute', strs($sb->fetchAll(PDO::FETCH_NUM)), [['from-b']]);
        } finally {
            $p->exec('USE `' . DB . '`');
        }
    });
    check("read_your_writes.$mode", function () use ($p, $mode) {
        // Prepared right after the DDL, executed right after each write.
        $p->exec("DROP TABLE IF EXISTS ryw_$mode");
        $p->exec("CREATE TABLE ryw_$mode (id INT PRIMARY KEY, n INT)");
        $st = $p->prepare("SELECT COUNT(*), SUM(n) FROM ryw_$mode");
        $st->execute();
        expect('prepare and execute right after CREATE TABLE', strs($st->fetchAll(PDO::FETCH_NUM)), [['0', null]]);
        $p->exec("INSERT INTO ryw_$mode SELECT seq, seq FROM seq_1_to_10000");
        $st->execute();
        expect('execute right after INSERT ... SELECT', strs($st->fetchAll(PDO::FETCH_NUM)), [['10000', '50005000']]);
        run($p, "UPDATE ryw_$mode SET n = n + ?", [1]);
        $st->execute();
        expect('execute right after a prepared UPDATE', strs($st->fetchAll(PDO::FETCH_NUM)), [['10000', '50015000']]);
    });
    check("warnings.select.$mode", function () use ($p) {
        expect('SELECT CAST', run($p, "SELECT CAST('12abc' AS SIGNED)"), [['12']]);
        $w = run($p, 'SHOW WARNINGS');
        if (count($w) != 1 || $w[0][1] != '1292' || !str_contains($w[0][2], '12abc')) {
            throw new CheckFailed("SHOW WARNINGS after SELECT CAST('12abc' AS SIGNED): " . show($w));
        }
    });
    check("warnings.dml.$mode", function () use ($p) {
        run($p, "INSERT IGNORE INTO dup VALUES (1, 'ignored')");
        $w = run($p, 'SHOW WARNINGS');
        if (count($w) != 1 || $w[0][1] != '1062') {
            throw new CheckFailed('SHOW WARNINGS after INSERT IGNORE of a duplicate: ' . show($w));
        }
    });
}

$HEAL = function () use (&$conns) {
    heal_with(fn() => run($conns['text'], 'SELECT 1'), function () use (&$conns) {
        $conns['text'] = pconnect(true);
    });
};
check('warnings.fresh', function () use ($conns) {
    for ($i = 0; $i < 4; $i++) {
        run($conns['text'], "SELECT CAST('x' AS SIGNED)");
    }
    $f = pconnect(true);
    expect('first SHOW WARNINGS of a new connection', run($f, 'SHOW WARNINGS'), []);
});
skip('connection_id', 'PDO does not expose the thread id');
check('reconnect', function () use (&$conns) {
    $p = $conns['text'];
    $p->exec("SET @compat_marker = 'old session'");
    $old = run($p, 'SELECT CONNECTION_ID()')[0][0];
    $conns['text'] = $p = null;
    $p = $conns['text'] = pconnect(true);
    expect('user variable and schema after reconnecting', run($p, 'SELECT @compat_marker, DATABASE()'), [[null, DB]]);
});
skip('driver_reconnect', 'PDO has no automatic reconnect');
skip('change_user', 'PDO has no change_user');
