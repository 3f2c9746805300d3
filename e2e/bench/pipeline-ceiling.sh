#!/usr/bin/env bash
# pipeline-ceiling.sh - what pipelining statements on a few backend connections
# is worth: sysbench point select (text protocol) against gorelay, the
# gateway (floorbench.sh's settings: one backend, pool {size: 64, min_idle: 8}),
# the same gateway with pipelining on (PIPELINING),
# piperelay (e2e/bench/cmd/piperelay) with each of CONNS backend connections,
# and ProxySQL when PROXYSQL_UP is set, alternating, in one run. Run from the
# project root on a machine that has ../shared/bench (as for floorbench.sh):
#
#   [THREADS=64] [TIME=10] [ROUNDS=2] [CONNS="2 4 8"] [PIPE_WARNINGS="listed counted"] [CAPTURE_CONNS="2"] [PIPELINING="2"] [PROXYSQL_UP=../proxysql/up.sh] \
#     [EXTRA_GATEWAYS="name=/path/to/gateway-binary ..."] bash e2e/bench/pipeline-ceiling.sh
#
# CAPTURE_CONNS (default none) adds, for each value n, piperelay with n connections
# and -capture-warnings (what keeping every pipelined statement's warnings costs)
# as target "pipecw<n>".
# PIPELINING (default "2"; "" for none) adds, for each value n, the gateway of the
# checkout with pipelining: {connections: n} as target "gwpipe<n>".
# PIPE_WARNINGS (default "listed") gives, for each of its values w, each of
# those gateways pipelining.warnings: w; a value other than listed is in the target's
# name ("gwpipe2counted").
# EXTRA_GATEWAYS adds other gateway builds (or scripts that exec one), each with
# the same configuration as the gateway of the checkout, as targets after it.
#
# The summary (QPS, p95, CPU per query of MariaDB, of each hop and of sysbench)
# is printed at the end; docs/benchmarks.md ("Pipelining: what it would be
# worth") has the figures it gave and what they mean.
set -u
shared=$(readlink -f ../shared/bench)
[ -f "$shared/stack.sh" ] || { echo "pipeline-ceiling.sh: needs ../shared/bench (stack.sh, sbcompare.sh)"; exit 1; }
. "$shared/stack.sh"
trap stack_cleanup EXIT
stack_need
go build -o "$STACK_DIR/gateway" ./cmd/gateway || exit 1
go build -o "$STACK_DIR/gorelay" ./e2e/bench/cmd/gorelay || exit 1
go build -o "$STACK_DIR/piperelay" ./e2e/bench/cmd/piperelay || exit 1
P=$(stack_free_port)
stack_mariadb primary "$P" || exit 1
stack_sql "$P" "CREATE USER 'sbtest'@'%' IDENTIFIED BY 'sbtest'; GRANT ALL ON *.* TO 'sbtest'@'%'; CREATE DATABASE sbtest;
  CREATE USER 'gateway'@'%' IDENTIFIED BY 'secret'; GRANT ALL ON *.* TO 'gateway'@'%';" || exit 1
sysbench oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$P --mysql-user=sbtest \
  --mysql-password=sbtest --mysql-db=sbtest --tables=4 --table-size=10000 prepare >/dev/null || exit 1
targets=(); pids=()
R=$(stack_free_port)
"$STACK_DIR/gorelay" -listen 127.0.0.1:$R -backend 127.0.0.1:$P & STACK_PIDS+=($!); pids+=("gorelay:$!"); targets+=("gorelay=127.0.0.1:$R")
G=$(stack_free_port); H=$(stack_free_port)
cat >"$STACK_DIR/gw.yaml" <<YAML
listen: 127.0.0.1:$G
http_listen: 127.0.0.1:$H
log: {level: warn}
users:
  - {user: sbtest, password: sbtest}
clusters:
  - name: main
    backend_user: gateway
    backend_password: secret
    backends: ["127.0.0.1:$P"]
    pool: {size: 64, min_idle: 8}
