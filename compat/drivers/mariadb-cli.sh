#!/usr/bin/env bash
# The mariadb command-line client (Debian mariadb-client, on libmariadb):
# the compatibility scenario.
#
# The CLI speaks the text protocol only: values are literals typed into the
# statements, prepared statements are SQL PREPARE/EXECUTE (ps_schema).
# "reconnect" is the client's own `connect` command; the CLI has no
# change_user. Each check is one mariadb process (a session), as a script
# piped into the client would be.
# Run: VIGIL_COMPAT_PORT=... compat/drivers/mariadb-cli.sh
# Output: "PASS <check>", "FAIL <check>: <detail>", "SKIP <check>: <why>".
set -uo pipefail

if [[ -z ${VIGIL_COMPAT_PORT:-} ]]; then
	echo "set VIGIL_COMPAT_HOST, VIGIL_COMPAT_PORT, VIGIL_COMPAT_USER, VIGIL_COMPAT_PASSWORD and VIGIL_COMPAT_DB" >&2
	exit 2
fi
HOST=${VIGIL_COMPAT_HOST:-127.0.0.1}
PORT=$VIGIL_COMPAT_PORT
USER=${VIGIL_COMPAT_USER:-app}
export MYSQL_PWD=${VIGIL_COMPAT_PASSWORD:-app}
DB=${VIGIL_COMPAT_DB:-compat}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

EMOJI=$'h\u00e9llo w\u00f6rld \U0001F600\U0001F42C \U0001D11E \u4e2d\u6587'
DECIMAL=12345678901234567890.0123456789
DECIMAL2=24691357802469135780.0246913578
DATETIME6='2024-02-29 23:59:58.123456'

# sql runs its arguments as mariadb options (usually -e "..."): batch mode,
# no column names, raw values, utf8mb4, bounded.
sql() {
	timeout 30 mariadb --protocol=tcp -h "$HOST" -P "$PORT" -u "$USER" --default-character-set=utf8mb4 \
		--connect-timeout=10 -N -B -r "$DB" "$@"
}

# expect WHAT GOT WANT fails the check (returns 1) with a message when they
# differ.
expect() {
	if [[ $2 != "$3" ]]; then
		printf '%s: got %q, want %q\n' "$1" "$2" "$3"
		return 1
	fi
}

check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		echo "PASS $name"
	else
		out=$(printf '%s' "$out" | tr -s '\n\t ' '   ' | cut -c1-400)
		echo "FAIL $name: ${out:-exit status $?}"
	fi
}

c_connect() {
	expect "SELECT DATABASE()" "$(sql -e 'SELECT DATABASE()')" "$DB"
}

c_setup() {
	sql <<-'EOF'
		DROP TABLE IF EXISTS vals, tx, dup, loaded;
		CREATE TABLE vals (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL UNIQUE,
		  i INT NULL, s VARCHAR(255) NULL, d DECIMAL(30,10) NULL, dt DATETIME(6) NULL, b LONGBLOB NULL)
		  DEFAULT CHARSET=utf8mb4;
		CREATE TABLE tx (id INT PRIMARY KEY, v VARCHAR(32));
		CREATE TABLE dup (id INT PRIMARY KEY, v VARCHAR(32));
		CREATE TABLE loaded (id INT PRIMARY KEY, name VARCHAR(64)) DEFAULT CHARSET=utf8mb4;
		DROP PROCEDURE IF EXISTS two_results;
		DELIMITER //
		CREATE PROCEDURE two_results(IN n INT) BEGIN SELECT n AS first;
		  SELECT CONCAT('second-', n) AS second, n * 2 AS twice; END //
		DELIMITER ;
	EOF
}

# Each check's write and the read that checks it are one session (one -e):
# Vigil's read-your-writes is per session.

