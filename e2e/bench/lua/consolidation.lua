#!/usr/bin/env sysbench
-- consolidation.lua: many threads reading the same few rows at once (hot
-- reads), for comparing MariaDB direct with the gateway without and with
-- query consolidation (consolidation in the gateway's config).
--
-- Each event is one text-protocol point select of sbtest1 (prepared by the
-- standard sysbench workloads, with at least --hot-rows rows):
--   SELECT c FROM sbtest1 WHERE id = <one of 1..--hot-rows>
-- With 64 threads and 10 rows, identical selects are in flight together
-- most of the time: the gateway runs each once and answers the others
-- with its result.
--
-- Usage (sbtest database prepared, any MySQL endpoint):
--   sysbench e2e/bench/lua/consolidation.lua --mysql-host=127.0.0.1 --mysql-port=PORT \
--     --mysql-user=U --mysql-password=P --mysql-db=sbtest --threads=64 --time=30 run

sysbench.cmdline.options = {
  ["hot-rows"] = {"Number of rows (ids 1..n of sbtest1) the selects read", 10},
  -- Accepted and ignored, so that sbbench passes its usual options.
  tables = {"(ignored)", 1},
  ["table-size"] = {"(ignored)", 1},
}

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
end

function thread_done()
  con:disconnect()
end

function event()
  con:query(string.format("SELECT c FROM sbtest1 WHERE id = %d", sysbench.rand.uniform(1, sysbench.opt.hot_rows)))
end
