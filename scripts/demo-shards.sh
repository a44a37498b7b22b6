#!/usr/bin/env bash
# make demo-shards: two MariaDB replication clusters behind one Vigil with
# a sharded listener (docs/shards.md); eight tenant schemas spread over
# them; sysbench writing to every tenant through the one address; a
# cross-cluster statement refused; a tenant moved to the other cluster
# while it is written, with its statements held at the cutover, not
# failed. Every wait is bounded; a step that does not happen in time ends
# the demo with a message and exit status 1.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${VIGIL_DEMO_DIR:-/tmp/vigil-demo-shards}
BIN=bin/vigil

if [[ -f "$DIR/sandbox.json" ]]; then
  echo "== stopping the previous demo in $DIR"
  [[ -f "$DIR/vigil.pid" ]] && kill "$(cat "$DIR/vigil.pid")" 2>/dev/null || true
  $BIN sandbox down --dir "$DIR" --purge || true
fi

echo "== starting two 2-node replication clusters (gtid_domain_id 0 and 1) in $DIR"
$BIN sandbox up --dir "$DIR" --topology replication --nodes 2 --clusters 2

SJ=$(tr -d '\n ' <"$DIR/sandbox.json")
SHARDS_PORT=$(sed -n 's/.*"shards":{"host":"[^"]*","port":\([0-9]*\)}.*/\1/p' <<<"$SJ")
port_of() { sed -n 's/.*"name":"'"$1"'","host":"[^"]*","port":\([0-9]*\).*/\1/p' <<<"$SJ"; }
CTL="$BIN ctl --sandbox $DIR"

echo
echo "== starting Vigil (config $DIR/vigil.yaml); the sharded listener is 127.0.0.1:$SHARDS_PORT"
$BIN run --config "$DIR/vigil.yaml" >"$DIR/vigil.log" 2>&1 &
echo $! >"$DIR/vigil.pid"
M="mariadb -h127.0.0.1 -P$SHARDS_PORT -uapp -papp --protocol=tcp"

wait_until() {
  local limit=$1 what=$2 end=$((SECONDS + $1))
  shift 2
  until "$@"; do
    if ((SECONDS >= end)); then
      echo "!! $what did not happen within ${limit}s"
      return 1
    fi
    sleep 0.5
  done
}
wait_until 30 "the sharded listener answering" $M -e 'SELECT 1' >/dev/null 2>&1

echo
echo "== eight tenants: tenant1-4 on the first cluster's primary (node1), tenant5-8 on the second's (node3), created directly on the servers"
for i in 1 2 3 4 5 6 7 8; do
  node=node1; ((i > 4)) && node=node3
  mariadb -h127.0.0.1 -P"$(port_of $node)" -uapp -papp --protocol=tcp -e "CREATE DATABASE tenant$i"
done
$CTL shards

echo
echo "== sysbench writing to every tenant through the sharded listener (one sysbench per tenant, 20 s)"
pids=()
for i in 1 2 3 4 5 6 7 8; do
  sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$SHARDS_PORT" --mysql-user=app --mysql-password=app \
    --mysql-db=tenant$i --tables=1 --table-size=2000 prepare >/dev/null
done
for i in 1 2 3 4 5 6 7 8; do
  sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$SHARDS_PORT" --mysql-user=app --mysql-password=app \
    --mysql-db=tenant$i --tables=1 --table-size=2000 --threads=1 --time=20 --report-interval=0 run >"$DIR/sysbench-tenant$i.log" 2>&1 &
  pids+=($!)
done

echo
echo "== a statement that needs two clusters is refused, not answered in part:"
$M -e 'SELECT COUNT(*) FROM tenant1.sbtest1 JOIN tenant5.sbtest1 USING (id)' || true

echo
echo "== moving tenant2 to the second cluster while sysbench writes to it"
sleep 3
$CTL shard move tenant2 --to sandbox2 --wait

for p in "${pids[@]}"; do wait "$p"; done
echo
echo "== sysbench per tenant (errors must be 0):"
for i in 1 2 3 4 5 6 7 8; do
  printf 'tenant%s: %s, %s\n' "$i" "$(grep -m1 'transactions:' "$DIR/sysbench-tenant$i.log" | xargs)" "$(grep -m1 'ignored errors:' "$DIR/sysbench-tenant$i.log" | xargs)"
done
echo
$CTL shards
echo
echo "== done. tenant2's old copy stays on the first cluster until: $CTL shard cleanup tenant2"
echo "   Vigil keeps running (pid $(cat "$DIR/vigil.pid")); stop it and the sandbox with:"
echo "   kill \$(cat $DIR/vigil.pid); $BIN sandbox down --dir $DIR --purge"
