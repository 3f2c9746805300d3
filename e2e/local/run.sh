#!/usr/bin/env bash
# Local stack for `make run`: a MariaDB primary on 127.0.0.1:13306, a GTID
# replica of it on 127.0.0.1:13307, a second cluster's MariaDB on
# 127.0.0.1:13308 (cluster billing, database billing), the owner on
# 127.0.0.1:15307 (HTTP on 127.0.0.1:15001; it also keeps the coordinator
# log of transactions over both clusters) and the gateway on
# 127.0.0.1:15306 (HTTP on 127.0.0.1:15000), with replica reads and causal
# reads on, and transaction_mode twopc for user app. Everything
# lives under .local/ at the top of the tree (git-ignored):
#
#   .local/primary/data        primary data dir, initialised on the first run
#   .local/primary/error.log   primary error log
#   .local/primary/mysqld.sock root logs in here: mariadb -S .local/primary/mysqld.sock -uroot
#   .local/primary/initialised marker holding the primary's instance id
#   .local/replica/...         the same for the replica (read_only=1)
#   .local/replica/primary-instance  instance id of the primary it was copied from
#   .local/billing/...         the same for the billing cluster's server
#   .local/gateway.yaml        gateway config, rewritten on every run
#
# It builds nothing: make run builds bin/gateway first. The gateway runs in
# the foreground under this script; Ctrl-C, SIGTERM or the gateway exiting
# stops the gateway, then the replica, then the primary, and the script
# exits.
#
# The replica is provisioned on its first run from a consistent dump of the
# primary's databases and replicates from the primary's GTID position of
# that dump (MASTER_USE_GTID=slave_pos). Later runs reuse its data dir and
# it carries on from where it stopped. It is provisioned again when the
# primary's data dir was re-created (its instance id changed) or when its
# replication is broken (a replication thread stopped with an error).
#
# Accounts (root over the socket, gateway, repl) are made on each server
# with sql_log_bin=0, so they never replicate; the demo schema is made on
# the primary and reaches the replica by replication or by the dump.
#
# Each MariaDB server has its own start function (start_primary,
# start_replica) around start_server (name, port, server id, extra flags).
# Servers stop in reverse start order.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
LOCAL="$ROOT/.local"
GATEWAY_BIN=${GATEWAY_BIN:-"$ROOT/bin/gateway"} # override to try another build
CONFIG="$LOCAL/gateway.yaml"

# Debian keeps mariadbd in /usr/sbin, outside a normal user's PATH.
export PATH="$PATH:/usr/sbin:/usr/local/sbin"

PRIMARY_PORT=13306
REPLICA_PORT=13307
BILLING_PORT=13308
GATEWAY_LISTEN=127.0.0.1:15306
GATEWAY_HTTP=127.0.0.1:15000
OWNER_LISTEN=127.0.0.1:15307
OWNER_HTTP=127.0.0.1:15001

SERVERS=()              # MariaDB server names, in start order
declare -A SERVER_PID=() # name -> pid of the mariadbd this script started
GATEWAY_PID=
OWNER_PID=

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
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

# stop_stale NAME PORT: stop a mariadbd of ours serving .local/NAME left by
# an earlier run (killed script, closed terminal), then make sure PORT is
# free. Anything else on the port is not ours to stop.
stop_stale() {
	local name=$1 port=$2 dir="$LOCAL/$1" old
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
}

# start_server NAME PORT SERVER_ID [extra mariadbd flags...]: initialise
# .local/NAME/data once, start mariadbd on 127.0.0.1:PORT, wait until it
# answers, drop the anonymous accounts. The marker .local/NAME/initialised
# holds a random instance id, new whenever the data dir is initialised.
start_server() {
	local name=$1 port=$2 server_id=$3
	shift 3
	local dir="$LOCAL/$name" user_args=() pid i
	[[ $(id -u) == 0 ]] && user_args=(--user=root) # mariadbd refuses root without it
	mkdir -p "$dir/tmp"
	stop_stale "$name" "$port"

	if [[ -f $dir/initialised && ! -d $dir/data/mysql ]]; then
		log "$name: $dir/data is missing or incomplete: initialising it again"
		rm -f "$dir/initialised"
	fi
	if [[ ! -f $dir/initialised ]]; then
		log "$name: initialising $dir/data"
		rm -rf "$dir/data"
		if ! mariadb-install-db --no-defaults --datadir="$dir/data" \
			--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
			--innodb-log-file-size=48M "${user_args[@]}" >"$dir/install.log" 2>&1; then
			tail -n 30 "$dir/install.log" >&2
			die "$name: mariadb-install-db failed (full log: $dir/install.log)"
		fi
		new_instance_id >"$dir/initialised"
	elif [[ ! -s $dir/initialised ]]; then
		new_instance_id >"$dir/initialised" # marker of an older run.sh: empty
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
		--log-slave-updates=ON --gtid-strict-mode=ON \
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
		sql "$name" -e "SET SESSION sql_log_bin = 0; $anon"
	fi
	log "$name: ready on 127.0.0.1:$port (pid $pid)"
}

