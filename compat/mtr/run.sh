#!/usr/bin/env bash
# Runs compat/mtr's selection of MariaDB's own test suite (mariadb-test-run
# --extern, Debian package mariadb-test) direct and through Vigil, for one
# topology and protocol, and reports "N passed, M failed" for each, the
# tests that pass direct but fail through Vigil, and every failing test's
# diff (under --out). Root is needed (sandboxes). Examples:
#
#   compat/mtr/run.sh --topology replication --protocol ps --out /tmp/mtr-out
#   compat/mtr/run.sh --topology standalone             # text and ps
#   compat/mtr/run.sh --sandbox /tmp/sb --protocol text # an existing sandbox (it is changed)
#   compat/mtr/run.sh --help
#
# Exit status: 0 when every test that passes direct passes through Vigil
# (or is excused by compat/mtr/known-differences.txt), 1 otherwise, 2 when
# the run itself failed. docs/compatibility.md explains the selection.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
go build -o bin/vigil ./cmd/vigil
go build -o bin/mtr-compat ./compat/mtr/cmd/mtr-compat
exec bin/mtr-compat --vigil bin/vigil "$@"
