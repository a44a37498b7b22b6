#!/bin/bash
# mariadb-test-run runs this instead of mariadb-test (compat/mtr sets
# MYSQL_TEST to it). For a test file (--test-file=...), it first resets the
# servers as root over the primary's unix socket (reset.sql), reinstalls
# mtr's procedures if the last test lost them, and waits until every replica
# has applied the reset, so that the test starts from the state its result
# file expects, as it would on mtr's own freshly checked server. Any other
# call (a test running mariadb-test itself) goes straight through.
#
# Environment (set by compat/mtr):
#   VIGIL_MTR_MYSQLTEST      the real mariadb-test
#   VIGIL_MTR_PRIMARY_CNF    my.cnf of the primary (its [client] has the socket)
#   VIGIL_MTR_REPLICA_CNFS   my.cnf of each replica, space-separated (may be empty)
#   VIGIL_MTR_RESET_SQL      reset.sql
#   VIGIL_MTR_INSTALL_SQL    mtr's procedures (include/mtr_warnings.sql, mtr_check.sql)
#   VIGIL_MTR_RESET_LOG      where problems of the reset are logged
#   VIGIL_MTR_TEST_TIMEOUT   seconds a test file may take (mariadb-test-run's
#                            own --testcase-timeout counts in whole minutes)
set -u

reset_servers() {
	local out failed count pos cnf xid
	# XA transactions a failed test left prepared hold their locks until
	# rolled back (reset.sql cannot read XA RECOVER).
	while read -r xid; do
		[[ -n $xid ]] || continue
		printf '%s rolling back XA %s left before %s\n' "$(date +%T)" "$xid" "$1" >>"$VIGIL_MTR_RESET_LOG"
		mariadb --defaults-file="$VIGIL_MTR_PRIMARY_CNF" -e "XA ROLLBACK $xid" >>"$VIGIL_MTR_RESET_LOG" 2>&1
	done < <(mariadb --defaults-file="$VIGIL_MTR_PRIMARY_CNF" --batch --skip-column-names -e "XA RECOVER FORMAT='SQL'" 2>>"$VIGIL_MTR_RESET_LOG" | cut -f4)
	local try
	for try in 1 2; do
		out=$(mariadb --defaults-file="$VIGIL_MTR_PRIMARY_CNF" --default-character-set=utf8mb4 --batch --skip-column-names --force <"$VIGIL_MTR_RESET_SQL" 2>&1)
		if [[ $? != 0 || $out == *ERROR* ]]; then
			printf '%s reset failed before %s:\n%s\n' "$(date +%T)" "$1" "$out" >>"$VIGIL_MTR_RESET_LOG"
		fi
		failed=$(printf '%s\n' "$out" | tail -n 3 | head -n 1)
		[[ $failed == NULL ]] && break
		printf '%s reset before %s could not: %s\n' "$(date +%T)" "$1" "$failed" >>"$VIGIL_MTR_RESET_LOG"
		# A file a test wrote into a database directory (SELECT ... INTO
		# OUTFILE 'name') keeps DROP DATABASE from removing the directory:
		# remove such files and reset again.
		[[ $failed == *"errno: 39"* && $try == 1 ]] || break
		local datadir db
		datadir=$(mariadb --defaults-file="$VIGIL_MTR_PRIMARY_CNF" --batch --skip-column-names -e 'SELECT @@datadir' 2>>"$VIGIL_MTR_RESET_LOG")
		while read -r db; do
			[[ -n $db && -n $datadir && -d $datadir/$db ]] && find "$datadir/$db" -maxdepth 1 -type f ! -name db.opt -delete
		done < <(grep -o 'DROP DATABASE `[^`]*`: [^;]*errno: 39' <<<"$failed" | sed 's/^DROP DATABASE `\([^`]*\)`.*/\1/')
	done
	count=$(printf '%s\n' "$out" | tail -n 2 | head -n 1)
	pos=$(printf '%s\n' "$out" | tail -n 1)
	if [[ $count != 1 ]]; then
		printf '%s mtr procedures missing before %s: reinstalled\n' "$(date +%T)" "$1" >>"$VIGIL_MTR_RESET_LOG"
		mariadb --defaults-file="$VIGIL_MTR_PRIMARY_CNF" --force mtr <"$VIGIL_MTR_INSTALL_SQL" >>"$VIGIL_MTR_RESET_LOG" 2>&1
		pos=$(mariadb --defaults-file="$VIGIL_MTR_PRIMARY_CNF" --batch --skip-column-names -e 'SELECT @@gtid_binlog_pos' 2>>"$VIGIL_MTR_RESET_LOG")
	fi
	for cnf in ${VIGIL_MTR_REPLICA_CNFS:-}; do
		# -2: replication is not running, no use waiting.
		out=$(mariadb --defaults-file="$cnf" --batch --skip-column-names -e "SELECT IF(VARIABLE_VALUE = 'ON', MASTER_GTID_WAIT('$pos', 10), -2) FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'SLAVE_RUNNING'" 2>&1)
		if [[ $out != 0 ]]; then
			printf '%s replica %s did not reach %s before %s: %s\n' "$(date +%T)" "$cnf" "$pos" "$1" "$out" >>"$VIGIL_MTR_RESET_LOG"
		fi
	done
}

test_file=
for arg in "$@"; do
	case $arg in
	--test-file=*)
		test_file=${arg#--test-file=}
		break
		;;
	esac
done
if [[ -z $test_file ]]; then
	exec "$VIGIL_MTR_MYSQLTEST" "$@"
fi
reset_servers "$test_file"
limit=${VIGIL_MTR_TEST_TIMEOUT:-40}
timeout --kill-after=5 "$limit" "$VIGIL_MTR_MYSQLTEST" "$@"
rc=$?
if ((rc == 124 || rc == 137)); then
	echo "compat/mtr: mariadb-test killed after ${limit}s: the test hung (VIGIL_MTR_TEST_TIMEOUT)" >&2
	rc=1
fi
exit "$rc"