new_instance_id() { cat /proc/sys/kernel/random/uuid; }

# GATEWAY_PRIVS is what the gateway's backend account may do: what an
# application does, plus SLAVE MONITOR (alias REPLICA MONITOR) for the
# health probes' SHOW ALL SLAVES STATUS. Not ALL PRIVILEGES: that includes
# READ_ONLY ADMIN, with which writes succeed on the read_only replica.
GATEWAY_PRIVS="SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REFERENCES,
	CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW,
	CREATE ROUTINE, ALTER ROUTINE, EVENT, TRIGGER, DELETE HISTORY, SLAVE MONITOR"

# setup_accounts NAME: the gateway's backend account and the replication
# account on server NAME, with sql_log_bin=0 so they never replicate: each
# server has its own. Idempotent: an existing account gets exactly these
# privileges and password.
setup_accounts() {
	local host stmts="SET SESSION sql_log_bin = 0;"
	for host in '%' localhost 127.0.0.1; do
		stmts+="
			CREATE USER IF NOT EXISTS 'gateway'@'$host' IDENTIFIED BY 'secret';
			ALTER USER 'gateway'@'$host' IDENTIFIED BY 'secret';
			REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'gateway'@'$host';
			GRANT $GATEWAY_PRIVS ON *.* TO 'gateway'@'$host';"
	done
	stmts+="
		CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'repl';
		ALTER USER 'repl'@'127.0.0.1' IDENTIFIED BY 'repl';
		REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'repl'@'127.0.0.1';
		GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';
		FLUSH PRIVILEGES;"
	sql "$1" -e "$stmts"
}

# start_primary: the primary, with the accounts and the demo database.
# Idempotent: safe on every run.
start_primary() {
	start_server primary "$PRIMARY_PORT" 1
	setup_accounts primary
	sql primary <<-'SQL'
		CREATE DATABASE IF NOT EXISTS demo;
		CREATE TABLE IF NOT EXISTS demo.items (
			id INT AUTO_INCREMENT PRIMARY KEY,
			name VARCHAR(64)
		);
		INSERT INTO demo.items (name)
			SELECT v FROM (SELECT 'apple' AS v UNION ALL SELECT 'banana' UNION ALL SELECT 'cherry') AS seed
			WHERE NOT EXISTS (SELECT 1 FROM demo.items);
		-- Owner demo: a Vitess-style sequence, a table whose id comes from
		-- it (auto_increment in the gateway config) and a message queue.
		CREATE TABLE IF NOT EXISTS demo.order_seq (
			id INT PRIMARY KEY, next_id BIGINT, cache BIGINT
		) COMMENT 'vitess_sequence';
		INSERT IGNORE INTO demo.order_seq (id, next_id, cache) VALUES (0, 1, 100);
		CREATE TABLE IF NOT EXISTS demo.orders (
			id BIGINT PRIMARY KEY, item VARCHAR(64)
		);
		CREATE TABLE IF NOT EXISTS demo.events (
			id BIGINT PRIMARY KEY,
			priority BIGINT NOT NULL DEFAULT 0,
			epoch BIGINT NOT NULL DEFAULT 0,
			time_next BIGINT DEFAULT 0,
			time_acked BIGINT,
			message VARCHAR(255),
			KEY next_idx (time_next),
			KEY ack_idx (time_acked)
		) COMMENT 'vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=10000,vt_poller_interval=1';
		-- Transactions over two clusters: money moves between
		-- demo.accounts here and billing.accounts on the billing cluster.
		CREATE TABLE IF NOT EXISTS demo.accounts (id INT PRIMARY KEY, balance INT NOT NULL);
		INSERT IGNORE INTO demo.accounts VALUES (1, 100);
	SQL
}

