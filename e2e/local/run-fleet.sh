#!/usr/bin/env bash
# Local fleet for `make run-fleet`: etcd on 127.0.0.1:12379, the make-run
# MariaDB primary (13306) and replica (13307), two owners in a standby pair
# (127.0.0.1:15307 and :15308; HTTP 15001 and 15011) and three gateways
# (MySQL 15306, 15316, 15326; HTTP 15000, 15010, 15020), all taking the
# topology from etcd.
# Everything lives under .local/ (git-ignored), the MariaDB data dirs shared
# with make run (run one of the two at a time):
#
#   .local/etcd/                etcd's data and log
#   .local/fleet/topology.yaml  the topology stored in etcd (gateway topo put)
#   .local/fleet/gateway-N.yaml each gateway's own file (listen, http, etcd)
#   .local/fleet/owner.yaml     the owners' file
#   .local/fleet/*.log          the processes' logs
#
# It builds nothing: make run-fleet builds bin/gateway first. Ctrl-C or
# SIGTERM stops the gateways, the owners, the databases, then etcd.
set -euo pipefail

# The MariaDB functions (start_primary, start_replica, stop_pid, ...) are
# make run's.
# shellcheck source=run.sh
source "$(dirname "${BASH_SOURCE[0]}")/run.sh"

FLEET="$LOCAL/fleet"
ETCD_CLIENT=127.0.0.1:12379
ETCD_PEER=127.0.0.1:12380
GATEWAYS=(1:15306:15000 2:15316:15010 3:15326:15020) # n:mysql:http
OWNERS=(a:15307:15001 b:15308:15011)                 # name:port:http
FLEET_PIDS=()                                         # gateways and owners, in start order
ETCD_PID=

# start_etcd: one etcd member with its data in .local/etcd.
start_etcd() {
	local i
	command -v etcd >/dev/null || die "etcd is missing: e2e/local/deps.sh --with-etcd installs it"
	port_open "${ETCD_CLIENT##*:}" && die "port ${ETCD_CLIENT##*:} is taken: stop what listens there (an earlier run-fleet?)"
	mkdir -p "$LOCAL/etcd"
	log "etcd: starting on $ETCD_CLIENT (log: .local/etcd/etcd.log)"
	setsid etcd --name fleet --data-dir "$LOCAL/etcd/data" \
		--listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
		--listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
		--initial-cluster "fleet=http://$ETCD_PEER" \
		--logger zap --log-outputs "$LOCAL/etcd/etcd.log" </dev/null >>"$LOCAL/etcd/etcd.out" 2>&1 &
	ETCD_PID=$!
	for ((i = 0; i < 100; i++)); do
		port_open "${ETCD_CLIENT##*:}" && return 0
		alive "$ETCD_PID" || die "etcd exited at start: see .local/etcd/etcd.log"
		sleep 0.1
	done
	die "etcd did not listen on $ETCD_CLIENT within 10s"
}

# base_config LISTEN HTTP: a fleet process's own file.
base_config() {
	cat <<-EOF
		# Written by e2e/local/run-fleet.sh on every run: edits are overwritten.
		listen: $1
		http_listen: $2
		log: {level: info, format: text}
		health: {interval: 1s, timeout: 1s}
		topology:
		  etcd: {endpoints: ["$ETCD_CLIENT"], prefix: /directgate, lease_ttl: 4s}
	EOF
}

write_fleet_configs() {
	local g n mysql http
	mkdir -p "$FLEET"
	for g in "${GATEWAYS[@]}"; do
		IFS=: read -r n mysql http <<<"$g"
		base_config "127.0.0.1:$mysql" "127.0.0.1:$http" >"$FLEET/gateway-$n.yaml"
	done
	base_config 127.0.0.1:0 off >"$FLEET/owner.yaml"
	cat >"$FLEET/topology.yaml" <<-EOF
		# The fleet's topology: gateway topo put stores it in etcd, every
		# gateway and owner applies it (and every later put) without a restart.
		users:
		  - {user: app, password: app}
		clusters:
		  - name: main
		    backend_user: gateway
		    backend_password: secret
		    backends: ["127.0.0.1:$PRIMARY_PORT", "127.0.0.1:$REPLICA_PORT"]
		    replica_reads: on
		    causal_reads: on
		    # The three gateways together never open more than this to each backend.
		    max_backend_connections: 60
		    pool: {size: 64, min_idle: 2, acquire_timeout: 2s}
		    # No owner address: the gateways follow the elected owner.
		    auto_increment:
		      - {table: demo.orders, column: id, sequence: demo.order_seq}
	EOF
}

