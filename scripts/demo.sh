#!/usr/bin/env bash
# make demo: a 3-node MariaDB replication sandbox, Vigil in front of it,
# traffic through Vigil, a planned switchover, an unplanned failover, and
# self-healing: an old primary that comes back holding a transaction the
# new primary lacks is refused, salvaged and rebuilt through the agents.
# Every wait is bounded; a step that does not happen in time ends the demo
# with a message and exit status 1.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${VIGIL_DEMO_DIR:-/tmp/vigil-demo}
BIN=bin/vigil

if [[ -f "$DIR/sandbox.json" ]]; then
  echo "== stopping the previous demo in $DIR"
  [[ -f "$DIR/vigil.pid" ]] && kill "$(cat "$DIR/vigil.pid")" 2>/dev/null || true
  $BIN sandbox down --dir "$DIR" --purge || true
fi

echo "== starting a 3-node replication sandbox (semi-synchronous, a vigil agent beside every node, lifecycle.self_healing on) in $DIR"
$BIN sandbox up --dir "$DIR" --topology replication --nodes 3 --semi-sync --self-healing

PROXY_PORT=$(tr -d '\n ' <"$DIR/sandbox.json" | sed -n 's/.*"proxy":{"host":"[^"]*","port":\([0-9]*\)}.*/\1/p')
ADMIN_PORT=$(tr -d '\n ' <"$DIR/sandbox.json" | sed -n 's/.*"admin":{"host":"[^"]*","port":\([0-9]*\)}.*/\1/p')
CTL="$BIN ctl --sandbox $DIR"  # sends the sandbox's admin token

echo
echo "== starting Vigil (config $DIR/vigil.yaml): clients on 127.0.0.1:$PROXY_PORT, admin API on 127.0.0.1:$ADMIN_PORT"
$BIN run --config "$DIR/vigil.yaml" >"$DIR/vigil.log" 2>&1 &
echo $! >"$DIR/vigil.pid"
M="mariadb -h127.0.0.1 -P$PROXY_PORT -uapp -papp --protocol=tcp"

# The events the automatic rebuild journals (issue 27, self-healing).
EV_REBUILD_STARTED=rebuild_started
EV_REBUILD_FINISHED=rebuild_finished
EV_REBUILD_FAILED=rebuild_failed

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every half second until
# it succeeds; after SECONDS says what did not happen and returns 1.
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
# servers_json: Vigil's servers on one line, without blanks.
servers_json() { $CTL --json servers 2>/dev/null | tr -d '\n '; }
# role_state NAME: "role state" of a server as Vigil sees it.
role_state() {
  servers_json | sed -n 's/.*"name":"'"$1"'","address":"[^"]*","cluster":"[^"]*","role":"\([^"]*\)","state":"\([^"]*\)".*/\1 \2/p'
}
writer() { servers_json | sed -n 's/.*"name":"\([^"]*\)","address":"[^"]*","cluster":"[^"]*","role":"primary".*/\1/p'; }
writer_is_not() { local w; w=$(writer); [[ -n $w && $w != "$1" ]]; }
is_online_replica() { [[ $(role_state "$1") == "replica ONLINE" ]]; }
# has_event KIND NAME: Vigil journaled an event of KIND for server NAME.
has_event() { $CTL --json events --kind "$1" --server "$2" --limit 5 2>/dev/null | tr -d '\n ' | grep -q '"kind":"'"$1"'"'; }
# refused NAME: Vigil refused to rejoin NAME because it holds transactions
# the primary lacks (or already started rebuilding it). A salvage event
# alone says nothing: every failover salvages, mostly 0 transactions.
refused() { has_event auto_rejoin_skipped "$1" || has_event "$EV_REBUILD_STARTED" "$1"; }
# event_message KIND NAME: the newest such event, as vigil ctl events prints it.
event_message() { $CTL events --kind "$1" --server "$2" --limit 1 2>/dev/null || true; }
fail() {
  echo "!! $*"
  echo "   Vigil's log: $DIR/vigil.log; events: $CTL events"
  echo "   stop everything: kill \$(cat $DIR/vigil.pid); $BIN sandbox down --dir $DIR --purge"
  exit 1
}
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

# await_rebuild NAME: NAME was refused a rejoin; wait for Vigil to salvage
# its extra transactions and rebuild it through the agents.
await_rebuild() {
  local n=$1
  wait_until 60 "Vigil refusing to rejoin $n (event auto_rejoin_skipped)" refused "$n" ||
    fail "Vigil did not notice that $n diverged"
  echo "-- Vigil refuses to rejoin $n:"
  event_message auto_rejoin_skipped "$n"
  $CTL events --kind salvage --server "$n" --limit 3 || true
  echo "-- salvage files (what $n held that the new primary lacks):"
  ls -l "$DIR/state/salvage" 2>/dev/null || echo "   (none in $DIR/state/salvage yet)"
  echo "-- waiting for the automatic rebuild of $n through the agents (lifecycle.self_healing)"
  if ! wait_until 60 "a rebuild of $n starting (event $EV_REBUILD_STARTED)" has_event $EV_REBUILD_STARTED "$n"; then
    fail "self-healing did not start rebuilding $n: is lifecycle.self_healing implemented in this Vigil? ($CTL clones shows clones)"
  fi
  event_message $EV_REBUILD_STARTED "$n"
  local end=$((SECONDS + 180))
  until has_event $EV_REBUILD_FINISHED "$n"; do
    has_event $EV_REBUILD_FAILED "$n" && { event_message $EV_REBUILD_FAILED "$n"; fail "the rebuild of $n failed"; }
    ((SECONDS < end)) || fail "the rebuild of $n did not finish within 180s"
    sleep 1
  done
  event_message $EV_REBUILD_FINISHED "$n"
  wait_until 60 "$n serving as an ONLINE replica after its rebuild" is_online_replica "$n" ||
    fail "$n was rebuilt but is not an ONLINE replica: $(role_state "$n")"
  $CTL clones
}

