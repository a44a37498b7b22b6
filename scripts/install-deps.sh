#!/usr/bin/env bash
# Installs what Vigil's tests, demo and benchmarks need on Debian, only when
# something is missing:
#   mariadb-server mariadb-client galera-4 sysbench haproxy iproute2
#   iptables rsync procps chromium (the dashboard's browser test)
#   python3-pymysql python3-mysqldb php-cli php-mysql libdbd-mariadb-perl
#   ruby-mysql2 nodejs node-mysql default-jdk-headless libmariadb-java
#   (the client drivers of the compatibility test, docs/compatibility.md)
#   mariadb-test (MariaDB's own test suite, run by TestMTRCompat)
#   mariadb-backup (mariadb-backup and mbstream: `vigil agent` streams
#   backups and restores them, docs/lifecycle.md)
#   etcd-server etcd-client (etcd and etcdctl: `vigil sandbox up --etcd N`
#   runs its own etcd cluster, docs/sandbox.md)
# and checks for Go >= 1.26 (not from apt: Debian's Go is too old).
#
#   scripts/install-deps.sh          install what is missing (root, Debian)
#   scripts/install-deps.sh --check  exit 0 if everything is present, 1 if not
#
# It never starts, enables or stops a system MariaDB service: services are
# kept from starting during the install, and one already running is left
# alone. The etcd-server package's own etcd service (127.0.0.1:2379) is not
# left running either: if the install started one after all (a
# policy-rc.d already there allowed it), it is stopped and disabled.
# Idempotent: with everything present it prints one line and exits.
set -euo pipefail

GO_MIN_MAJOR=1
GO_MIN_MINOR=26
PACKAGES=(mariadb-server mariadb-client galera-4 sysbench haproxy iproute2 iptables rsync procps chromium
	python3-pymysql python3-mysqldb php-cli php-mysql libdbd-mariadb-perl ruby-mysql2 nodejs node-mysql
	default-jdk-headless libmariadb-java mariadb-test mariadb-backup etcd-server etcd-client)

usage() {
	# The comment at the top of this file, up to the first line of code.
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

mode=install
case "${1:-}" in
"") ;;
--check) mode=check ;;
-h | --help)
	usage
	exit 0
	;;
*)
	echo "install-deps: unknown argument $1 (use --check or --help)" >&2
	exit 2
	;;
esac

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin:/usr/local/go/bin"

# have_cmd NAME: is NAME an executable in PATH?
have_cmd() { command -v "$1" >/dev/null 2>&1; }

# provides PACKAGE: succeeds when what the project uses of PACKAGE is there.
provides() {
	case "$1" in
	mariadb-server) have_cmd mariadbd && have_cmd mariadb-install-db ;;
	mariadb-client) have_cmd mariadb ;;
	galera-4) [[ -e /usr/lib/galera/libgalera_smm.so ]] ;;
	sysbench) have_cmd sysbench ;;
	haproxy) have_cmd haproxy ;;
	iproute2) have_cmd ss && have_cmd ip ;;
	iptables) have_cmd iptables ;;
	rsync) have_cmd rsync ;;
	procps) have_cmd pgrep && have_cmd ps ;;
	chromium) have_cmd chromium ;;
	python3-pymysql) /usr/bin/python3 -c 'import pymysql' 2>/dev/null ;;
	python3-mysqldb) /usr/bin/python3 -c 'import MySQLdb' 2>/dev/null ;;
	php-cli) have_cmd php ;;
	php-mysql) have_cmd php && php -r 'exit(extension_loaded("mysqli") && extension_loaded("pdo_mysql") ? 0 : 1);' ;;
	libdbd-mariadb-perl) perl -MDBD::MariaDB -e 1 2>/dev/null ;;
	ruby-mysql2) have_cmd ruby && ruby -rmysql2 -e 0 2>/dev/null ;;
	nodejs) have_cmd node ;;
	node-mysql) [[ -e /usr/share/nodejs/mysql/package.json ]] ;;
	default-jdk-headless) have_cmd java && have_cmd javac ;;
	libmariadb-java) [[ -r /usr/share/java/mariadb-java-client.jar ]] ;;
	mariadb-test) have_cmd mariadb-test && [[ -e /usr/share/mysql/mysql-test/mariadb-test-run.pl ]] ;;
	etcd-server) have_cmd etcd ;;
	etcd-client) have_cmd etcdctl ;;
	*) dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" ;;
	esac
}

