-- Init of the compose stack's primary (e2e/docker/compose.yaml). The
-- mariadb image runs it once, when the data dir is new, as root in its
-- temporary server (binary log on: the server flags of compose.yaml apply).
--
-- Everything here is binary-logged on purpose: the replica starts empty and
-- replicates the primary's binary log from its very first event, so these
-- accounts and the demo schema reach it by replication. RESET MASTER first
-- makes that log start here. The image makes root and its healthcheck
-- accounts with sql_log_bin=0 before this file runs, so they stay local to
-- each server; do not set MARIADB_USER, MARIADB_DATABASE or
-- MARIADB_REPLICATION_USER on the primary (the image would binlog those).
--
-- Mirrors e2e/local/run.sh (make run), except that there each server makes
-- its own accounts; here they replicate. compose_test.go checks this file
-- against gateway.yaml and compose.yaml.
RESET MASTER;

-- The gateway's backend account (backend_user/backend_password in
-- gateway.yaml): what an application does, plus SLAVE MONITOR (alias
-- REPLICA MONITOR) for the health probes' SHOW ALL SLAVES STATUS. Not ALL
-- PRIVILEGES: that includes READ_ONLY ADMIN, with which writes succeed on
-- the read_only replica.
CREATE USER 'gateway'@'%' IDENTIFIED BY 'secret';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REFERENCES,
	CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW,
	CREATE ROUTINE, ALTER ROUTINE, EVENT, TRIGGER, DELETE HISTORY, SLAVE MONITOR
	ON *.* TO 'gateway'@'%';

-- The replica logs in with this account (DIRECTGATE_REPL_USER and
-- DIRECTGATE_REPL_PASSWORD of the replica service).
CREATE USER 'repl'@'%' IDENTIFIED BY 'repl';
GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%';

-- The demo schema of make run.
CREATE DATABASE demo;
CREATE TABLE demo.items (
	id INT AUTO_INCREMENT PRIMARY KEY,
	name VARCHAR(64)
);
INSERT INTO demo.items (name) VALUES ('apple'), ('banana'), ('cherry');

-- Owner demo: a Vitess-style sequence, a table whose id comes from it
-- (auto_increment in gateway.yaml) and a message queue.
CREATE TABLE demo.order_seq (
	id INT PRIMARY KEY, next_id BIGINT, cache BIGINT
) COMMENT 'vitess_sequence';
INSERT INTO demo.order_seq (id, next_id, cache) VALUES (0, 1, 100);
CREATE TABLE demo.orders (
	id BIGINT PRIMARY KEY, item VARCHAR(64)
);
CREATE TABLE demo.events (
	id BIGINT PRIMARY KEY,
	priority BIGINT NOT NULL DEFAULT 0,
	epoch BIGINT NOT NULL DEFAULT 0,
	time_next BIGINT DEFAULT 0,
	time_acked BIGINT,
	message VARCHAR(255),
	KEY next_idx (time_next),
	KEY ack_idx (time_acked)
) COMMENT 'vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=10000,vt_poller_interval=1';
