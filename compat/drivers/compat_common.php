<?php
// What php-mysqli.php and php-pdo.php share: the environment, the check
// runner and the expected values (docs/compatibility.md).

if (!getenv('VIGIL_COMPAT_PORT')) {
    fwrite(STDERR, "set VIGIL_COMPAT_HOST, VIGIL_COMPAT_PORT, VIGIL_COMPAT_USER, VIGIL_COMPAT_PASSWORD and VIGIL_COMPAT_DB\n");
    exit(2);
}
define('HOST', getenv('VIGIL_COMPAT_HOST') ?: '127.0.0.1');
define('PORT', (int)getenv('VIGIL_COMPAT_PORT'));
define('USER', getenv('VIGIL_COMPAT_USER') ?: 'app');
define('PASSWORD', getenv('VIGIL_COMPAT_PASSWORD') ?: 'app');
define('DB', getenv('VIGIL_COMPAT_DB') ?: 'compat');
define('USER2', getenv('VIGIL_COMPAT_USER2') ?: '');
define('PASSWORD2', getenv('VIGIL_COMPAT_PASSWORD2') ?: '');

const TRICKY = "O'Reilly \"quoted\" back\\slash; -- not a comment";
const EMOJI = "h\u{e9}llo w\u{f6}rld \u{1F600}\u{1F42C} \u{1D11E} \u{4e2d}\u{6587}";
const DECIMAL = '12345678901234567890.0123456789';
const DECIMAL2 = '24691357802469135780.0246913578';
const DATETIME6 = '2024-02-29 23:59:58.123456';
define('EMOJI_CHARS', preg_match_all('/./su', EMOJI)); // no mbstring needed

class CheckFailed extends Exception
{
}

function one_line(string $s): string
{
    return trim(preg_replace('/\s+/', ' ', $s));
}

// $HEAL, when set, runs after a failed check: it replaces a connection
// that the failure left unusable, so one failure does not fail every
// later check.
$HEAL = null;

function check(string $name, callable $fn): void
{
    global $HEAL;
    try {
        $fn();
        print "PASS $name\n";
        return;
    } catch (CheckFailed $e) {
        print "FAIL $name: " . one_line($e->getMessage()) . "\n";
    } catch (Throwable $e) {
        print "FAIL $name: " . get_class($e) . ': ' . one_line($e->getMessage()) . "\n";
        fwrite(STDERR, "$name: $e\n");
    }
    if ($HEAL) {
        $HEAL();
    }
}

// heal_with runs probe and, when it throws, replaces the connection with
// connect().
function heal_with(callable $probe, callable $connect): void
{
    try {
        $probe();
    } catch (Throwable $e) {
        print "# the connection is unusable after that failure: reconnecting\n";
        try {
            $connect();
        } catch (Throwable $e) {
            print '# reconnecting failed: ' . one_line($e->getMessage()) . "\n";
        }
    }
}

function skip(string $name, string $why): void
{
    print "SKIP $name: $why\n";
}

function show($v): string
{
    $s = json_encode($v, JSON_UNESCAPED_UNICODE | JSON_PARTIAL_OUTPUT_ON_ERROR);
    return strlen($s) > 300 ? substr($s, 0, 300) . '…' : $s;
}

function expect(string $what, $got, $want): void
{
    if ($got !== $want) {
        throw new CheckFailed("$what: got " . show($got) . ', want ' . show($want));
    }
}

function setup_statements(): array
{
    return [
        'DROP TABLE IF EXISTS vals, tx, dup, loaded',
        'CREATE TABLE vals (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL UNIQUE,'
        . ' i INT NULL, s VARCHAR(255) NULL, d DECIMAL(30,10) NULL, dt DATETIME(6) NULL, b LONGBLOB NULL)'
        . ' DEFAULT CHARSET=utf8mb4',
        'CREATE TABLE tx (id INT PRIMARY KEY, v VARCHAR(32))',
        'CREATE TABLE dup (id INT PRIMARY KEY, v VARCHAR(32))',
        'CREATE TABLE loaded (id INT PRIMARY KEY, name VARCHAR(64)) DEFAULT CHARSET=utf8mb4',
        'DROP PROCEDURE IF EXISTS two_results',
        "CREATE PROCEDURE two_results(IN n INT) BEGIN SELECT n AS first; "
        . "SELECT CONCAT('second-', n) AS second, n * 2 AS twice; END",
    ];
}

// blob_verify checks a row of LENGTH(b), SHA2(b, 256), b against data.
function blob_verify(array $row, string $data): void
{
    $sha = hash('sha256', $data);
    expect('LENGTH, SHA2 on the server', [(int)$row[0], $row[1]], [1 << 20, $sha]);
    expect('sha256 of the value read back (length ' . strlen((string)$row[2]) . ')', hash('sha256', (string)$row[2]), $sha);
}

// load_file writes the 1000 rows of the LOAD DATA checks to a new file.
function load_file(): string
{
    $path = tempnam(sys_get_temp_dir(), 'compat-load-');
    $f = fopen($path, 'w');
    for ($i = 1; $i <= 1000; $i++) {
        fwrite($f, "$i,name-$i" . ($i == 1000 ? " \u{1F42C}" : '') . "\n");
    }
    fclose($f);
    return $path;
}

function load_sql(string $path): string
{
    return "LOAD DATA LOCAL INFILE '" . addslashes($path) . "' INTO TABLE loaded CHARACTER SET utf8mb4"
        . " FIELDS TERMINATED BY ',' (id, name)";
}

// load_verify checks COUNT(*), SUM(id), MAX(name) and the emoji row.
function load_verify(array $row): void
{
    expect('COUNT, SUM, MAX(name), the emoji row', array_map('strval', $row), ['1000', '500500', 'name-999', "name-1000 \u{1F42C}"]);
}

// dup_verify runs fn, which must fail with 1062 / SQLSTATE 23000.
function dup_verify(callable $fn): void
{
    try {
        $fn();
    } catch (mysqli_sql_exception $e) {
        expect('error code, SQLSTATE', [$e->getCode(), $e->getSqlState()], [1062, '23000']);
        return;
    } catch (PDOException $e) {
        expect('error code, SQLSTATE', [$e->errorInfo[1] ?? null, $e->errorInfo[0] ?? null], [1062, '23000']);
        return;
    }
    throw new CheckFailed('the duplicate INSERT succeeded');
}
