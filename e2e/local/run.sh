#!/usr/bin/env bash
# Local stack for `make run`: a MariaDB primary on 127.0.0.1:13306 and the
# gateway on 127.0.0.1:15306 (HTTP on 127.0.0.1:15000). Everything lives
# under .local/ at the top of the tree (git-ignored):
#
#   .local/primary/data        MariaDB data dir, initialised on the first run
#   .local/primary/error.log   MariaDB error log
#   .local/primary/mysqld.sock root logs in here: mariadb -S .local/primary/mysqld.sock -uroot
#   .local/gateway.yaml        gateway config, rewritten on every run
#
# It builds nothing: make run builds bin/gateway first. The gateway runs in
# the foreground under this script; Ctrl-C, SIGTERM or the gateway exiting
# stops the gateway, then MariaDB, and the script exits.
#
# Each MariaDB server has its own start function (start_primary); to add a
# replica, write start_replica around start_server (name, port, server id)
# and call it after start_primary. Servers stop in reverse start order.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
LOCAL="$ROOT/.local"
GATEWAY_BIN=${GATEWAY_BIN:-"$ROOT/bin/gateway"} # override to try another build
CONFIG="$LOCAL/gateway.yaml"

# Debian keeps mariadbd in /usr/sbin, outside a normal user's PATH.
export PATH="$PATH:/usr/sbin:/usr/local/sbin"

PRIMARY_PORT=13306
GATEWAY_LISTEN=127.0.0.1:15306
GATEWAY_HTTP=127.0.0.1:15000

SERVERS=()              # MariaDB server names, in start order
declare -A SERVER_PID=() # name -> pid of the mariadbd this script started
GATEWAY_PID=

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# alive PID: the process exists and is not a zombie.
alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat:0:1} != Z ]]
}

# stop_pid PID NAME TIMEOUT_SECONDS: SIGTERM, wait, SIGKILL after the timeout.
stop_pid() {
	local pid=$1 name=$2 timeout=$3 i
	if alive "$pid"; then
		log "stopping $name (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < timeout * 10; i++)); do
			alive "$pid" || break
			sleep 0.1
		done
		if alive "$pid"; then
			log "$name did not stop within ${timeout}s: sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	wait "$pid" 2>/dev/null || true # reap it if it is our child
}

# port_open PORT: something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# port_holder PORT: pid of the process listening on PORT, if ss can tell.
port_holder() {
	command -v ss >/dev/null || return 0
	ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2
}

# is_our_mariadbd PID DIR: PID is a mariadbd serving DIR/data.
is_our_mariadbd() {
	[[ $1 =~ ^[0-9]+$ ]] && alive "$1" || return 1
	tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "--datadir=$2/data"
}

# sql NAME [mariadb args...]: the mariadb client as root over NAME's socket.
sql() {
	local name=$1
	shift
	mariadb --no-defaults --socket="$LOCAL/$name/mysqld.sock" -uroot "$@"
}

# start_server NAME PORT SERVER_ID [extra mariadbd flags...]: initialise
# .local/NAME/data once, start mariadbd on 127.0.0.1:PORT, wait until it
# answers, drop the anonymous accounts.
start_server() {
	local name=$1 port=$2 server_id=$3
	shift 3
	local dir="$LOCAL/$name" user_args=() pid old i
	[[ $(id -u) == 0 ]] && user_args=(--user=root) # mariadbd refuses root without it
	mkdir -p "$dir/tmp"

	# A mariadbd of ours left by an earlier run (killed script, closed
	# terminal): stop it. Anything else on the port is not ours to stop.
	for old in "$(cat "$dir/mysqld.pid" 2>/dev/null || true)" "$(port_holder "$port")"; do
		if is_our_mariadbd "$old" "$dir"; then
			log "$name: stopping the mariadbd left running by an earlier run"
			stop_pid "$old" "$name MariaDB (earlier run)" 60
		fi
	done
	if port_open "$port"; then
		old=$(port_holder "$port")
		die "$name: port $port is held by another process${old:+ (pid $old: $(tr '\0' ' ' <"/proc/$old/cmdline" 2>/dev/null | cut -c1-120))}, not by this project's MariaDB in .local/$name. Stop it or free the port."
	fi

	if [[ ! -f $dir/initialised ]]; then
		log "$name: initialising $dir/data (first run)"
		rm -rf "$dir/data"
		if ! mariadb-install-db --no-defaults --datadir="$dir/data" \
			--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
			--innodb-log-file-size=48M "${user_args[@]}" >"$dir/install.log" 2>&1; then
			tail -n 30 "$dir/install.log" >&2
			die "$name: mariadb-install-db failed (full log: $dir/install.log)"
		fi
		touch "$dir/initialised"
	fi

	log "$name: starting mariadbd on 127.0.0.1:$port (log: $dir/error.log)"
	# setsid: a Ctrl-C in the terminal reaches this script only, which then
	# stops the gateway before the database.
	setsid mariadbd --no-defaults \
		--datadir="$dir/data" \
		--port="$port" \
		--bind-address=127.0.0.1 \
		--socket="$dir/mysqld.sock" \
		--pid-file="$dir/mysqld.pid" \
		--log-error="$dir/error.log" \
		--tmpdir="$dir/tmp" \
		--server-id="$server_id" \
		--skip-name-resolve \
		--innodb-buffer-pool-size=64M \
		--innodb-log-file-size=48M \
		--max-connections=2000 \
		--log-bin=mysql-bin --binlog-format=ROW --relay-log=relay-bin \
		"${user_args[@]}" "$@" \
		</dev/null >>"$dir/mariadbd.out" 2>&1 &
	pid=$!
	SERVERS+=("$name")
	SERVER_PID[$name]=$pid

	for ((i = 0; i < 600; i++)); do
		if ! alive "$pid"; then
			tail -n 30 "$dir/error.log" "$dir/mariadbd.out" >&2 2>/dev/null || true
			die "$name: mariadbd exited during start (see $dir/error.log)"
		fi
		if sql "$name" -e 'SELECT 1' >/dev/null 2>&1; then
			break
		fi
		sleep 0.1
	done
	sql "$name" -e 'SELECT 1' >/dev/null || die "$name: mariadbd did not answer within 60s (see $dir/error.log)"

	local anon
	anon=$(sql "$name" -N -B -e "SELECT CONCAT('DROP USER ', QUOTE(User), '@', QUOTE(Host), ';') FROM mysql.user WHERE User = ''")
	if [[ -n $anon ]]; then
		sql "$name" -e "$anon"
	fi
	log "$name: ready on 127.0.0.1:$port (pid $pid)"
}