# start_billing: the billing cluster's server (a cluster of its own: no
# replica), with the accounts and the billing database. Idempotent.
start_billing() {
	start_server billing "$BILLING_PORT" 3
	setup_accounts billing
	sql billing <<-'SQL'
		CREATE DATABASE IF NOT EXISTS billing;
		CREATE TABLE IF NOT EXISTS billing.accounts (id INT PRIMARY KEY, balance INT NOT NULL);
		INSERT IGNORE INTO billing.accounts VALUES (1, 100);
	SQL
}

# status_field FIELD: FIELD of the SHOW SLAVE STATUS output (-E) in $st.
status_field() {
	awk -v k="$1" '
		{ f = $0; sub(/^ */, "", f); i = index(f, ": ") }
		i && substr(f, 1, i - 1) == k { print substr(f, i + 2); exit }' <<<"$st"
}

# wait_replicating NAME: wait up to 15 s until both replication threads of
# NAME run. Returns 1, with the reason in REPL_ERROR, when a thread stopped
# with an error or they do not run by then.
REPL_ERROR=
wait_replicating() {
	local name=$1 i st io sqlt
	for ((i = 0; i < 150; i++)); do
		st=$(sql "$name" -E -e 'SHOW SLAVE STATUS')
		if [[ -z $st ]]; then
			REPL_ERROR="not configured as a replica"
			return 1
		fi
		io=$(status_field Slave_IO_Running)
		sqlt=$(status_field Slave_SQL_Running)
		if [[ $io == Yes && $sqlt == Yes ]]; then
			return 0
		fi
		if [[ $sqlt == No && $(status_field Last_SQL_Errno) != 0 ]]; then
			REPL_ERROR="SQL thread stopped: $(status_field Last_SQL_Error)"
			return 1
		fi
		if [[ $io == No && $(status_field Last_IO_Errno) != 0 ]]; then
			REPL_ERROR="IO thread stopped: $(status_field Last_IO_Error)"
			return 1
		fi
		sleep 0.1
	done
	REPL_ERROR="threads not running after 15s (IO: $io, SQL: $sqlt; last IO error: $(status_field Last_IO_Error))"
	return 1
}

