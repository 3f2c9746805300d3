#!/usr/bin/env bash
# Installs what the e2e tests and the local stack need, when it is missing:
# MariaDB server and client, with --with-sysbench also sysbench, with
# --with-bench sysbench and HAProxy (make bench's relay target), and with
# --with-etcd etcd (the fleet tests and make run-fleet start their own on
# free ports; under systemd, Debian's package also starts a system etcd on
# 127.0.0.1:2379), and with --with-mariadb-test MariaDB's regression suite
# (make compat).
# Debian/Ubuntu only (apt). As root it installs; otherwise it prints the
# exact command to run and exits 1.
#
# Usage: e2e/local/deps.sh [--with-sysbench] [--with-bench] [--with-etcd] [--with-mariadb-test]
#
# Run by e2e/local/run.sh (make run), make test and make bench.
set -euo pipefail

# Debian keeps mariadbd in /usr/sbin, outside a normal user's PATH.
export PATH="$PATH:/usr/sbin:/usr/local/sbin"

want_sysbench=0
want_haproxy=0
want_etcd=0
want_mtr=0
for arg in "$@"; do
	case "$arg" in
	--with-sysbench) want_sysbench=1 ;;
	--with-bench) want_sysbench=1 want_haproxy=1 ;;
	--with-etcd) want_etcd=1 ;;
	--with-mariadb-test) want_mtr=1 ;;
	-h | --help)
		sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "deps.sh: unknown argument: $arg" >&2
		exit 2
		;;
	esac
done

missing=()
# mariadb-server provides mariadbd and mariadb-install-db; mariadb-client
# provides mariadb.
if ! command -v mariadbd >/dev/null || ! command -v mariadb-install-db >/dev/null; then
	missing+=(mariadb-server)
fi
if ! command -v mariadb >/dev/null; then
	missing+=(mariadb-client)
fi
if [[ $want_sysbench == 1 ]] && ! command -v sysbench >/dev/null; then
	missing+=(sysbench)
fi
if [[ $want_haproxy == 1 ]] && ! command -v haproxy >/dev/null; then
	missing+=(haproxy)
fi

if [[ $want_etcd == 1 ]] && ! command -v etcd >/dev/null; then
	missing+=(etcd-server etcd-client)
fi

if [[ $want_mtr == 1 ]] && [[ ! -x /usr/share/mysql/mysql-test/mariadb-test-run.pl ]]; then
	missing+=(mariadb-test)
fi

if [[ ${#missing[@]} == 0 ]]; then
	exit 0
fi

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${missing[*]}"
if [[ $(id -u) != 0 ]]; then
	echo "deps.sh: missing: ${missing[*]}. Install them as root with:" >&2
	echo "  sudo sh -c '$cmd'" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null; then
	echo "deps.sh: missing: ${missing[*]}, and apt-get is not available: install them with your package manager." >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
