#!/usr/bin/env bash
# make demo: a 3-node MariaDB replication sandbox, Vigil in front of it,
# traffic through Vigil, and where each statement went.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${VIGIL_DEMO_DIR:-/tmp/vigil-demo}
BIN=bin/vigil

if [[ -f "$DIR/sandbox.json" ]]; then
  echo "== stopping the previous demo in $DIR"
  [[ -f "$DIR/vigil.pid" ]] && kill "$(cat "$DIR/vigil.pid")" 2>/dev/null || true
  $BIN sandbox down --dir "$DIR" --purge || true
fi

echo "== starting a 3-node replication sandbox in $DIR"
start=$(date +%s.%N)
$BIN sandbox up --dir "$DIR" --topology replication --nodes 3
echo "   (up in $(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)") s)"
$BIN sandbox status --dir "$DIR"

PROXY_PORT=$(python3 -c "import json;print(json.load(open('$DIR/sandbox.json'))['proxy']['port'])")
echo
echo "== starting Vigil (config $DIR/vigil.yaml), listening on 127.0.0.1:$PROXY_PORT"
$BIN run --config "$DIR/vigil.yaml" >"$DIR/vigil.log" 2>&1 &
echo $! >"$DIR/vigil.pid"
for _ in $(seq 50); do
  mariadb -h127.0.0.1 -P"$PROXY_PORT" -uapp -papp -e 'SELECT 1' >/dev/null 2>&1 && break
  sleep 0.1
done

M="mariadb -h127.0.0.1 -P$PROXY_PORT -uapp -papp"
echo
echo "== writes go to the primary, reads to the replicas"
$M -e "CREATE DATABASE IF NOT EXISTS demo; CREATE TABLE IF NOT EXISTS demo.t (id INT PRIMARY KEY AUTO_INCREMENT, note VARCHAR(40));"
for i in 1 2 3; do $M -e "INSERT INTO demo.t (note) VALUES ('row $i')"; done
for i in 1 2 3 4 5 6; do $M -N -e "SELECT CONCAT('read served by server_id ', @@server_id, ': ', COUNT(*), ' rows') FROM demo.t"; done
echo
echo "== inside a transaction everything stays on the primary"
$M -N -e "BEGIN; SELECT CONCAT('in transaction: server_id ', @@server_id); INSERT INTO demo.t (note) VALUES ('trx'); COMMIT;"

cat <<EOT

== try it yourself
  $M
  bin/vigil sandbox status --dir $DIR
  bin/vigil sandbox sql node2 "SHOW SLAVE STATUS"
  bin/vigil sandbox kill node2          # a crashed replica; reads move to node3

== stop everything
  kill \$(cat $DIR/vigil.pid); bin/vigil sandbox down --dir $DIR --purge
EOT