# provision_replica: copy the primary's databases (not mysql: accounts are
# per server) into the fresh replica from a consistent dump, and start
# replicating at the primary's GTID position of that dump.
provision_replica() {
	local dir="$LOCAL/replica" dbs pos
	dbs=$(sql primary -N -B -e "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA
		WHERE SCHEMA_NAME NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')")
	if [[ -n $dbs ]]; then
		log "replica: copying databases from the primary: ${dbs//$'\n'/ }"
		# --master-data=2 takes the GTID position consistent with the
		# snapshot and writes it as a comment; --gtid makes it a GTID.
		# shellcheck disable=SC2086 # one database name per word
		mariadb-dump --no-defaults --socket="$LOCAL/primary/mysqld.sock" -uroot \
			--single-transaction --master-data=2 --gtid --routines --events --triggers \
			--databases $dbs >"$dir/provision.sql"
		pos=$(sed -n "s/^-- SET GLOBAL gtid_slave_pos='\([^']*\)';\$/\1/p" "$dir/provision.sql" | head -n 1)
		grep -q '^-- SET GLOBAL gtid_slave_pos=' "$dir/provision.sql" ||
			die "replica: no GTID position in the dump $dir/provision.sql"
		# Loaded without binlogging: the replica's binary log holds only
		# what it replicates.
		sql replica --init-command='SET SESSION sql_log_bin = 0' <"$dir/provision.sql"
		rm -f "$dir/provision.sql"
	else
		pos=$(sql primary -N -B -e 'SELECT @@GLOBAL.gtid_binlog_pos')
	fi
	log "replica: replicating from the primary at GTID position '${pos}'"
	# gtid_binlog_state: like a replica restored from a backup, its binary
	# log starts at the position, so once promoted it can serve a replica
	# that has applied nothing since (GTID strict mode refuses to start in
	# a hole of the binary log).
	sql replica <<-SQL
		STOP SLAVE;
		SET GLOBAL gtid_binlog_state = '$pos';
		SET GLOBAL gtid_slave_pos = '$pos';
		CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $PRIMARY_PORT,
			MASTER_USER = 'repl', MASTER_PASSWORD = 'repl',
			MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1;
		START SLAVE;
	SQL
}

# wipe_replica: remove the replica's data, so start_server initialises it.
# Its mariadbd must not be running.
wipe_replica() {
	rm -rf "$LOCAL/replica/data" "$LOCAL/replica/initialised" "$LOCAL/replica/primary-instance" \
		"$LOCAL/replica/provision.sql"
}

# start_replica [retry]: the replica, read-only, replicating from the
# primary (which must be running). Provisioned when new; provisioned again
# when it was copied from an earlier primary data dir, or (once) when its
# replication does not run. Idempotent: safe on every run.
start_replica() {
	local retry=${1:-} dir="$LOCAL/replica" primary_id replica_of
	primary_id=$(cat "$LOCAL/primary/initialised")
	replica_of=$(cat "$dir/primary-instance" 2>/dev/null || true)
	if [[ $replica_of != "$primary_id" ]]; then
		stop_stale replica "$REPLICA_PORT"
		if [[ -n $replica_of ]]; then
			log "replica: .local/primary was re-created since the replica was made: initialising the replica again"
		elif [[ -d $dir/data ]]; then
			log "replica: $dir/data was never provisioned completely: initialising it again"
		fi
		wipe_replica
	fi
	# --skip-slave-start: replication starts below, once the replica is
	# known to come from this primary.
	start_server replica "$REPLICA_PORT" 2 --read-only=ON --skip-slave-start
	setup_accounts replica
	if [[ -f $dir/primary-instance ]]; then
		sql replica -e 'START SLAVE'
	else
		provision_replica
		printf '%s\n' "$primary_id" >"$dir/primary-instance"
	fi
	if ! wait_replicating replica; then
		[[ -z $retry ]] || die "replica: replication does not run: $REPL_ERROR (see $dir/error.log)"
		log "replica: replication is broken ($REPL_ERROR): initialising the replica again from the primary"
		stop_pid "${SERVER_PID[replica]}" "replica MariaDB" 60
		unset 'SERVERS[-1]' 'SERVER_PID[replica]'
		wipe_replica
		start_replica retry
		return
	fi
	log "replica: replicating from 127.0.0.1:$PRIMARY_PORT (gtid_slave_pos $(sql replica -N -B -e 'SELECT @@GLOBAL.gtid_slave_pos'))"
}

write_config() {
	cat >"$CONFIG" <<-EOF
		# Written by e2e/local/run.sh on every run: edits are overwritten.
		listen: $GATEWAY_LISTEN
		http_listen: $GATEWAY_HTTP
		log: {level: info, format: text}
		users:
		  - {user: app, password: app, transaction_mode: twopc}
		  - {user: admin, password: admin, admin: true}
		health: {interval: 2s, timeout: 1s}
		twopc: {log_cluster: main, resolve_after: 10s}
		clusters:
		  - name: main
		    backend_user: gateway
		    backend_password: secret
		    backends: ["127.0.0.1:$PRIMARY_PORT", "127.0.0.1:$REPLICA_PORT"]
		    replica_reads: on
		    causal_reads: on
		    pool: {size: 64, min_idle: 4, max_dials: 4, idle_timeout: 5m, max_lifetime: 30m, acquire_timeout: 2s}
		    owner: $OWNER_LISTEN
		    auto_increment:
		      - {table: demo.orders, column: id, sequence: demo.order_seq}
		  - name: billing
		    databases: [billing]
		    backend_user: gateway
		    backend_password: secret
		    backends: ["127.0.0.1:$BILLING_PORT"]
		    pool: {size: 16, min_idle: 1}
	EOF
}

# cleanup runs on every exit: the gateway first, then the servers in reverse
# start order. Further signals only say that it is busy.
# shellcheck disable=SC2317 # cleanup and on_signal run from traps
cleanup() {
	local rc=$? i name
	set +e
	trap 'log "already stopping; please wait"' INT TERM HUP
	if [[ -n $GATEWAY_PID ]]; then
		stop_pid "$GATEWAY_PID" gateway 30
	fi
	if [[ -n $OWNER_PID ]]; then
		stop_pid "$OWNER_PID" owner 30
	fi
	for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do
		name=${SERVERS[i]}
		stop_pid "${SERVER_PID[$name]}" "$name MariaDB" 60
	done
	exit "$rc"
}

# shellcheck disable=SC2317 # run from traps
on_signal() {
	log "got SIG$1: shutting down"
	exit 0
}

# main is make run's flow. The functions above are shared with
# e2e/local/run-fleet.sh (make run-fleet), which sources this file.
main() {
	trap cleanup EXIT
	trap 'on_signal INT' INT
	trap 'on_signal TERM' TERM
	trap 'on_signal HUP' HUP

	"$ROOT/e2e/local/deps.sh"
	mkdir -p "$LOCAL"
	# Servers left running by an earlier run stop replica first, as at exit.
	stop_stale billing "$BILLING_PORT"
	stop_stale replica "$REPLICA_PORT"
	stop_stale primary "$PRIMARY_PORT"
	start_primary
	start_replica
	start_billing
	write_config

	if [[ ! -x $GATEWAY_BIN ]]; then
		die "MariaDB is up, but the gateway binary $GATEWAY_BIN is missing or not executable: build it with 'make build' ('make run' builds it first). Stopping MariaDB."
	fi

	cat <<-EOF

	  Connect with: mariadb -h127.0.0.1 -P${GATEWAY_LISTEN##*:} -uapp -papp demo
	  Reads may go to the replica: SELECT @@server_id through the gateway shows
	  which backend answered (1 = primary, 2 = replica).

	  MariaDB primary directly: mariadb -S .local/primary/mysqld.sock -uroot  (or -h127.0.0.1 -P$PRIMARY_PORT -ugateway -psecret)
	  MariaDB replica directly: mariadb -S .local/replica/mysqld.sock -uroot  (or -h127.0.0.1 -P$REPLICA_PORT -ugateway -psecret)
	                            read_only; replicates the primary with GTIDs: SHOW ALL SLAVES STATUS\G
	  Gateway HTTP:             http://$GATEWAY_HTTP/debug/status  (and /healthz, /debug/health, /debug/queries)
	  What statements cost, as admin (sees and kills every session, runs SHOW GATEWAY):
	    mariadb -h127.0.0.1 -P${GATEWAY_LISTEN##*:} -uadmin -padmin -e "SHOW GATEWAY QUERIES ORDER BY total_time LIMIT 10"
	  Owner (sequences, messages) on $OWNER_LISTEN, log in .local/owner.log,
	    HTTP: http://$OWNER_HTTP/metrics  (and /readyz, /healthz)
	    SELECT NEXT 5 VALUES FROM order_seq;   INSERT INTO orders (item) VALUES ('pear');
	    INSERT INTO events (id, message) VALUES (1, 'hello');
	    STREAM * FROM events;  (in another session, started with mariadb --quick: without it the client waits for the end of the result)
	    UPDATE events SET time_acked = 1, time_next = NULL WHERE id IN (1);
	  Second cluster (billing, database billing): 127.0.0.1:$BILLING_PORT. Move money atomically
	  between the two clusters (user app has transaction_mode twopc):
	    mariadb -h127.0.0.1 -P${GATEWAY_LISTEN##*:} -uapp -papp demo -e "BEGIN; UPDATE accounts SET balance = balance - 10 WHERE id = 1; UPDATE billing.accounts SET balance = balance + 10 WHERE id = 1; COMMIT"
	    mariadb -h127.0.0.1 -P${GATEWAY_LISTEN##*:} -uapp -papp demo -e "SELECT balance FROM accounts; SELECT balance FROM billing.accounts"
	  Config:                   .local/gateway.yaml
	  Ctrl-C stops the gateway, then the billing server, the replica, then the primary.

	EOF

	setsid "$GATEWAY_BIN" owner --config "$CONFIG" --cluster main --http-listen "$OWNER_HTTP" </dev/null >>"$LOCAL/owner.log" 2>&1 &
	OWNER_PID=$!
	for ((i = 0; i < 100; i++)); do
		port_open "${OWNER_LISTEN##*:}" && break
		alive "$OWNER_PID" || die "the owner exited at start: see .local/owner.log"
		sleep 0.1
	done
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
}

# Run main only when executed, not when sourced.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
