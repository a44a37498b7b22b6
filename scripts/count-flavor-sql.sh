#!/usr/bin/env bash
# Counts flavour SQL spelled outside internal/flavor (issue 26 item 6):
#   sql     string literals of statements that differ by flavour (they
#           start with SELECT/SHOW/SET/START/STOP/RESET/CHANGE and name a
#           replication, GTID, semi-sync or read-only thing), and literals
#           that are one flavour's variable, status or function name;
#   checks  comparisons with topology.FlavorMySQL / FlavorMariaDB.
# Non-test Go files under internal/ and cmd/, except internal/sqlscan
# (its word lists name every SQL function; it sends nothing). The sandbox
# and bench tooling, which only ever talk to the MariaDB sandboxes Vigil
# starts itself, are counted apart. docs/design.md quotes the numbers.
# Usage: scripts/count-flavor-sql.sh [DIR] (default: the checkout).
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
files=$(find internal cmd -name '*.go' ! -name '*_test.go' ! -path 'internal/flavor/*' ! -path 'internal/sqlscan/*' | sort)
lit='"(?:[^"\\]|\\.)*"|`[^`]*`'
stmt='^["`](?:SELECT|SHOW|SET|START|STOP|RESET|CHANGE)\b.*(?i:slave|master|replica|source|gtid|semi_sync|read_only|heartbeat|log_bin)'
name='^["`](?:rpl_semi_sync_\w+|Rpl_semi_sync_\w+|Slave_\w+|@@gtid_\w+|gtid_(?:current|binlog|slave)_\w+|gtid_executed|super_read_only|log_slave_updates|MASTER_GTID_WAIT|WAIT_FOR_EXECUTED_GTID_SET)["`]$'
total_sql=0 total_checks=0 nfiles=0 tool_sql=0
for f in $files; do
  s=$(grep -oP "$lit" "$f" | grep -cP "$stmt|$name" || true)
  c=$(grep -oP '[!=]= *topology\.Flavor(MySQL|MariaDB)\b|topology\.Flavor(MySQL|MariaDB) *[!=]=' "$f" | wc -l || true)
  if (( s + c == 0 )); then
    continue
  fi
  case $f in
  internal/sandbox/* | internal/bench/*)
    printf '%-40s sql %3d  checks %3d  (MariaDB sandbox tooling)\n' "$f" "$s" "$c"
    tool_sql=$((tool_sql + s))
    ;;
  *)
    printf '%-40s sql %3d  checks %3d\n' "$f" "$s" "$c"
    total_sql=$((total_sql + s)); total_checks=$((total_checks + c)); nfiles=$((nfiles + 1))
    ;;
  esac
done
echo "total: $total_sql flavour SQL literals and $total_checks flavour checks in $nfiles files outside internal/flavor"
echo "sandbox and bench tooling: $tool_sql flavour SQL literals"