# start_primary: the primary, with the gateway's backend account and the demo
# database. Idempotent: safe on every run.
start_primary() {
	start_server primary "$PRIMARY_PORT" 1
	sql primary <<-'SQL'
		CREATE USER IF NOT EXISTS 'gateway'@'%' IDENTIFIED BY 'secret';
		CREATE USER IF NOT EXISTS 'gateway'@'localhost' IDENTIFIED BY 'secret';
		CREATE USER IF NOT EXISTS 'gateway'@'127.0.0.1' IDENTIFIED BY 'secret';
		ALTER USER 'gateway'@'%' IDENTIFIED BY 'secret';
		ALTER USER 'gateway'@'localhost' IDENTIFIED BY 'secret';
		ALTER USER 'gateway'@'127.0.0.1' IDENTIFIED BY 'secret';
		GRANT ALL PRIVILEGES ON *.* TO 'gateway'@'%';
		GRANT ALL PRIVILEGES ON *.* TO 'gateway'@'localhost';
		GRANT ALL PRIVILEGES ON *.* TO 'gateway'@'127.0.0.1';
		CREATE DATABASE IF NOT EXISTS demo;
		CREATE TABLE IF NOT EXISTS demo.items (
			id INT AUTO_INCREMENT PRIMARY KEY,
			name VARCHAR(64)
		);
		INSERT INTO demo.items (name)
			SELECT v FROM (SELECT 'apple' AS v UNION ALL SELECT 'banana' UNION ALL SELECT 'cherry') AS seed
			WHERE NOT EXISTS (SELECT 1 FROM demo.items);
		FLUSH PRIVILEGES;
	SQL
}

write_config() {
	cat >"$CONFIG" <<-EOF
		# Written by e2e/local/run.sh on every run: edits are overwritten.
		listen: $GATEWAY_LISTEN
		http_listen: $GATEWAY_HTTP
		log: {level: info, format: text}
		users:
		  - {user: app, password: app}
		clusters:
		  - name: main
		    backend_user: gateway
		    backend_password: secret
		    backends: ["127.0.0.1:$PRIMARY_PORT"]
		    pool: {size: 64, min_idle: 4, max_dials: 4, idle_timeout: 5m, max_lifetime: 30m, acquire_timeout: 2s}
	EOF
}

# cleanup runs on every exit: the gateway first, then the servers in reverse
# start order. Further signals only say that it is busy.
cleanup() {
	local rc=$? i name
	set +e
	trap 'log "already stopping; please wait"' INT TERM HUP
	if [[ -n $GATEWAY_PID ]]; then
		stop_pid "$GATEWAY_PID" gateway 30
	fi
	for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do
		name=${SERVERS[i]}
		stop_pid "${SERVER_PID[$name]}" "$name MariaDB" 60
	done
	exit "$rc"
}

on_signal() {
	log "got SIG$1: shutting down"
	exit 0
}

trap cleanup EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

"$ROOT/e2e/local/deps.sh"
mkdir -p "$LOCAL"
start_primary
write_config

if [[ ! -x $GATEWAY_BIN ]]; then
	die "MariaDB is up, but the gateway binary $GATEWAY_BIN is missing or not executable: build it with 'make build' ('make run' builds it first). Stopping MariaDB."
fi

cat <<EOF

  Connect with: mariadb -h127.0.0.1 -P${GATEWAY_LISTEN##*:} -uapp -papp demo

  MariaDB primary directly: mariadb -S .local/primary/mysqld.sock -uroot  (or -h127.0.0.1 -P$PRIMARY_PORT -ugateway -psecret)
  Gateway HTTP:             http://$GATEWAY_HTTP/healthz  (and /debug/pins)
  Config:                   .local/gateway.yaml
  Ctrl-C stops the gateway, then MariaDB.

EOF

setsid "$GATEWAY_BIN" serve --config "$CONFIG" </dev/null &
GATEWAY_PID=$!
set +e
while :; do
	wait "$GATEWAY_PID"
	rc=$?
	# wait returns early (status > 128) when a trapped signal arrives; the
	# trap exits the script, so getting here again means the gateway ended.
	if ((rc > 128)) && alive "$GATEWAY_PID"; then
		continue
	fi
	break
done
GATEWAY_PID=
if ((rc != 0)); then
	log "gateway exited with status $rc"
	exit "$rc"
fi
log "gateway exited"
exit 0
