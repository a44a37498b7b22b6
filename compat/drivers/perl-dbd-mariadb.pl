#!/usr/bin/perl
# Perl DBI + DBD::MariaDB (Debian libdbd-mariadb-perl, on libmariadb): the
# compatibility scenario.
#
# Every check runs twice: ".text" with DBD::MariaDB's default client-side
# placeholders and ".ps" with mariadb_server_prepare=1 (server-side prepared
# statements, no fallback to text). mariadb_auto_reconnect is the driver's
# reconnect; DBD::MariaDB has no change_user.
# Run: VIGIL_COMPAT_PORT=... perl compat/drivers/perl-dbd-mariadb.pl
# Output: "PASS <check>", "FAIL <check>: <detail>", "SKIP <check>: <why>".
use strict;
use warnings;
use utf8;
use DBI qw(:sql_types);
use DBD::MariaDB ();
use Digest::SHA qw(sha256_hex);
use File::Temp qw(tempfile);

binmode STDOUT, ':encoding(UTF-8)';
$| = 1;

die "set VIGIL_COMPAT_HOST, VIGIL_COMPAT_PORT, VIGIL_COMPAT_USER, VIGIL_COMPAT_PASSWORD and VIGIL_COMPAT_DB\n"
    unless $ENV{VIGIL_COMPAT_PORT};
my $HOST = $ENV{VIGIL_COMPAT_HOST} || '127.0.0.1';
my $PORT = $ENV{VIGIL_COMPAT_PORT};
my $USER = $ENV{VIGIL_COMPAT_USER} || 'app';
my $PASSWORD = $ENV{VIGIL_COMPAT_PASSWORD} // 'app';
my $DB = $ENV{VIGIL_COMPAT_DB} || 'compat';

