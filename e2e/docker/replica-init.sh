#!/bin/bash
# Init of the compose stack's replica (e2e/docker/compose.yaml). The mariadb
# image runs it once, when the data dir is new, in its temporary server (no
# TCP listener yet; binary log, gtid_strict_mode and read_only on, as in
# compose.yaml), after making root and its healthcheck accounts:
#
#   1. wait until the primary accepts the replication account and read its
#      GTID position;
#   2. RESET MASTER: empty the replica's own binary log, so it holds only
#      what it replicates (gtid_strict_mode would refuse the primary's
#      events after GTIDs of the replica's own);
#   3. CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos with an empty
#      gtid_slave_pos: replicate the primary's binary log from its very
#      first event. primary-init.sql starts that log with RESET MASTER, so
#      it holds the accounts and the demo schema, which reach the replica
#      this way (no dump);
#   4. wait until the replica has applied that position, so it is complete
#      when it turns healthy.
#
# The image then stops the temporary server and starts the real one, which
# starts replicating by itself (the replication settings are kept in the
# data dir; the replica runs without --skip-slave-start).
#
# Settings, from the replica service's environment:
#   DIRECTGATE_PRIMARY_HOST   primary's host name (default primary)
#   DIRECTGATE_PRIMARY_PORT   its port (default 3306)
#   DIRECTGATE_REPL_USER      replication account made by primary-init.sql
#   DIRECTGATE_REPL_PASSWORD  its password
#   DIRECTGATE_REPL_WAIT      seconds each wait may take (default 120)
#
# The image sources this file when it is not executable and runs it when it
# is; it works both ways and defines only replica_init* names. A failure
# stops the container's init with the reason (remove the replica's volume
# before trying again: docker compose down -v).

replica_init_log() {
	printf '%s [Note] [Entrypoint]: replica-init: %s\n' "$(date --rfc-3339=seconds)" "$*"
}

replica_init_fail() {
	printf '%s [ERROR] [Entrypoint]: replica-init: %s\n' "$(date --rfc-3339=seconds)" "$*" >&2
	return 1
}

# replica_init_quote S: S as a single-quoted SQL string literal.
replica_init_quote() {
	local s=${1//\\/\\\\}
	printf "'%s'" "${s//\'/\\\'}"
}

# replica_init_local ARGS...: the mariadb client as root on the server being
# initialised (the image's docker_process_sql when sourced).
replica_init_local() {
	if declare -F docker_process_sql >/dev/null; then
		docker_process_sql "$@"
	else
		MYSQL_PWD=${MARIADB_ROOT_PASSWORD:-} mariadb --protocol=socket -uroot -hlocalhost \
			--socket="${SOCKET:-/run/mysqld/mysqld.sock}" "$@"
	fi
}

# replica_init_primary ARGS...: the mariadb client on the primary, as the
# replication account.
replica_init_primary() {
	MYSQL_PWD=$DIRECTGATE_REPL_PASSWORD mariadb --no-defaults --connect-timeout=2 \
		--host="$DIRECTGATE_PRIMARY_HOST" --port="$DIRECTGATE_PRIMARY_PORT" \
		--user="$DIRECTGATE_REPL_USER" "$@"
}

# replica_init_status FIELD: FIELD of the SHOW SLAVE STATUS output (-E) in
# $replica_init_st.
replica_init_status() {
	sed -n "s/^ *$1: //p" <<<"$replica_init_st" | head -n 1
}

replica_init() {
	: "${DIRECTGATE_PRIMARY_HOST:=primary}" "${DIRECTGATE_PRIMARY_PORT:=3306}"
	local limit=${DIRECTGATE_REPL_WAIT:-120} i pos r err
	if [[ -z ${DIRECTGATE_REPL_USER:-} ]]; then
		replica_init_fail "DIRECTGATE_REPL_USER is not set: the replication account of primary-init.sql"
		return 1
	fi
	if [[ ! $DIRECTGATE_PRIMARY_PORT =~ ^[0-9]+$ || ! $limit =~ ^[0-9]+$ ]]; then
		replica_init_fail "DIRECTGATE_PRIMARY_PORT ($DIRECTGATE_PRIMARY_PORT) and DIRECTGATE_REPL_WAIT ($limit) must be numbers"
		return 1
	fi
	local primary="$DIRECTGATE_PRIMARY_HOST:$DIRECTGATE_PRIMARY_PORT"

	replica_init_log "waiting for the primary $primary (account $DIRECTGATE_REPL_USER)"
	for ((i = 0; ; i++)); do
		if pos=$(replica_init_primary -N -B -e 'SELECT @@GLOBAL.gtid_binlog_pos' 2>/dev/null); then
			break
		fi
		if ((i >= limit)); then
			err=$(replica_init_primary -N -B -e 'SELECT 1' 2>&1 >/dev/null)
			replica_init_fail "the primary $primary did not accept $DIRECTGATE_REPL_USER within ${limit}s: $err"
			return 1
		fi
		sleep 1
	done

	replica_init_log "replicating $primary from the start of its binary log (it is at '$pos')"
	replica_init_local <<-EOSQL || return 1
		RESET MASTER;
		SET GLOBAL gtid_slave_pos = '';
		CHANGE MASTER TO
			MASTER_HOST = $(replica_init_quote "$DIRECTGATE_PRIMARY_HOST"),
			MASTER_PORT = $DIRECTGATE_PRIMARY_PORT,
			MASTER_USER = $(replica_init_quote "$DIRECTGATE_REPL_USER"),
			MASTER_PASSWORD = $(replica_init_quote "${DIRECTGATE_REPL_PASSWORD:-}"),
			MASTER_USE_GTID = slave_pos,
			MASTER_CONNECT_RETRY = 1;
		START SLAVE;
	EOSQL

	if [[ -n $pos ]]; then
		replica_init_log "waiting until the replica has applied '$pos'"
		for ((i = 0; ; i++)); do
			r=$(replica_init_local -N -B -e "SELECT MASTER_GTID_WAIT($(replica_init_quote "$pos"), 1)") || return 1
			[[ $r == 0 ]] && break
			replica_init_st=$(replica_init_local -E -e 'SHOW SLAVE STATUS') || return 1
			# An error of the SQL thread does not go away by waiting.
			if [[ $(replica_init_status Last_SQL_Errno) != 0 ]]; then
				replica_init_fail "replication stopped: $(replica_init_status Last_SQL_Error)"
				return 1
			fi
			if ((i >= limit)); then
				replica_init_fail "not caught up with $primary within ${limit}s (IO thread: $(replica_init_status Slave_IO_Running), last IO error: $(replica_init_status Last_IO_Error))"
				return 1
			fi
		done
	fi
	replica_init_log "replica of $primary, gtid_slave_pos '$(replica_init_local -N -B -e 'SELECT @@GLOBAL.gtid_slave_pos')'"
}

replica_init || exit 1
