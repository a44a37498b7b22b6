#!/usr/bin/env bash
# make demo: a 3-node MariaDB replication sandbox, Vigil in front of it,
# traffic through Vigil, a planned switchover and an unplanned failover.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${VIGIL_DEMO_DIR:-/tmp/vigil-demo}
BIN=bin/vigil

if [[ -f "$DIR/sandbox.json" ]]; then
  echo "== stopping the previous demo in $DIR"
  [[ -f "$DIR/vigil.pid" ]] && kill "$(cat "$DIR/vigil.pid")" 2>/dev/null || true
  $BIN sandbox down --dir "$DIR" --purge || true
fi

echo "== starting a 3-node replication sandbox (semi-synchronous) in $DIR"
$BIN sandbox up --dir "$DIR" --topology replication --nodes 3 --semi-sync

PROXY_PORT=$(tr -d '\n ' <"$DIR/sandbox.json" | sed -n 's/.*"proxy":{"host":"[^"]*","port":\([0-9]*\)}.*/\1/p')
ADMIN_PORT=$(tr -d '\n ' <"$DIR/sandbox.json" | sed -n 's/.*"admin":{"host":"[^"]*","port":\([0-9]*\)}.*/\1/p')
CTL="$BIN ctl --sandbox $DIR"  # sends the sandbox's admin token

echo
echo "== starting Vigil (config $DIR/vigil.yaml): clients on 127.0.0.1:$PROXY_PORT, admin API on 127.0.0.1:$ADMIN_PORT"
$BIN run --config "$DIR/vigil.yaml" >"$DIR/vigil.log" 2>&1 &
echo $! >"$DIR/vigil.pid"
M="mariadb -h127.0.0.1 -P$PROXY_PORT -uapp -papp --protocol=tcp"
for _ in $(seq 100); do $M -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
sleep 1
$CTL servers

echo
echo "== writes go to the primary, reads to the replicas"
$M -e "CREATE DATABASE IF NOT EXISTS demo; CREATE TABLE IF NOT EXISTS demo.t (id INT PRIMARY KEY AUTO_INCREMENT, note VARCHAR(40));"
for i in 1 2 3; do $M -e "INSERT INTO demo.t (note) VALUES ('row $i')"; done
for i in 1 2 3 4; do $M -N -e "SELECT CONCAT('read served by server_id ', @@server_id, ': ', COUNT(*), ' rows') FROM demo.t"; done
echo "== inside a transaction everything stays on the primary"
$M -N -e "BEGIN; SELECT CONCAT('in a transaction: server_id ', @@server_id); INSERT INTO demo.t (note) VALUES ('trx'); COMMIT;"

echo
echo "== a writer in the background: one INSERT every 50 ms through Vigil"
( ok=0; bad=0; while [[ -f "$DIR/vigil.pid" && ! -f "$DIR/stop-writer" ]]; do
    if $M -e "INSERT INTO demo.t (note) VALUES ('bg')" 2>/dev/null; then ok=$((ok+1)); else bad=$((bad+1)); fi
    echo "$ok $bad" >"$DIR/writer.count"; sleep 0.05; done ) &
sleep 2

echo
echo "== planned switchover (writes are held, not failed)"
$CTL switchover | tail -3
sleep 2
$CTL servers

echo
PRIMARY=$($CTL --json servers | tr -d '\n ' | sed -n 's/.*"name":"\([^"]*\)","address":"[^"]*","cluster":"[^"]*","role":"primary".*/\1/p')
echo "== unplanned failover: kill -9 the primary ($PRIMARY)"
$BIN sandbox kill "$PRIMARY" --dir "$DIR"
sleep 6
$CTL servers
touch "$DIR/stop-writer"; sleep 0.5
read -r OK BAD <"$DIR/writer.count"
echo "background writer: $OK writes acknowledged, $BAD failed (the failed ones were in flight on the killed primary or waited longer than connect_timeout)"
echo
echo "== what happened"
$CTL events --limit 15

cat <<EOT

== try it yourself
  $M
  $CTL servers | events | switchover --dry-run
  $BIN sandbox start $PRIMARY --dir $DIR && $CTL rejoin $PRIMARY     # the old primary comes back as a replica
  $BIN sandbox pause node3 --dir $DIR                                 # a hung replica leaves routing within ~1.5 s

== stop everything
  kill \$(cat $DIR/vigil.pid); $BIN sandbox down --dir $DIR --purge
EOT