my $TRICKY = q{O'Reilly "quoted" back\slash; -- not a comment};
my $EMOJI = "h\x{e9}llo w\x{f6}rld \x{1F600}\x{1F42C} \x{1D11E} \x{4e2d}\x{6587}";
my $DECIMAL = '12345678901234567890.0123456789';
my $DECIMAL2 = '24691357802469135780.0246913578';
my $DATETIME6 = '2024-02-29 23:59:58.123456';

package CheckFailed { sub new { my ($c, $m) = @_; bless { msg => $m }, $c } }

sub one_line { my $s = shift; $s =~ s/\s+/ /g; $s =~ s/^ | $//g; $s }

# $HEAL, when set, runs after a failed check: it replaces a connection
# that a failure left unusable, so one failure does not fail every later
# check.
our $HEAL;

sub check {
    my ($name, $fn) = @_;
    my $ok = eval { $fn->(); 1 };
    if ($ok) {
        print "PASS $name\n";
        return;
    }
    my $e = $@;
    if (ref $e eq 'CheckFailed') {
        print "FAIL $name: " . one_line($e->{msg}) . "\n";
    } else {
        print "FAIL $name: " . one_line("$e") . "\n";
    }
    $HEAL->() if $HEAL;
}

# heal_conn replaces $_[0] (an alias of the caller's variable) with
# $connect->() unless SELECT 1 still works on it.
sub heal_conn {
    my $connect = $_[1];
    return if eval { $_[0]->selectrow_array('SELECT 1'); 1 };
    print "# the connection is unusable after that failure: reconnecting\n";
    eval { $_[0] = $connect->(); 1 } or print "# reconnecting failed: " . one_line("$@") . "\n";
}

sub skip { print "SKIP $_[0]: $_[1]\n" }

sub show {
    my $v = shift;
    return 'undef' unless defined $v;
    return '[' . join(', ', map { show($_) } @$v) . ']' if ref $v eq 'ARRAY';
    my $s = "$v";
    $s = substr($s, 0, 200) . '…' if length $s > 200;
    return "'$s'";
}

sub expect {
    my ($what, $got, $want) = @_;
    my ($g, $w) = (show($got), show($want));
    die CheckFailed->new("$what: got $g, want $w") if $g ne $w;
}

sub connect_db {
    my (%o) = @_;
    my $dsn = "DBI:MariaDB:database=$DB;host=$HOST;port=$PORT;mariadb_connect_timeout=10;"
        . "mariadb_read_timeout=30;mariadb_write_timeout=30;mariadb_local_infile=1";
    $dsn .= ';mariadb_server_prepare=1;mariadb_server_prepare_disable_fallback=1' if $o{ps};
    return DBI->connect($dsn, $o{user} // $USER, $o{password} // $PASSWORD, {
        RaiseError => 1, PrintError => 0, AutoCommit => 1,
        mariadb_auto_reconnect => $o{reconnect} ? 1 : 0,
    });
}

# rows prepares, executes with args and returns every row (array refs).
sub rows {
    my ($dbh, $sql, @args) = @_;
    my $sth = $dbh->prepare($sql);
    $sth->execute(@args);
    my $r = $sth->{NUM_OF_FIELDS} ? $sth->fetchall_arrayref : [];
    $sth->finish;
    return $r;
}

print "# Perl $^V DBI $DBI::VERSION DBD::MariaDB $DBD::MariaDB::VERSION\n";

my %dbh;
check('connect', sub {
    $dbh{text} = connect_db();
    $dbh{ps} = connect_db(ps => 1);
    expect('DATABASE()', rows($dbh{$_}, 'SELECT DATABASE()'), [[$DB]]) for qw(text ps);
});
exit 0 unless $dbh{ps};
check('setup', sub {
    my $d = $dbh{text};
    $d->do($_) for (
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
    );
});

for my $mode (qw(text ps)) {
    my $d = $dbh{$mode};
    local $HEAL = sub { heal_conn($d, sub { connect_db(ps => $mode eq 'ps') }); $dbh{$mode} = $d };
    check("params.$mode", sub {
        expect('SELECT ?, ?', rows($d, 'SELECT ?, ?', $TRICKY, 42), [[$TRICKY, 42]]);
        rows($d, 'INSERT INTO vals (k, i, s) VALUES (?, ?, ?)', "params-$mode", 42, $TRICKY);
        expect('row', rows($d, 'SELECT i, s FROM vals WHERE k = ?', "params-$mode"), [[42, $TRICKY]]);
    });
    check("nulls.$mode", sub {
        rows($d, 'INSERT INTO vals (k, i, s, d, dt, b) VALUES (?, ?, ?, ?, ?, ?)', "nulls-$mode", undef, undef, undef, undef, undef);
        expect('row', rows($d, 'SELECT i, s, d, dt, b, ? IS NULL FROM vals WHERE k = ?', undef, "nulls-$mode"),
            [[undef, undef, undef, undef, undef, 1]]);
    });
    check("emoji.$mode", sub {
        expect('SELECT ?', rows($d, 'SELECT ?', $EMOJI), [[$EMOJI]]);
        rows($d, 'INSERT INTO vals (k, s) VALUES (?, ?)', "emoji-$mode", $EMOJI);
        my $bytes = do { use bytes; my $c = $EMOJI; utf8::encode($c); length $c };
        expect('row', rows($d, 'SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = ?', "emoji-$mode"),
            [[$EMOJI, length($EMOJI), $bytes]]);
    });
    check("decimal.$mode", sub {
        rows($d, 'INSERT INTO vals (k, d) VALUES (?, ?)', "decimal-$mode", $DECIMAL);
        expect('row', rows($d, 'SELECT d, d * 2 FROM vals WHERE k = ?', "decimal-$mode"), [[$DECIMAL, $DECIMAL2]]);
    });
    check("datetime6.$mode", sub {
        rows($d, 'INSERT INTO vals (k, dt) VALUES (?, ?)', "datetime6-$mode", $DATETIME6);
        expect('row', rows($d, 'SELECT dt, MICROSECOND(dt) FROM vals WHERE k = ?', "datetime6-$mode"), [[$DATETIME6, 123456]]);
    });
    check("blob.$mode", sub {
        my $data = join '', map { chr int rand 256 } 1 .. (1 << 20);
        my $sth = $d->prepare('INSERT INTO vals (k, b) VALUES (?, ?)');
        $sth->bind_param(1, "blob-$mode");
        $sth->bind_param(2, $data, SQL_BLOB);
        $sth->execute;
        my $sha = sha256_hex($data);
        my $r = rows($d, 'SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = ?', "blob-$mode")->[0];
        expect('LENGTH, SHA2 on the server', [$r->[0], $r->[1]], [1 << 20, $sha]);
        expect('sha256 of the value read back (length ' . length($r->[2]) . ')', sha256_hex($r->[2]), $sha);
    });
    if ($mode eq 'text') {
        check('txn.commit', sub {
            $d->begin_work;
            $d->do("INSERT INTO tx VALUES (1, 'committed')");
            expect('inside the transaction', rows($d, 'SELECT v FROM tx WHERE id = 1'), [['committed']]);
            $d->commit;
            expect('after COMMIT', rows($d, 'SELECT v FROM tx WHERE id = 1'), [['committed']]);
        });
        check('txn.rollback', sub {
            $d->begin_work;
            $d->do("INSERT INTO tx VALUES (2, 'rolled back')");
            expect('inside the transaction', rows($d, 'SELECT COUNT(*) FROM tx WHERE id = 2'), [[1]]);
            $d->rollback;
            expect('after ROLLBACK', rows($d, 'SELECT COUNT(*) FROM tx WHERE id = 2'), [[0]]);
        });
    }
    check("load_data_local.$mode", sub {
        my ($fh, $path) = tempfile('compat-load-XXXXXX', TMPDIR => 1, UNLINK => 1);
        binmode $fh, ':encoding(UTF-8)';
        print $fh "$_,name-$_" . ($_ == 1000 ? " \x{1F42C}" : '') . "\n" for 1 .. 1000;
        close $fh;
        $d->do('DELETE FROM loaded');
        my $sth = $d->prepare("LOAD DATA LOCAL INFILE '$path' INTO TABLE loaded CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' (id, name)");
        my $n = $sth->execute;
        expect('affected rows', $n, 1000);
        expect('COUNT, SUM, MAX(name), the emoji row',
            rows($d, 'SELECT COUNT(*), SUM(id), MAX(name), (SELECT name FROM loaded WHERE id = 1000) FROM loaded'),
            [[1000, 500500, 'name-999', "name-1000 \x{1F42C}"]]);
    });
    if ($mode eq 'ps') {
        skip('call_multi_result.ps', 'DBD::MariaDB: "Processing of multiple result set is not possible with server side prepare"');
    } else { check("call_multi_result.$mode", sub {
        my $sth = $d->prepare('CALL two_results(?)');
        $sth->execute(7);
        my @sets;
        do {
            if ($sth->{NUM_OF_FIELDS}) {
                my $r = $sth->fetchall_arrayref;
                push @sets, $r if @$r;
            }
        } while ($sth->more_results);
        $sth->finish;
        expect('result sets', \@sets, [[[7]], [['second-7', 14]]]);
        expect('SELECT after the CALL', rows($d, "SELECT 'still working'"), [['still working']]);
    }) }
    check("dup_key.$mode", sub {
        $d->do("INSERT INTO dup VALUES (1, 'first')") if $mode eq 'text';
        my $ok = eval { rows($d, 'INSERT INTO dup VALUES (?, ?)', 1, 'second'); 1 };
        die CheckFailed->new('the duplicate INSERT succeeded') if $ok;
        expect('error code, SQLSTATE', [$d->err, $d->state], [1062, '23000']);
        expect('SELECT after the error', rows($d, 'SELECT v FROM dup WHERE id = ?', 1), [['first']]);
    });
    check("ok_info.$mode", sub {
        # OK packets with an info string (multi-row INSERT, UPDATE), then
        # the session goes on.
        my $base = $mode eq 'text' ? 100 : 200;
        $d->do('DELETE FROM dup WHERE id >= ?', undef, $base);
        # (libmariadb keeps no info string for prepared statements)
        my $info = sub { $mode eq 'text' ? $d->{mariadb_info} : $_[0] };
        my $n = $d->do('INSERT INTO dup VALUES (?, ?), (?, ?)', undef, $base, 'x', $base + 1, 'y');
        my $want = 'Records: 2  Duplicates: 0  Warnings: 0';
        expect('affected rows, info of INSERT', [$n, $info->($want)], [2, $want]);
        $n = $d->do('UPDATE dup SET v = ? WHERE id >= ?', undef, "z-$mode", $base);
        $want = 'Rows matched: 2  Changed: 2  Warnings: 0';
        expect('affected rows, info of UPDATE', [$n, $info->($want)], [2, $want]);
        expect('SELECT after', rows($d, 'SELECT COUNT(*) FROM dup WHERE v = ?', "z-$mode"), [[2]]);
    });
    check("last_insert_id.$mode", sub {
        my $sth = $d->prepare('INSERT INTO vals (k) VALUES (?)');
        $sth->execute("lid-$mode");
        my $id = $sth->{mariadb_insertid};
        die CheckFailed->new('no insert id in the OK packet') unless $id;
        expect('DBI last_insert_id', $d->last_insert_id(undef, undef, undef, undef), $id);
        expect('SELECT LAST_INSERT_ID()', rows($d, 'SELECT LAST_INSERT_ID()'), [[$id]]);
        expect("the row's id", rows($d, 'SELECT id FROM vals WHERE k = ?', "lid-$mode"), [[$id]]);
    });
    check($mode eq 'text' ? 'use_schema.text' : 'ps_schema', sub {
        my $ok = eval {
            $d->do("USE `${DB}_a`");
            my $sa = $d->prepare('SELECT v FROM t');
            $sa->execute;
            expect('USE a; prepare; execute', $sa->fetchall_arrayref, [['from-a']]);
            $d->do("USE `${DB}_b`");
            my $sb = $d->prepare('SELECT v FROM t');
            $sb->execute;
            expect('USE b; prepare the same text; execute', $sb->fetchall_arrayref, [['from-b']]);
            if ($mode eq 'ps') {    # a text statement runs in the current schema
                $sa->execute;
                expect('the first statement again', $sa->fetchall_arrayref, [['from-a']]);
            }
            1;
        };
        my $e = $@;
        $d->do("USE `$DB`");
        die $e unless $ok;
    });
    check("read_your_writes.$mode", sub {
        # Prepared right after the DDL, executed right after each write.
        $d->do("DROP TABLE IF EXISTS ryw_$mode");
        $d->do("CREATE TABLE ryw_$mode (id INT PRIMARY KEY, n INT)");
        my $st = $d->prepare("SELECT COUNT(*), SUM(n) FROM ryw_$mode");
        $st->execute;
        expect('prepare and execute right after CREATE TABLE', $st->fetchall_arrayref, [[0, undef]]);
        $d->do("INSERT INTO ryw_$mode SELECT seq, seq FROM seq_1_to_10000");
        $st->execute;
        expect('execute right after INSERT ... SELECT', $st->fetchall_arrayref, [[10000, 50005000]]);
        rows($d, "UPDATE ryw_$mode SET n = n + ?", 1);
        $st->execute;
        expect('execute right after a prepared UPDATE', $st->fetchall_arrayref, [[10000, 50015000]]);
    });
    check("warnings.select.$mode", sub {
        expect('SELECT CAST', rows($d, "SELECT CAST('12abc' AS SIGNED)"), [[12]]);
        expect('mariadb_warning_count', $d->{mariadb_warning_count}, 1) if $mode eq 'text';
        my $w = rows($d, 'SHOW WARNINGS');
        die CheckFailed->new("SHOW WARNINGS after SELECT CAST('12abc' AS SIGNED): " . show($w))
            unless @$w == 1 && $w->[0][1] == 1292 && $w->[0][2] =~ /12abc/;
    });
    check("warnings.dml.$mode", sub {
        rows($d, "INSERT IGNORE INTO dup VALUES (1, 'ignored')");
        my $w = rows($d, 'SHOW WARNINGS');
        die CheckFailed->new('SHOW WARNINGS after INSERT IGNORE of a duplicate: ' . show($w))
            unless @$w == 1 && $w->[0][1] == 1062;
    });
}

$HEAL = sub { heal_conn($dbh{text}, sub { connect_db() }) };
check('warnings.fresh', sub {
    rows($dbh{text}, "SELECT CAST('x' AS SIGNED)") for 1 .. 4;
    my $f = connect_db();
    expect('first SHOW WARNINGS of a new connection', rows($f, 'SHOW WARNINGS'), []);
    $f->disconnect;
});
check('connection_id', sub {
    expect("SELECT CONNECTION_ID() vs the handshake's thread id", rows($dbh{text}, 'SELECT CONNECTION_ID()'),
        [[$dbh{text}{mariadb_thread_id}]]);
});
check('reconnect', sub {
    my $d = $dbh{text};
    $d->do("SET \@compat_marker = 'old session'");
    my $old = $d->{mariadb_thread_id};
    $d->disconnect;
    $d = $dbh{text} = connect_db();
    expect('user variable and schema after reconnecting', rows($d, 'SELECT @compat_marker, DATABASE()'), [[undef, $DB]]);
    die CheckFailed->new("same thread id $old after reconnecting") if $d->{mariadb_thread_id} == $old;
});
check('driver_reconnect', sub {
    my $victim = connect_db(reconnect => 1);
    my $old = $victim->{mariadb_thread_id};
    $dbh{text}->do("KILL $old");
    expect('SELECT after the kill', rows($victim, "SELECT 'reconnected', DATABASE()"), [['reconnected', $DB]]);
    expect('auto_reconnects_ok', $victim->{mariadb_dbd_stats}{auto_reconnects_ok}, 1);
    die CheckFailed->new("same thread id $old after the kill") if $victim->{mariadb_thread_id} == $old;
    $victim->disconnect;
});
skip('change_user', 'DBD::MariaDB has no change_user');
$_->disconnect for values %dbh;
