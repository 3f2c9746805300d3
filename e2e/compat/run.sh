#!/usr/bin/env bash
# make compat: MariaDB's own regression tests (Debian's mariadb-test
# package, mysql-test/main), each run with mariadb-test-run.pl --extern
# straight against MariaDB and through the gateway, in text, --ps-protocol
# and --cursor-protocol modes, one test at a time, the server's state
# restored directly on MariaDB before each run (see restore below). Prints
# the pass counts side by side and the tests that pass only directly.
#
# Usage: e2e/compat/run.sh [-l LIST] [-m "text ps cursor"] [-o OUTDIR] [TEST...]
#   -l LIST  file of test names (main.<name>, one a line, # comments);
#            default e2e/compat/tests.txt
#   -m MODES the modes to run (default: text ps cursor)
#   -o DIR   keep the per-test logs and the summary there (default: a
#            temporary directory, printed)
#   TEST...  run these tests instead of the list
#
# Needs the gateway binary (bin/gateway, make build) and mariadb-server,
# mariadb-client and mariadb-test (apt, as root: make compat installs them).
# Everything runs on loopback ports chosen free at start; nothing is left
# running at exit.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/usr/local/sbin"

here="$(cd "$(dirname "$0")" && pwd)"
top="$(cd "$here/../.." && pwd)"
list="$here/tests.txt"
modes="text ps cursor"
out=""
while getopts "l:m:o:h" opt; do
	case "$opt" in
	l) list="$OPTARG" ;;
	m) modes="$OPTARG" ;;
	o) out="$OPTARG" ;;
	*)
		sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))

mtrdir=/usr/share/mysql/mysql-test
if [[ ! -x $mtrdir/mariadb-test-run.pl ]]; then
	echo "compat: $mtrdir/mariadb-test-run.pl missing: apt-get install mariadb-test" >&2
	exit 1