# start_proc NAME LOG ARGS...: a fleet process in the background.
start_proc() {
	local name=$1 logf=$2
	shift 2
	setsid "$GATEWAY_BIN" "$@" </dev/null >>"$logf" 2>&1 &
	FLEET_PIDS+=("$!")
	log "$name: pid $! (log: ${logf#"$ROOT"/})"
}

# shellcheck disable=SC2317 # run from traps
fleet_cleanup() {
	local rc=$? i name
	set +e
	trap 'log "already stopping; please wait"' INT TERM HUP
	for ((i = ${#FLEET_PIDS[@]} - 1; i >= 0; i--)); do
		stop_pid "${FLEET_PIDS[i]}" "fleet process" 30
	done
	for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do
		name=${SERVERS[i]}
		stop_pid "${SERVER_PID[$name]}" "$name MariaDB" 60
	done
	[[ -n $ETCD_PID ]] && stop_pid "$ETCD_PID" etcd 30
	exit "$rc"
}

fleet_main() {
	local g n mysql http o name port ohttp
	trap fleet_cleanup EXIT
	trap 'on_signal INT' INT
	trap 'on_signal TERM' TERM
	trap 'on_signal HUP' HUP

	"$ROOT/e2e/local/deps.sh" --with-etcd
	[[ -x $GATEWAY_BIN ]] || die "the gateway binary $GATEWAY_BIN is missing: make build (make run-fleet builds it first)"
	mkdir -p "$LOCAL"
	stop_stale replica "$REPLICA_PORT"
	stop_stale primary "$PRIMARY_PORT"
	start_etcd
	start_primary
	start_replica
	write_fleet_configs
	"$GATEWAY_BIN" topo put --config "$FLEET/gateway-1.yaml" --file "$FLEET/topology.yaml" >&2

	for o in "${OWNERS[@]}"; do
		IFS=: read -r name port ohttp <<<"$o"
		start_proc "owner $name" "$FLEET/owner-$name.log" owner --config "$FLEET/owner.yaml" --cluster main --listen "127.0.0.1:$port" \
			--http-listen "127.0.0.1:$ohttp"
	done
	for g in "${GATEWAYS[@]}"; do
		IFS=: read -r n mysql http <<<"$g"
		start_proc "gateway $n" "$FLEET/gateway-$n.log" serve --config "$FLEET/gateway-$n.yaml"
	done
	for g in "${GATEWAYS[@]}"; do
		IFS=: read -r n mysql http <<<"$g"
		for ((i = 0; i < 300; i++)); do
			port_open "$mysql" && break
			sleep 0.1
		done
		port_open "$mysql" || die "gateway $n did not listen on $mysql: see .local/fleet/gateway-$n.log"
	done

	cat <<-EOF

	  Three gateways, one topology (etcd 127.0.0.1:12379, prefix /directgate):
	    mariadb -h127.0.0.1 -P15306 -uapp -papp demo     (also -P15316, -P15326)
	    status pages: http://127.0.0.1:15000/debug/status  (:15010, :15020): fleet, shares, discovery leader
	    owners: http://127.0.0.1:15001/readyz  (:15011): 200 on the leader, 503 "standby: ... leads" on the other; /metrics

	  Who leads, who applied which topology revision:
	    bin/gateway topo status --config .local/fleet/gateway-1.yaml

	  Watch an owner failover: in one terminal, draw sequence values through any gateway,
	    while :; do mariadb -h127.0.0.1 -P15316 -uapp -papp demo -N -e 'SELECT NEXT VALUE FROM order_seq'; sleep 0.2; done
	  in another, kill the leading owner (topo status says which; its --listen port names it):
	    pkill -KILL -f 'owner .*--listen 127.0.0.1:15307'
	  The values go on from above the last one after a pause of about one lease TTL (4s here).

	  Change the topology for every gateway at once: edit .local/fleet/topology.yaml, then
	    bin/gateway topo put --config .local/fleet/gateway-1.yaml --file .local/fleet/topology.yaml

	  Ctrl-C stops everything.

	EOF
	# Poll: a fleet process that ends is reported once; the others keep
	# serving (a failover is the point). The script ends on a signal, or
	# when every fleet process has ended.
	local -A reported=()
	local p left
	while :; do
		sleep 1
		left=0
		for p in "${FLEET_PIDS[@]}"; do
			if alive "$p"; then
				left=$((left + 1))
			elif [[ -z ${reported[$p]:-} ]]; then
				reported[$p]=1
				log "fleet process $p exited (see .local/fleet/*.log); the others keep running"
			fi
		done
		((left > 0)) || die "every gateway and owner has exited"
	done
}

fleet_main "$@"
