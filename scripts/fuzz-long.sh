#!/usr/bin/env bash
# Long fuzz runs of every parser that faces untrusted bytes, one after the
# other, each for FUZZ_TIME (default 10m; a duration or an execution count
# such as 2000000x). Meant for a nightly job: `make fuzz-long FUZZ_TIME=30m`.
#
# A failure stops nothing else: every fuzzer runs, and the script exits
# non-zero if any found a crasher. Go writes each crasher to the package's
# testdata/fuzz/<Fuzzer>/ directory, where plain `go test` (and so
# `make test`) replays it from then on: commit it with the fix as a
# regression seed. The list of new files is printed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
FUZZ_TIME="${FUZZ_TIME:-10m}"

# package fuzzer: framing, the handshake, each command's and inspected
# reply's decode/encode pair, COM_* through a live session,
# the SQL lexer and masking, the query log's JSON encoding.
targets=(
	"./internal/mysqlproto/ FuzzReadPacket"
	"./internal/mysqlproto/ FuzzHandshakeResponse"
	"./internal/mysqlproto/ FuzzCommands"
	"./internal/mysqlproto/ FuzzChangeUser"
	"./internal/mysqlproto/ FuzzReplies"
	"./internal/frontend/ FuzzSessionCommands"
	"./internal/sqlscan/ FuzzScan"
	"./internal/sqlscan/ FuzzMask"
	"./internal/qlog/ FuzzAppendString"
)
failed=()
before=$(git status --porcelain --untracked-files=all -- '*/testdata/fuzz/*' 2>/dev/null)
for t in "${targets[@]}"; do
	read -r pkg fuzzer <<<"$t"
	echo "== $fuzzer ($pkg) for $FUZZ_TIME"
	if ! go test -run='^$' -fuzz="^${fuzzer}\$" -fuzztime="$FUZZ_TIME" "$pkg"; then
		failed+=("$fuzzer")
	fi
done
after=$(git status --porcelain --untracked-files=all -- '*/testdata/fuzz/*' 2>/dev/null)
if [ "$before" != "$after" ]; then
	echo "== new regression seeds (commit them with the fix):"
	diff <(echo "$before") <(echo "$after") | sed -n 's/^> //p'
fi
if [ ${#failed[@]} -gt 0 ]; then
	echo "== crashers found by: ${failed[*]}"
	exit 1
fi
echo "== every fuzzer ran for $FUZZ_TIME without a crasher"