YAML
"$STACK_DIR/gateway" serve --config "$STACK_DIR/gw.yaml" >"$STACK_DIR/gw.log" 2>&1 &
STACK_PIDS+=($!); pids+=("gateway:$!"); targets+=("gateway=127.0.0.1:$G")
stack_wait_port 127.0.0.1 "$G" 30 || { cat "$STACK_DIR/gw.log"; exit 1; }
for n in ${PIPELINING-2}; do
  for w in ${PIPE_WARNINGS:-listed}; do
    name=gwpipe$n; [ "$w" = listed ] || name=gwpipe$n$w
    PG=$(stack_free_port); PH=$(stack_free_port)
    sed -e "s/127.0.0.1:$G/127.0.0.1:$PG/; s/127.0.0.1:$H/127.0.0.1:$PH/" "$STACK_DIR/gw.yaml" >"$STACK_DIR/$name.yaml"
    echo "    pipelining: {connections: $n, warnings: $w}" >>"$STACK_DIR/$name.yaml"
    "$STACK_DIR/gateway" serve --config "$STACK_DIR/$name.yaml" >"$STACK_DIR/$name.log" 2>&1 &
    STACK_PIDS+=($!); pids+=("$name:$!"); targets+=("$name=127.0.0.1:$PG")
    stack_wait_port 127.0.0.1 "$PG" 30 || { cat "$STACK_DIR/$name.log"; exit 1; }
  done
done
for spec in ${EXTRA_GATEWAYS:-}; do
  name=${spec%%=*}; bin=${spec#*=}
  EG=$(stack_free_port); EH=$(stack_free_port)
  sed -e "s/127.0.0.1:$G/127.0.0.1:$EG/; s/127.0.0.1:$H/127.0.0.1:$EH/" "$STACK_DIR/gw.yaml" >"$STACK_DIR/$name.yaml"
  "$bin" serve --config "$STACK_DIR/$name.yaml" >"$STACK_DIR/$name.log" 2>&1 &
  STACK_PIDS+=($!); pids+=("$name:$!"); targets+=("$name=127.0.0.1:$EG")
  stack_wait_port 127.0.0.1 "$EG" 30 || { cat "$STACK_DIR/$name.log"; exit 1; }
done
for n in ${CONNS:-2 4 8}; do
  M=$(stack_free_port)
  "$STACK_DIR/piperelay" -listen 127.0.0.1:$M -backend 127.0.0.1:$P -conns "$n" >"$STACK_DIR/pipe$n.log" 2>&1 &
  STACK_PIDS+=($!); pids+=("pipe$n:$!"); targets+=("pipe$n=127.0.0.1:$M")
  stack_wait_port 127.0.0.1 "$M" 30 || { cat "$STACK_DIR/pipe$n.log"; exit 1; }
done
for n in ${CAPTURE_CONNS:-}; do
  M=$(stack_free_port)
  "$STACK_DIR/piperelay" -listen 127.0.0.1:$M -backend 127.0.0.1:$P -conns "$n" -capture-warnings >"$STACK_DIR/pipecw$n.log" 2>&1 &
  STACK_PIDS+=($!); pids+=("pipecw$n:$!"); targets+=("pipecw$n=127.0.0.1:$M")
  stack_wait_port 127.0.0.1 "$M" 30 || { cat "$STACK_DIR/pipecw$n.log"; exit 1; }
done
if [ -n "${PROXYSQL_UP:-}" ]; then
  read -r PX PXPID < <(bash "$PROXYSQL_UP" "$P" "$STACK_DIR") || exit 1
  STACK_PIDS+=("$PXPID"); pids+=("proxysql:$PXPID"); targets+=("proxysql=127.0.0.1:$PX")
fi
mpid=$(cat "$STACK_DIR/primary/pid")
sleep 2
CPU_PIDS="mariadbd:$mpid ${pids[*]}" TESTS=oltp_point_select TIME=${TIME:-10} ROUNDS=${ROUNDS:-2} \
  THREADS=${THREADS:-64} PS_MODE=disable OUT=${OUT:-$STACK_DIR/out} bash "$shared/sbcompare.sh" "${targets[@]}"