missing=()
for p in "${PACKAGES[@]}"; do
	provides "$p" || missing+=("$p")
done

# go_ok: is a Go toolchain >= 1.26 on PATH? Sets go_version.
go_version=""
go_ok() {
	have_cmd go || return 1
	go_version=$(go env GOVERSION 2>/dev/null || true)
	[[ "$go_version" =~ ^go([0-9]+)\.([0-9]+) ]] || return 1
	local major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
	((major > GO_MIN_MAJOR || (major == GO_MIN_MAJOR && minor >= GO_MIN_MINOR)))
}

go_hint() {
	echo "install-deps: Go >= ${GO_MIN_MAJOR}.${GO_MIN_MINOR} is needed${go_version:+ (found $go_version)}." >&2
	echo "  Get it from https://go.dev/dl/ : download go1.26.<n>.linux-amd64.tar.gz, then" >&2
	echo "  rm -rf /usr/local/go && tar -C /usr/local -xzf go1.26.<n>.linux-amd64.tar.gz" >&2
	echo "  export PATH=/usr/local/go/bin:\$PATH" >&2
}

have_go=1
go_ok || have_go=0

if [[ $mode == check ]]; then
	if ((${#missing[@]} == 0 && have_go)); then
		echo "install-deps: all dependencies present ($go_version)"
		exit 0
	fi
	((${#missing[@]})) && echo "install-deps: missing: ${missing[*]}"
	((have_go)) || echo "install-deps: missing: go >= ${GO_MIN_MAJOR}.${GO_MIN_MINOR}"
	exit 1
fi

if ((${#missing[@]} == 0)); then
	if ((have_go)); then
		echo "install-deps: all dependencies present ($go_version)"
		exit 0
	fi
	go_hint
	exit 1
fi

echo "install-deps: missing: ${missing[*]}"
if [[ ! -r /etc/debian_version ]] || ! have_cmd apt-get; then
	echo "install-deps: this is not Debian: install these with your package manager:" >&2
	echo "  MariaDB server and client 10.11 or newer, Galera 4, sysbench, HAProxy, iproute2 (ss), iptables, rsync, procps," >&2
	echo "  etcd 3.4 or newer (etcd and etcdctl)," >&2
	echo "  and the client drivers listed in docs/compatibility.md" >&2
	((have_go)) || go_hint
	exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "install-deps: run as root to install them:" >&2
	echo "  sudo scripts/install-deps.sh" >&2
	echo "  (or: sudo apt-get update && sudo apt-get install -y ${missing[*]})" >&2
	((have_go)) || go_hint
	exit 1
fi

# Keep the packages' services (the system MariaDB, HAProxy) from being
# started by the install; a policy-rc.d already there is respected.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\n# written by vigil scripts/install-deps.sh for the duration of an install\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	made_policy=1
fi
cleanup() { if ((made_policy)); then rm -f "$policy"; fi; }
trap cleanup EXIT

# system_etcd_pids: the etcd-server package's service (it runs as user etcd).
system_etcd_pids() { pgrep -u etcd -x etcd 2>/dev/null || true; }

# stop_system_etcd: stops and disables an etcd service this install started
# (only when a policy-rc.d already there let the package start it).
stop_system_etcd() {
	[[ -n $(system_etcd_pids) ]] || return 0
	echo "install-deps: stopping the etcd service the etcd-server package started (vigil sandbox runs its own etcd)"
	if [[ -d /run/systemd/system ]] && have_cmd systemctl; then
		systemctl stop etcd.service || true
		systemctl disable etcd.service >/dev/null 2>&1 || true
	elif [[ -x /etc/init.d/etcd ]]; then
		/etc/init.d/etcd stop || true
		update-rc.d etcd disable >/dev/null 2>&1 || true
	fi
	local pid
	for pid in $(system_etcd_pids); do
		kill "$pid" 2>/dev/null || true
	done
}

etcd_was_running=$(system_etcd_pids)

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q "${PACKAGES[@]}"

if [[ -z $etcd_was_running && " ${missing[*]} " == *" etcd-server "* ]]; then
	stop_system_etcd
fi

still=()
for p in "${PACKAGES[@]}"; do
	provides "$p" || still+=("$p")
done
if ((${#still[@]})); then
	echo "install-deps: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
if ((!have_go)); then
	go_hint
	exit 1
fi
echo "install-deps: installed ${missing[*]} ($go_version)"
