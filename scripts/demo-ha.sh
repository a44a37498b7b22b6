#!/usr/bin/env bash
# make demo-ha: two Vigil instances coordinated through a 3-member etcd
# cluster in front of a 3-node semi-synchronous replication sandbox.
# A writer runs through each instance while we switch over through the
# instance that does not act, kill the primary, isolate one Vigil from
# etcd (it refuses writes with 7015 and comes back), and kill the acting
# Vigil (the other one takes over). docs/ha.md explains each step.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${VIGIL_DEMO_DIR:-/tmp/vigil-demo-ha}
BIN=$PWD/bin/vigil

if [[ -f "$DIR/sandbox.json" ]]; then
  echo "== stopping the previous demo in $DIR"
  $BIN sandbox down --dir "$DIR" --purge || true
fi

echo "== 3 MariaDB nodes (semi-sync), 3 etcd members, 2 Vigil instances in $DIR"
$BIN sandbox up --dir "$DIR" --topology replication --nodes 3 --semi-sync --etcd 3 --vigils 2 | tail -12

field() { python3 -c "import json,sys; m=json.load(open('$DIR/sandbox.json')); print(eval(sys.argv[1]))" "$1"; }
P1=$(field "m['vigils'][0]['proxy']['port']"); A1=$(field "m['vigils'][0]['admin']['port']")
P2=$(field "m['vigils'][1]['proxy']['port']"); A2=$(field "m['vigils'][1]['admin']['port']")
TOKEN=$(field "m['admin_token']")
ctl() { local port=$1; shift; $BIN ctl --admin "http://127.0.0.1:$port" --token "$TOKEN" "$@"; }
cat >"$DIR/coord.py" <<'PY'
import json, sys
d = json.load(sys.stdin)
l, c = d["lease"], d["clusters"]["sandbox"]
r = c.get("record") or {}
print("  %s: lease %s, acting=%s (leader %s), term %s, writer %s (%s), fenced %s, writes %s" % (
    l["instance"], l["lease"], c["acting"], c["leader"], r.get("term"), r.get("writer") or "-",
    r.get("phase"), r.get("fenced") or [], c["writes"]))
PY
coord() { curl -s -m 2 -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$1/api/v1/coordination" | python3 "$DIR/coord.py" 2>/dev/null || echo "  (instance on port $1 does not answer)"; }
show() { coord "$A1"; coord "$A2"; }

sleep 2
show
M1="mariadb -h127.0.0.1 -P$P1 -uapp -papp --protocol=tcp"
M2="mariadb -h127.0.0.1 -P$P2 -uapp -papp --protocol=tcp"
$M1 -e "CREATE DATABASE IF NOT EXISTS demo; CREATE TABLE IF NOT EXISTS demo.t (id INT PRIMARY KEY AUTO_INCREMENT, via VARCHAR(8), server_id INT)"

echo
echo "== a writer through each instance: one INSERT every 50 ms, stamped with @@server_id"
writer() { local name=$1 m=$2 ok=0 bad=0 last=""
  while [[ ! -f "$DIR/stop-writers" ]]; do
    if out=$($m -s -e "INSERT INTO demo.t (via, server_id) VALUES ('$name', @@server_id)" 2>&1); then ok=$((ok+1)); else bad=$((bad+1)); last=$(echo "$out" | grep -m1 ERROR || true); fi
    echo "$ok $bad ${last:0:110}" >"$DIR/writer-$name.count"; sleep 0.05; done; }
rm -f "$DIR/stop-writers"
writer vigil1 "$M1" & writer vigil2 "$M2" &
sleep 2

echo
echo "== switchover, asked of whichever instance does not act (it forwards through etcd)"
ACT=$A1; OTHER=$A2
curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$A2/api/v1/coordination" | grep -q '"acting":true' && { ACT=$A2; OTHER=$A1; }
ctl "$OTHER" switchover --to node2 | tail -2
sleep 1; show

echo
echo "== kill -9 the primary (node2): exactly one failover, by the acting instance"
$BIN sandbox kill --dir "$DIR" node2
sleep 6; show

echo
echo "== isolate vigil2 from etcd: within the 2 s lease it refuses writes (error 7015), reads go on"
$BIN sandbox isolate --dir "$DIR" vigil2
sleep 3
$M2 -e "INSERT INTO demo.t (via, server_id) VALUES ('manual', @@server_id)" 2>&1 | sed 's/^/  /' || true
$M2 -N -e "SELECT CONCAT('  a read through vigil2 still works: server_id ', @@server_id)"
$BIN sandbox heal --dir "$DIR" vigil2
sleep 3; show

echo
echo "== kill -9 the acting Vigil: the other instance is elected within the lease"
if [[ $ACT == "$A1" ]]; then $BIN sandbox kill --dir "$DIR" vigil1; else $BIN sandbox kill --dir "$DIR" vigil2; fi
sleep 4; show

touch "$DIR/stop-writers"; sleep 0.5
for n in vigil1 vigil2; do read -r OK BAD LAST <"$DIR/writer-$n.count"; echo "writer through $n: $OK acknowledged, $BAD failed${LAST:+ (last error: $LAST)}"; done
echo
echo "rows per server_id on the current primary (no row reached a fenced server after its term):"
$M2 -e "SELECT via, server_id, COUNT(*) FROM demo.t GROUP BY via, server_id"
echo
echo "Explore: $BIN sandbox status --dir $DIR; etcdctl --endpoints 127.0.0.1:$(field "m['etcd'][0]['client_port']") get --prefix /vigil-sandbox/"
echo "Tear down: $BIN sandbox down --dir $DIR --purge"
