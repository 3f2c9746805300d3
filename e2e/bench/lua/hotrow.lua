#!/usr/bin/env sysbench
-- hotrow.lua: many threads running short transactions that update the
-- same few rows (hot-row contention), for comparing MariaDB direct with
-- the gateway without and with hot-row protection (hot_row in the
-- gateway's config).
--
-- Each event is one transaction:
--   BEGIN; UPDATE hotrow SET n = n + 1 WHERE id = <one of --hot-rows>;
--   (--reads point selects of other rows); COMMIT
-- The rows are picked uniformly among 1..--hot-rows, so with 64 threads
-- and 4 rows each row has about 16 transactions competing for it.
--
-- Usage (sbtest database, any MySQL endpoint):
--   sysbench e2e/bench/lua/hotrow.lua --mysql-host=127.0.0.1 --mysql-port=PORT \
--     --mysql-user=U --mysql-password=P --mysql-db=sbtest prepare
--   sysbench e2e/bench/lua/hotrow.lua ... --threads=64 --time=30 --report-interval=5 \
--     --percentile=99 run
--   sysbench e2e/bench/lua/hotrow.lua ... cleanup
-- Prepared statements follow --db-ps-mode (auto by default).
-- Pass --mysql-ignore-errors=1205,1213 to count lock wait timeouts
-- (MariaDB's, or the gateway's hot-row refusals) and deadlocks as ignored
-- errors: the transaction is rolled back and sysbench runs the event
-- again.

sysbench.cmdline.options = {
  ["hot-rows"] = {"Number of hot rows the transactions update", 4},
  ["cold-rows"] = {"Number of other rows in the table (read by --reads)", 1000},
  reads = {"Point selects of cold rows per transaction", 0},
  -- Accepted and ignored, so that sbbench passes its usual options.
  tables = {"(ignored)", 1},
  ["table-size"] = {"(ignored)", 1},
}

local function create()
  local con = sysbench.sql.driver():connect()
  con:query("DROP TABLE IF EXISTS hotrow")
  con:query([[CREATE TABLE hotrow (
    id INT NOT NULL PRIMARY KEY,
    n BIGINT NOT NULL DEFAULT 0,
    pad CHAR(60) NOT NULL DEFAULT ''
  ) ENGINE=InnoDB]])
  local total = sysbench.opt.hot_rows + sysbench.opt.cold_rows
  local batch = {}
  for i = 1, total do
    batch[#batch + 1] = string.format("(%d, 0, '%s')", i, string.rep("x", 60))
    if #batch == 500 or i == total then
      con:query("INSERT INTO hotrow (id, n, pad) VALUES " .. table.concat(batch, ","))
      batch = {}
    end
  end
end

function prepare()
  create()
end

function cleanup()
  local con = sysbench.sql.driver():connect()
  con:query("DROP TABLE IF EXISTS hotrow")
end

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  upd = con:prepare("UPDATE hotrow SET n = n + 1 WHERE id = ?")
  upd_id = upd:bind_create(sysbench.sql.type.INT)
  upd:bind_param(upd_id)
  sel = con:prepare("SELECT n FROM hotrow WHERE id = ?")
  sel_id = sel:bind_create(sysbench.sql.type.INT)
  sel:bind_param(sel_id)
end

function thread_done()
  upd:close()
  sel:close()
  con:disconnect()
end

function event()
  con:query("BEGIN")
  upd_id:set(sysbench.rand.uniform(1, sysbench.opt.hot_rows))
  upd:execute()
  for _ = 1, sysbench.opt.reads do
    sel_id:set(sysbench.opt.hot_rows + sysbench.rand.uniform(1, sysbench.opt.cold_rows))
    sel:execute()
  end
  con:query("COMMIT")
end

-- An ignored error ends the transaction before the event runs again.
function sysbench.hooks.before_restart_event(errdesc)
  con:query("ROLLBACK")
end