echo
echo "== self-healing, part 1: the killed old primary ($PRIMARY) starts again"
$BIN sandbox start "$PRIMARY" --dir "$DIR"
# It rejoins as a replica by itself (failover.auto_rejoin), unless the kill
# left it with a transaction no replica received: then Vigil rebuilds it.
end=$((SECONDS + 60))
while :; do
  if is_online_replica "$PRIMARY"; then
    echo "-- $PRIMARY rejoined as a replica by itself (it held nothing the new primary lacks)"
    break
  fi
  if refused "$PRIMARY"; then
    echo "-- $PRIMARY came back diverged (the kill caught a transaction no replica received)"
    await_rebuild "$PRIMARY"
    break
  fi
  ((SECONDS < end)) || fail "$PRIMARY neither rejoined nor was refused within 60s: $(role_state "$PRIMARY")"
  sleep 0.5
done
$CTL servers

echo
OLD=$(writer)
[[ -n $OLD ]] || fail "no writer"
REPLICAS=$($CTL --json servers | tr -d '\n ' | grep -o '"name":"[^"]*"' | cut -d'"' -f4 | grep -vx "$OLD" | tr '\n' ' ')
echo "== self-healing, part 2: the primary $OLD commits a transaction no replica receives, then is killed -9"
for r in $REPLICAS; do $BIN sandbox sql "$r" "STOP SLAVE IO_THREAD" --dir "$DIR"; done
# (semi-sync would wait for an acknowledgement nobody sends)
$BIN sandbox sql "$OLD" "SET GLOBAL rpl_semi_sync_master_enabled = OFF" --dir "$DIR"
$BIN sandbox sql "$OLD" "INSERT INTO demo.t (note) VALUES ('only on $OLD')" --dir "$DIR"
echo "-- $OLD holds $($BIN sandbox sql "$OLD" "SELECT @@gtid_binlog_pos" --dir "$DIR"); the replicas stopped receiving"
$BIN sandbox kill "$OLD" --dir "$DIR"
for r in $REPLICAS; do $BIN sandbox sql "$r" "START SLAVE IO_THREAD" --dir "$DIR"; done
# Vigil saw $OLD's last GTID, which no replica has: with semi-sync it does
# not promote over a known loss by itself (failover_WouldLoseData). The
# operator decides to: the transaction is not lost for good, it is salvaged.
if ! wait_until 8 "an automatic failover away from $OLD" writer_is_not "$OLD" >/dev/null; then
  echo "-- no automatic failover within 8s; Vigil says why:"
  $CTL events --limit 30 | grep -i 'WouldLoseData' | tail -1 || echo "   (no failover_WouldLoseData event: see $CTL events)"
  echo "-- the operator accepts the loss: $CTL failover --accept-loss"
  $CTL failover --accept-loss | tail -2 || true
fi
wait_until 30 "a failover away from $OLD" writer_is_not "$OLD" || fail "no failover away from $OLD"
NEW=$(writer)
echo "-- failover: $NEW is the primary"
echo "-- $OLD starts again, holding the transaction $NEW lacks"
$BIN sandbox start "$OLD" --dir "$DIR"
await_rebuild "$OLD"
left=$($BIN sandbox sql "$OLD" "SELECT COUNT(*) FROM demo.t WHERE note = 'only on $OLD'" --dir "$DIR")
[[ $left == 0 ]] || fail "$OLD still holds its diverged row after the rebuild"
echo "-- $OLD was rebuilt from a copy of the cluster: its diverged row is gone from it (kept in the salvage file), it replicates from $NEW"
$CTL servers
echo
echo "== what happened"
$CTL events --limit 20

cat <<EOT

== try it yourself
  $M
  $CTL servers | events | switchover --dry-run
  $CTL clones                                                         # the rebuilds through the agents
  ls $DIR/state/salvage                                               # what the diverged old primary held
  $BIN sandbox add --spare --dir $DIR                                 # a spare host for lifecycle.spares
  $BIN sandbox pause node3 --dir $DIR                                 # a hung replica leaves routing within ~1.5 s

== stop everything
  kill \$(cat $DIR/vigil.pid); $BIN sandbox down --dir $DIR --purge
EOT