fi
if [[ $# -gt 0 ]]; then
	tests=("$@")
else
	mapfile -t tests < <(grep -v '^\s*#' "$list" | awk 'NF {print $1}')
fi

work="$(mktemp -d /tmp/dg-compat.XXXXXX)"
out="${out:-$work/out}"
mkdir -p "$out"
var="$work/var"
data="$var/mysqld.1/data"
mkdir -p "$data" "$var/tmp" "$var/log" "$work/tmp"

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
dbport=$(freeport)
gwport=$(freeport)
sock="$work/mysqld.sock"

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# The server runs with mariadb-test-run.pl's own [mysqld] options (mysqld.cnf),
# its data directory where mtr would keep it (var/mysqld.1/data: tests read
# files relative to it, ../../std_data) and secure_file_priv the vardir.
cnf="$work/my.cnf"
{
	cat "$here/mysqld.cnf"
	cat <<EOF
datadir=$data
port=$dbport
bind-address=127.0.0.1
socket=$sock
pid-file=$work/mysqld.pid
log-error=$var/log/mysqld.1.err
tmpdir=$work/tmp
secure-file-priv=$var
user=root
max-connections=1000
innodb_buffer_pool_size=64M
EOF
} >"$cnf"
mariadb-install-db --no-defaults --datadir="$data" --auth-root-authentication-method=normal --user=root >"$work/install.log" 2>&1
mariadbd --defaults-file="$cnf" >"$work/mysqld.out" 2>&1 &
pids+=($!)

# admin runs SQL directly on MariaDB, over the socket, as root.
admin() { mariadb --no-defaults -S "$sock" -uroot --batch --skip-column-names "$@"; }
for _ in $(seq 1 100); do
	admin -e 'SELECT 1' >/dev/null 2>&1 && break
	sleep 0.2
done
admin -e 'SELECT 1' >/dev/null

# mtr's own schema: check_warnings, add_suppression, check_testcase (what
# mtr bootstraps into a server it starts itself).
admin -e 'CREATE DATABASE mtr'
for f in mtr_warnings mtr_check; do
	(
		echo 'DELIMITER ||'
		grep -v '^\s*--' "$mtrdir/include/$f.sql" | grep -iv '^delimiter'
	) | admin mtr
done
# A restore account of our own: tests drop and change root's.
admin -e "CREATE USER dgcompat@localhost; GRANT ALL ON *.* TO dgcompat@localhost WITH GRANT OPTION"

# The snapshot restore compares against: globals, accounts, databases.
admin -e 'SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES ORDER BY 1' >"$work/globals.0"
admin -e "SELECT CONCAT(QUOTE(User), '@', QUOTE(Host)) FROM mysql.global_priv ORDER BY 1" >"$work/users.0"

# restore brings the server back to the snapshot, directly: it ends every
# client thread (leftover sessions, the gateway's pooled connections),
# rolls back prepared XA transactions, drops the databases and accounts a
# test made, recreates root and the test database, and sets changed
# globals back. Runs as dgcompat over the socket.
restore() {
	local a=(mariadb --no-defaults -S "$sock" -udgcompat --batch --skip-column-names --force)
	{
		"${a[@]}" -e "SELECT CONCAT('KILL ', ID, ';') FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Daemon' AND USER NOT IN ('system user', 'event_scheduler', '')"
		"${a[@]}" -e "XA RECOVER FORMAT='SQL'" | awk -F'\t' '{print "XA ROLLBACK " $4 ";"}'
		"${a[@]}" -e "SELECT CONCAT('DROP DATABASE IF EXISTS \`', SCHEMA_NAME, '\`;') FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys', 'mtr')"
		"${a[@]}" -e "SELECT CONCAT(QUOTE(User), '@', QUOTE(Host)) FROM mysql.global_priv ORDER BY 1" |
			comm -23 - "$work/users.0" | sed 's/.*/DROP USER IF EXISTS &;/'
		echo "CREATE DATABASE test; TRUNCATE mtr.test_suppressions;"
		echo "CREATE USER IF NOT EXISTS root@localhost; ALTER USER root@localhost IDENTIFIED BY ''; GRANT ALL ON *.* TO root@localhost WITH GRANT OPTION;"
		"${a[@]}" -e 'SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES ORDER BY 1' |
			diff - "$work/globals.0" | sed -n 's/^> //p' | awk -F'\t' '{
				v = $2
				if (v !~ /^-?[0-9]+(\.[0-9]+)?$/) { gsub(/\\/, "\\\\", v); gsub(/'"'"'/, "'"''"'", v); v = "'"'"'" v "'"'"'" }
				print "SET GLOBAL " $1 " = " v ";"
			}'
	} >"$work/restore.sql"
	"${a[@]}" <"$work/restore.sql" >/dev/null 2>&1 || true
}

# The gateway: mtr logs in as root (no password), and its tests open more
# connections as root; root runs as MariaDB's root (its grants decide
# PROCESS and KILL, issue 37), on a small pool so that sessions share
# connections. The accounts tests create (CREATE USER foo@localhost) log
# in as MariaDB's own accounts (mariadb_accounts, read by dgcompat). Every
# account change of the tests goes through the gateway, which reads the
# accounts again at once: the periodic read is rare (refresh: 1h), since
# with userstat on a read of mysql.global_priv shows in the tests'
# TABLE_STATISTICS (main.subselect).
cat >"$work/gateway.yaml" <<EOF
listen: 127.0.0.1:$gwport
http_listen: "off"
log: {level: warn}
max_allowed_packet: 1073741824
users:
  - {user: root, backend_user: root}
clusters:
  - name: main
    backend_user: dgcompat
    backends: ["127.0.0.1:$dbport"]
    pool: {size: 8, min_idle: 1, acquire_timeout: 10s}
mariadb_accounts: {enabled: true, refresh: 1h}
EOF
"$top/bin/gateway" serve --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
	mariadb --no-defaults -h127.0.0.1 -P"$gwport" -uroot --protocol=tcp -e 'SELECT 1' >/dev/null 2>&1 && break
	sleep 0.2
done

# run TARGET PORT MODE TEST: one mtr run of one test; prints pass, fail or skip.
run() {
	local target=$1 port=$2 mode=$3 t=$4 flag=""
	case "$mode" in
	ps) flag=--ps-protocol ;;
	cursor) flag=--cursor-protocol ;;
	esac
	local log="$out/$mode/$target/$t.log"
	mkdir -p "$(dirname "$log")"
	restore
	(cd "$mtrdir" && timeout 300 perl ./mariadb-test-run.pl --extern host=127.0.0.1 --extern port="$port" \
		--extern user=root --extern protocol=tcp --vardir="$var" --nocheck-testcases --force \
		--max-test-fail=0 --testcase-timeout=1 --retry=0 $flag "$t") >"$log" 2>&1 || true
	local name=${t#main.}
	if grep -Eq "^main\.$name( |'.*')? +\[ pass \]" "$log"; then
		echo pass
	elif grep -Eq "^main\.$name( |'.*')? +\[ (skipped|disabled) \]" "$log"; then
		echo skip
	else
		echo fail
	fi
}

summary="$out/summary.txt"
: >"$summary"
for mode in $modes; do
	: >"$out/$mode.results"
	for t in "${tests[@]}"; do
		d=$(run direct "$dbport" "$mode" "$t")
		g=$(run gateway "$gwport" "$mode" "$t")
		printf '%s\t%s\t%s\n' "$t" "$d" "$g" >>"$out/$mode.results"
	done
done

echo "compat: $((${#tests[@]})) tests of mysql-test/main, mariadb-test-run.pl --extern, one at a time" | tee -a "$summary"
printf '%-8s %8s %8s %8s %s\n' mode direct gateway ratio "passing only directly" | tee -a "$summary"
status=0
for mode in $modes; do
	f="$out/$mode.results"
	d=$(awk -F'\t' '$2 == "pass"' "$f" | wc -l)
	g=$(awk -F'\t' '$2 == "pass" && $3 == "pass"' "$f" | wc -l)
	only=$(awk -F'\t' '$2 == "pass" && $3 != "pass" {printf "%s ", $1}' "$f")
	ratio=$(awk -v d="$d" -v g="$g" 'BEGIN { if (d == 0) print "-"; else printf "%.1f%%", 100 * g / d }')
	printf '%-8s %8d %8d %8s %s\n' "$mode" "$d" "$g" "$ratio" "$only" | tee -a "$summary"
	if [[ $d -gt 0 ]] && awk -v d="$d" -v g="$g" 'BEGIN { exit !(g < 0.95 * d) }'; then
		status=1
	fi
done
echo "logs: $out" | tee -a "$summary"
exit $status