c_params() {
	# The tricky string, as a person types it: quotes and backslash escaped.
	local got
	got=$(sql -e "SELECT 'O\\'Reilly \"quoted\" back\\\\slash; -- not a comment', 42")
	expect "SELECT" "$got" $'O\'Reilly "quoted" back\\slash; -- not a comment\t42' || return 1
	expect "row" "$(sql -e "INSERT INTO vals (k, i, s) VALUES ('params', 42, 'O''Reilly \"quoted\" back\\\\slash; -- not a comment'); SELECT i, s FROM vals WHERE k = 'params'")" \
		$'42\tO\'Reilly "quoted" back\\slash; -- not a comment'
}

c_nulls() {
	expect "row" "$(sql -e "INSERT INTO vals (k, i, s, d, dt, b) VALUES ('nulls', NULL, NULL, NULL, NULL, NULL); SELECT i, s, d, dt, b, i IS NULL FROM vals WHERE k = 'nulls'")" \
		$'NULL\tNULL\tNULL\tNULL\tNULL\t1'
}

c_emoji() {
	expect "SELECT" "$(sql -e "SELECT '$EMOJI'")" "$EMOJI" || return 1
	local bytes chars
	bytes=$(printf '%s' "$EMOJI" | wc -c)
	chars=$(LC_ALL=C.UTF-8 bash -c 'x=$1; echo ${#x}' _ "$EMOJI")
	expect "row" "$(sql -e "INSERT INTO vals (k, s) VALUES ('emoji', '$EMOJI'); SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = 'emoji'")" \
		"$EMOJI"$'\t'"$chars"$'\t'"$bytes"
}

c_decimal() {
	expect "row" "$(sql -e "INSERT INTO vals (k, d) VALUES ('decimal', $DECIMAL); SELECT d, d * 2 FROM vals WHERE k = 'decimal'")" \
		"$DECIMAL"$'\t'"$DECIMAL2"
}

c_datetime6() {
	expect "row" "$(sql -e "INSERT INTO vals (k, dt) VALUES ('datetime6', '$DATETIME6'); SELECT dt, MICROSECOND(dt) FROM vals WHERE k = 'datetime6'")" \
		"$DATETIME6"$'\t123456'
}

c_blob() {
	# One session writes and reads back (Vigil's read-your-writes is per
	# session): INSERT of a hex literal, LENGTH and SHA2, then the raw bytes.
	head -c 1048576 /dev/urandom >"$TMP/blob"
	local sha first
	sha=$(sha256sum "$TMP/blob" | cut -d' ' -f1)
	{
		printf "INSERT INTO vals (k, b) VALUES ('blob', 0x"
		od -An -tx1 -v "$TMP/blob" | tr -d ' \n'
		printf ');\n'
		printf "SELECT LENGTH(b), SHA2(b, 256) FROM vals WHERE k = 'blob';\n"
		printf "SELECT b FROM vals WHERE k = 'blob';\n"
	} | sql >"$TMP/out" || return 1
	first=$(head -n 1 "$TMP/out")
	expect "LENGTH, SHA2 on the server" "$first" "1048576"$'\t'"$sha" || return 1
	# --raw writes the bytes as they are, then a newline.
	tail -c +$((${#first} + 2)) "$TMP/out" | head -c 1048576 >"$TMP/back"
	expect "sha256 of the value read back ($(stat -c %s "$TMP/back") bytes)" "$(sha256sum "$TMP/back" | cut -d' ' -f1)" "$sha"
}

c_txn_commit() {
	expect "inside the transaction, after COMMIT" \
		"$(sql -e "BEGIN; INSERT INTO tx VALUES (1, 'committed'); SELECT v FROM tx WHERE id = 1; COMMIT; SELECT v FROM tx WHERE id = 1")" \
		$'committed\ncommitted'
}

c_txn_rollback() {
	expect "inside the transaction, after ROLLBACK" \
		"$(sql -e "START TRANSACTION; INSERT INTO tx VALUES (2, 'rolled back'); SELECT COUNT(*) FROM tx WHERE id = 2; ROLLBACK; SELECT COUNT(*) FROM tx WHERE id = 2")" \
		$'1\n0'
}

c_load_data() {
	local i
	for ((i = 1; i <= 1000; i++)); do
		if ((i == 1000)); then echo "$i,name-$i "$'\U0001F42C'; else echo "$i,name-$i"; fi
	done >"$TMP/load.csv"
	expect "LOAD DATA; COUNT, SUM, MAX(name), the emoji row" \
		"$(sql --local-infile=1 -e "DELETE FROM loaded; LOAD DATA LOCAL INFILE '$TMP/load.csv' INTO TABLE loaded CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' (id, name); SELECT ROW_COUNT(); SELECT COUNT(*), SUM(id), MAX(name), (SELECT name FROM loaded WHERE id = 1000) FROM loaded")" \
		$'1000\n1000\t500500\tname-999\tname-1000 \U0001F42C'
}

c_call() {
	expect "both result sets, then a SELECT" "$(sql -e "CALL two_results(7); SELECT 'still working'")" \
		$'7\nsecond-7\t14\nstill working'
}

c_dup_key() {
	local out err
	# --force goes on after an error with the next line of the script.
	out=$(printf '%s\n' "INSERT INTO dup VALUES (1, 'first');" "INSERT INTO dup VALUES (1, 'second');" \
		"SELECT v FROM dup WHERE id = 1;" | sql --force 2>"$TMP/err")
	err=$(cat "$TMP/err")
	case $err in
	*"ERROR 1062 (23000)"*) ;;
	*)
		echo "no ERROR 1062 (23000) but: $err"
		return 1
		;;
	esac
	expect "SELECT after the error" "$out" "first"
}

c_ok_info() {
	# OK packets with an info string (multi-row INSERT, UPDATE): -vvv prints
	# them as the interactive client does.
	local out
	out=$(sql -vvv -e "DELETE FROM dup WHERE id >= 100; INSERT INTO dup VALUES (100, 'x'), (101, 'y'); UPDATE dup SET v = 'z' WHERE id >= 100; SELECT COUNT(*) FROM dup WHERE v = 'z'" |
		grep -E '^(Query OK|Records|Rows matched|\| [0-9]+ \|$)' | sed 's/ ([0-9.]* sec)//')
	expect "affected rows and info" "$out" $'Query OK, 0 rows affected\nQuery OK, 2 rows affected\nRecords: 2  Duplicates: 0  Warnings: 0\nQuery OK, 2 rows affected\nRows matched: 2  Changed: 2  Warnings: 0\n| 2 |'
}

c_last_insert_id() {
	local out
	out=$(sql -e "INSERT INTO vals (k) VALUES ('lid'); SELECT LAST_INSERT_ID(); SELECT id FROM vals WHERE k = 'lid'")
	local lid=${out%%$'\n'*} rowid=${out##*$'\n'}
	[[ $lid =~ ^[1-9][0-9]*$ ]] || {
		echo "LAST_INSERT_ID() = $lid"
		return 1
	}
	expect "LAST_INSERT_ID() vs the row's id" "$lid" "$rowid"
}

c_use_schema() {
	expect "USE a; SELECT; USE b; SELECT" \
		"$(sql -e "USE \`${DB}_a\`; SELECT v FROM t; USE \`${DB}_b\`; SELECT v FROM t; SELECT DATABASE()")" \
		$'from-a\nfrom-b\n'"${DB}_b"
}

c_read_your_writes() {
	# DDL, then a read at once; a big write, then a read at once.
	expect "CREATE TABLE; SELECT; INSERT ... SELECT; SELECT" \
		"$(sql -e "DROP TABLE IF EXISTS ryw; CREATE TABLE ryw (id INT PRIMARY KEY, n INT); SELECT COUNT(*) FROM ryw; INSERT INTO ryw SELECT seq, seq FROM seq_1_to_10000; SELECT COUNT(*), SUM(n) FROM ryw")" \
		$'0\n10000\t50005000'
}

c_extended_metadata() {
	# --column-type-info prints MariaDB's extended type information
	# (MARIADB_CLIENT_EXTENDED_METADATA): the type of INET6, the format of JSON.
	local out
	out=$(sql --column-type-info -t -e "SELECT CAST('::1' AS INET6) AS ip, JSON_OBJECT('a', 1) AS doc" | grep '^Type:')
	expect "column types" "$(tr -s ' ' <<<"$out")" $'Type: STRING (type=inet6)\nType: VAR_STRING (format=json)'
}

c_ps_schema() {
	expect "USE a; PREPARE; EXECUTE; USE b; PREPARE the same text; EXECUTE" \
		"$(sql -e "USE \`${DB}_a\`; PREPARE sa FROM 'SELECT v FROM t'; EXECUTE sa; USE \`${DB}_b\`; PREPARE sb FROM 'SELECT v FROM t'; EXECUTE sb; EXECUTE sa")" \
		$'from-a\nfrom-b\nfrom-a'
}

c_warnings_select() {
	expect "SELECT CAST('12abc' AS SIGNED); SHOW WARNINGS" "$(sql -e "SELECT CAST('12abc' AS SIGNED); SHOW WARNINGS")" \
		$'12\nWarning\t1292\tTruncated incorrect INTEGER value: \'12abc\''
}

c_warnings_dml() {
	expect "INSERT IGNORE of a duplicate; SHOW WARNINGS" "$(sql -e "INSERT IGNORE INTO dup VALUES (1, 'ignored'); SHOW WARNINGS")" \
		$'Warning\t1062\tDuplicate entry \'1\' for key \'PRIMARY\''
}

c_warnings_fresh() {
	sql -e "SELECT CAST('x' AS SIGNED); SELECT CAST('x' AS SIGNED); SELECT CAST('x' AS SIGNED); SELECT CAST('x' AS SIGNED)" >/dev/null || return 1
	expect "first SHOW WARNINGS of a new connection" "$(sql -e "SHOW WARNINGS")" ""
}

c_connection_id() {
	# `status` prints the thread id of the handshake (mysql_thread_id).
	local out hs
	out=$(sql -e "status; SELECT CONNECTION_ID()")
	hs=$(sed -n 's/^Connection id:[[:space:]]*//p' <<<"$out")
	expect "SELECT CONNECTION_ID() vs the handshake's thread id" "${out##*$'\n'}" "$hs"
}

c_reconnect() {
	expect "SET @compat_marker; connect; SELECT @compat_marker, DATABASE()" \
		"$(sql -e "SET @compat_marker = 'old session'; connect; SELECT @compat_marker, DATABASE()" 2>&1 | grep -v '^Connection id\|^Current database\|^$')" \
		$'NULL\t'"$DB"
}

echo "# $(mariadb --version)"
check connect c_connect
check setup c_setup
check params.text c_params
check nulls.text c_nulls
check emoji.text c_emoji
check decimal.text c_decimal
check datetime6.text c_datetime6
check blob.text c_blob
check txn.commit c_txn_commit
check txn.rollback c_txn_rollback
check load_data_local.text c_load_data
check call_multi_result.text c_call
check dup_key.text c_dup_key
check ok_info.text c_ok_info
check last_insert_id.text c_last_insert_id
check use_schema.text c_use_schema
check read_your_writes.text c_read_your_writes
check ps_schema c_ps_schema
check extended_metadata c_extended_metadata
check warnings.select c_warnings_select
check warnings.dml c_warnings_dml
check warnings.fresh c_warnings_fresh
check connection_id c_connection_id
check reconnect c_reconnect
echo "SKIP driver_reconnect: the CLI reconnects only with its connect command (the reconnect check)"
echo "SKIP change_user: the mariadb CLI has no change_user"
