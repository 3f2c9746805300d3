package querypath

import (
	"reflect"
	"strings"
	"sync"
	"testing"
)

var (
	testClassifierOnce sync.Once
	testClassifier     *Classifier
)

// classifier returns a Classifier shared by the tests.
func classifier(tb testing.TB) *Classifier {
	tb.Helper()
	testClassifierOnce.Do(func() {
		c, err := New()
		if err != nil {
			tb.Fatalf("New: %v", err)
		}
		testClassifier = c
	})
	if testClassifier == nil {
		tb.Fatal("New failed")
	}
	return testClassifier
}

func v(name, value string, literal bool) SetVar {
	return SetVar{Name: name, Value: value, Literal: literal}
}

func vars(vs ...SetVar) []SetVar { return vs }

func names(ns ...string) []string { return ns }

// renames pairs its arguments: renames("a", "b", "c", "d") is a to b, c to d.
func renames(ns ...string) [][2]string {
	var ps [][2]string
	for i := 0; i+1 < len(ns); i += 2 {
		ps = append(ps, [2]string{ns[i], ns[i+1]})
	}
	return ps
}

// classifyCases is the table of rules. It also seeds FuzzClassify and feeds
// the fast-path/parser agreement test.
var classifyCases = []struct {
	sql  string
	want Route
}{
	// sysbench oltp_read_write, text protocol and prepared-statement text.
	{"SELECT c FROM sbtest1 WHERE id=5042", Route{Kind: KindRead}},
	{"SELECT c FROM sbtest1 WHERE id=?", Route{Kind: KindRead}},
	{"SELECT c FROM sbtest7 WHERE id BETWEEN 5042 AND 5141", Route{Kind: KindRead}},
	{"SELECT SUM(k) FROM sbtest2 WHERE id BETWEEN 1 AND 100", Route{Kind: KindRead}},
	{"SELECT c FROM sbtest4 WHERE id BETWEEN 1 AND 100 ORDER BY c", Route{Kind: KindRead}},
	{"SELECT DISTINCT c FROM sbtest5 WHERE id BETWEEN ? AND ? ORDER BY c", Route{Kind: KindRead}},
	{"UPDATE sbtest3 SET k=k+1 WHERE id=5000", Route{Pin: PinLastResult, Table: "sbtest3", DML: DMLUpdate}},
	{"UPDATE sbtest6 SET c='83868641912-28773972837-60736120486' WHERE id=4992", Route{Pin: PinLastResult, Table: "sbtest6", DML: DMLUpdate}},
	{"DELETE FROM sbtest8 WHERE id=5017", Route{Pin: PinLastResult, DML: DMLDelete}},
	{"INSERT INTO sbtest8 (id, k, c, pad) VALUES (5017, 4993, '6788-23', '2298-2')", Route{Pin: PinLastResult, Table: "sbtest8", DML: DMLInsert}},
	{"BEGIN", Route{Kind: KindBegin, ImplicitCommit: true}},
	{"COMMIT", Route{Kind: KindCommit}},

	// Reads and what makes a SELECT not a read.
	{"SELECT 1", Route{Kind: KindRead}},
	{"select 1;", Route{Kind: KindRead}},
	{"  \n\tSELECT 1  ", Route{Kind: KindRead}},
	{"/* leading */ SELECT 1", Route{Kind: KindRead}},
	{"-- comment\nSELECT 1", Route{Kind: KindRead}},
	{"# comment\nSELECT 1", Route{Kind: KindRead}},
	{"SELECT * FROM t FOR UPDATE", Route{}},
	{"SELECT * FROM t WHERE id = 1 FOR UPDATE NOWAIT", Route{}},
	{"SELECT * FROM t WHERE id = 1 FOR UPDATE SKIP LOCKED", Route{}},
	{"SELECT * FROM t LOCK IN SHARE MODE", Route{}},
	{"SELECT * FROM t FOR SHARE", Route{}},
	{"SELECT * FROM t WHERE id IN (SELECT id FROM u FOR UPDATE)", Route{}},
	{"SELECT 1 UNION SELECT 2 FOR UPDATE", Route{}},
	{"SELECT * FROM t FOR UPDATE WAIT 5", Route{}},                    // MariaDB syntax Vitess cannot parse
	{"SELECT * FROM t LIMIT ROWS EXAMINED 10", Route{Kind: KindRead}}, // idem
	{"SELECT 1 INTO OUTFILE '/tmp/x'", Route{}},
	{"SELECT a INTO DUMPFILE '/tmp/x' FROM t", Route{}},
	{"SELECT 1 INTO @x", Route{Pin: PinUserVar}},
	{"SELECT a FROM t INTO @x", Route{Pin: PinUserVar}},
	{"SELECT a, b INTO @x, @y FROM t LIMIT 1", Route{Pin: PinUserVar}},
	{"WITH a AS (SELECT 1) SELECT * FROM a", Route{Kind: KindRead}},
	{"WITH x AS (SELECT @y) SELECT * FROM x", Route{Kind: KindRead, Pin: PinUserVar}},
	{"(SELECT 1) UNION (SELECT 2)", Route{Kind: KindRead}},
	{"SELECT 1 EXCEPT SELECT 2", Route{Kind: KindRead}},
	{"SELECT JSON_EXTRACT(a, '$.b') FROM t", Route{Kind: KindRead}},
	{"SELECT IS_USED_LOCK('a'), IS_FREE_LOCK('b')", Route{Kind: KindRead}},
	{"SELECT db.found_rows()", Route{Kind: KindRead}}, // a stored function, not the built-in
	{"SELECT a.last_insert_id FROM a", Route{Kind: KindRead}},

	// User variables: any reference pins; @@ never does.
	{"SELECT @x", Route{Kind: KindRead, Pin: PinUserVar}},
	{"SELECT@x", Route{Kind: KindRead, Pin: PinUserVar}},
	{"SELECT 1 FROM DUAL WHERE @x IS NULL", Route{Kind: KindRead, Pin: PinUserVar}},
	{"SELECT @x := 1", Route{Pin: PinUserVar}},
	{"SELECT @rownum := @rownum + 1 AS n, t.* FROM t", Route{Pin: PinUserVar}},
	{"UPDATE t SET a=@x", Route{Pin: PinUserVar | PinLastResult, Table: "t", DML: DMLUpdate}},
	{"INSERT INTO t SET a = @x := 5", Route{Pin: PinUserVar | PinLastResult, Table: "t", DML: DMLInsert}},
	{"SELECT `@x` FROM t", Route{Kind: KindRead}},
	{"SELECT '@x'", Route{Kind: KindRead}},
	{`SELECT 'a' FROM t WHERE b = "@x"`, Route{Kind: KindRead}},
	{"SELECT 'it''s', 'a@b.c' FROM t", Route{Kind: KindRead}},
	{`SELECT 'it\'s @x'`, Route{Kind: KindRead}},
	{"SELECT /* @x */ 1", Route{Kind: KindRead}},
	{"SELECT 1 -- @x", Route{Kind: KindRead}},
	{"SELECT 1 # @x", Route{Kind: KindRead}},
	{"SELECT 1 --@x", Route{Kind: KindRead, Pin: PinUserVar}}, // "--" without a space is minus minus
	{"SELECT @@max_allowed_packet", Route{Kind: KindRead}},
	{"SELECT @@session.tx_isolation", Route{Kind: KindRead}},
	{"SELECT @@GLOBAL.read_only, @@version_comment LIMIT 1", Route{Kind: KindRead}},
	{"SELECT * FROM t WHERE a = @@sql_mode", Route{Kind: KindRead}},
	// A string ending in a backslash under NO_BACKSLASH_ESCAPES: read both ways.
	{`SELECT 'C:\' , @x`, Route{Kind: KindRead, Pin: PinUserVar}},

	// Functions with session state.
	{"SELECT GET_LOCK('a', 1)", Route{Pin: PinLock}},
	{"SELECT `GET_LOCK`('a', 1)", Route{Pin: PinLock}},
	{"SELECT `release_lock`('a')", Route{}},
	{"SELECT `LAST_INSERT_ID`()", Route{Kind: KindRead, ReadsLastResult: true}},
	{"SELECT get_lock ('a', 1)", Route{Pin: PinLock}},
	{"DO GET_LOCK('a', 1)", Route{Pin: PinLock}},
	{"SELECT RELEASE_LOCK('a')", Route{}}, // other locks may be held: no unpin
	{"DO RELEASE_LOCK('a')", Route{}},
	{"SELECT RELEASE_ALL_LOCKS()", Route{Unpin: PinLock}},
	{"SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 10", Route{Kind: KindRead, Pin: PinFoundRows}},
	{"SELECT FOUND_ROWS()", Route{Kind: KindRead, Unpin: PinFoundRows, ReadsLastResult: true}},
	{"SELECT found_rows ()", Route{Kind: KindRead, Unpin: PinFoundRows, ReadsLastResult: true}},
	{"SELECT LAST_INSERT_ID()", Route{Kind: KindRead, ReadsLastResult: true}},
	{"SELECT last_insert_id( )", Route{Kind: KindRead, ReadsLastResult: true}},
	{"SELECT LAST_INSERT_ID(5)", Route{Pin: PinLastResult}},
	{"UPDATE seq SET id = LAST_INSERT_ID(id + 1)", Route{Pin: PinLastResult, Table: "seq", DML: DMLUpdate}},
	{"SELECT ROW_COUNT()", Route{Kind: KindRead, ReadsLastResult: true}},
	{"SELECT @@identity", Route{Kind: KindRead, ReadsLastResult: true}},
	{"SELECT @@last_insert_id", Route{Kind: KindRead, ReadsLastResult: true}},

	// Diagnostics.
	{"SHOW WARNINGS", Route{Kind: KindShowWarnings}},
	{"SHOW WARNINGS LIMIT 5", Route{Kind: KindShowWarnings}},
	{"SHOW ERRORS", Route{Kind: KindShowWarnings}},
	{"SHOW COUNT(*) WARNINGS", Route{Kind: KindShowWarnings}},
	{"SHOW COUNT(*) ERRORS", Route{Kind: KindShowWarnings}},
	{"GET DIAGNOSTICS @n = NUMBER", Route{Kind: KindShowWarnings, Pin: PinUserVar}},
	{"GET CURRENT DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT", Route{Kind: KindShowWarnings, Pin: PinUserVar}},
	{"GET STACKED DIAGNOSTICS @n = NUMBER", Route{Kind: KindShowWarnings, Pin: PinUserVar}},
	{"SELECT @@warning_count", Route{Kind: KindShowWarnings}},
	{"SELECT @@session.warning_count AS w", Route{Kind: KindShowWarnings}},
	{"SELECT @@error_count", Route{Kind: KindShowWarnings}},

	// SHOW, DESCRIBE, EXPLAIN.
	{"SHOW TABLES", Route{Kind: KindRead}},
	{"SHOW FULL TABLES FROM db LIKE 'x%'", Route{Kind: KindRead}},
	{"SHOW CREATE TABLE t", Route{Kind: KindRead}},
	{"SHOW VARIABLES LIKE 'max_allowed_packet'", Route{Kind: KindRead}},
	{"SHOW GLOBAL VARIABLES", Route{Kind: KindRead}},
	{"SHOW TABLE STATUS", Route{Kind: KindRead}},
	{"SHOW COLLATION", Route{Kind: KindRead}},
	{"SHOW GRANTS FOR root@localhost", Route{Kind: KindRead}},
	{"SHOW PROCESSLIST", Route{Kind: KindGatewayShow, Table: "processlist"}},
	{"SHOW FULL PROCESSLIST", Route{Kind: KindGatewayShow, Table: "full processlist"}},
	{"SHOW SESSION STATUS", Route{SessionStatus: true}},
	{"SHOW MASTER STATUS", Route{}},
	{"SHOW SLAVE STATUS", Route{}},
	{"SHOW ALL SLAVES STATUS", Route{}},
	{"SHOW ENGINE INNODB STATUS", Route{}},
	{"DESCRIBE t", Route{Kind: KindRead}},
	{"DESC t a", Route{Kind: KindRead}},
	{"EXPLAIN t", Route{Kind: KindRead}},
	{"EXPLAIN SELECT 1", Route{Kind: KindRead}},
	{"EXPLAIN FORMAT=JSON SELECT * FROM t", Route{Kind: KindRead}},
	{"EXPLAIN EXTENDED SELECT 1", Route{Kind: KindRead}},
	{"EXPLAIN SELECT RELEASE_LOCK('a')", Route{Kind: KindRead}}, // nothing runs: no unpin
	{"EXPLAIN UPDATE t SET a=1", Route{}},
	{"EXPLAIN ANALYZE SELECT 1", Route{}},
	{"ANALYZE SELECT 1", Route{}},

	// Transactions.
	{"begin", Route{Kind: KindBegin, ImplicitCommit: true}},
	{"BEGIN WORK", Route{Kind: KindBegin, ImplicitCommit: true}},
	{"START TRANSACTION", Route{Kind: KindBegin, ImplicitCommit: true}},
	{"START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT", Route{Kind: KindBegin, ImplicitCommit: true}},
	{"COMMIT WORK", Route{Kind: KindCommit}},
	{"COMMIT AND CHAIN", Route{Kind: KindCommit, Chain: true}},
	{"COMMIT WORK AND NO CHAIN NO RELEASE", Route{Kind: KindCommit}},
	{"COMMIT RELEASE", Route{Kind: KindCommit, Release: true}},
	{"COMMIT foo", Route{}},
	{"ROLLBACK", Route{Kind: KindRollback}},
	{"ROLLBACK WORK", Route{Kind: KindRollback}},
	{"ROLLBACK AND CHAIN", Route{Kind: KindRollback, Chain: true}},
	{"ROLLBACK AND NO CHAIN RELEASE", Route{Kind: KindRollback, Release: true}},
	{"ROLLBACK TO SAVEPOINT a", Route{}},
	{"ROLLBACK TO a", Route{}},
	{"ROLLBACK WORK TO SAVEPOINT a", Route{}},
	{"SAVEPOINT a", Route{}},
	{"RELEASE SAVEPOINT a", Route{}},
	{"BEGIN WORK foo", Route{}},
	{"START SLAVE", Route{ImplicitCommit: true}},
	{"XA START 'x'", Route{Pin: PinUnreplayable | PinXA}},
	{"XA END 'x'", Route{Pin: PinUnreplayable | PinXA}},
	{"XA COMMIT 'x' ONE PHASE", Route{Pin: PinUnreplayable | PinXA}},
	{"BEGIN NOT ATOMIC SELECT 1; END", Route{Pin: PinUnreplayable}},
	{"BEGIN NOT ATOMIC DECLARE x INT; IF x THEN SELECT 1; END IF; SET @y = x; END", Route{Pin: PinUnreplayable | PinUserVar}},

	// USE.
	{"USE db", Route{Kind: KindUse, Database: "db"}},
	{"use `my db`", Route{Kind: KindUse, Database: "my db"}},
	{"USE `a``b`;", Route{Kind: KindUse, Database: "a`b"}},
	{"USE db@replica", Route{Kind: KindUse, Database: "db@replica"}},
	{"USE `ks:-80@replica`", Route{Kind: KindUse, Database: "ks:-80@replica"}},

	// KILL.
	{"KILL 5", Route{Kind: KindKill, KillID: 5}},
	{"KILL CONNECTION 5", Route{Kind: KindKill, KillID: 5}},
	{"KILL QUERY 5", Route{Kind: KindKill, KillID: 5, KillQuery: true}},
	{"KILL HARD QUERY 7", Route{Kind: KindKill, KillID: 7, KillQuery: true}},
	{"KILL 18446744073709551615", Route{Kind: KindKill, KillID: 18446744073709551615}},
	{"KILL 18446744073709551616", Route{}},
	{"KILL QUERY ID 5", Route{OtherKill: true}},
	{"KILL USER bob", Route{OtherKill: true}},
	{"KILL CONNECTION_ID()", Route{Kind: KindKill, KillSelf: true}},

	// Sequences and streams.
	{"SELECT NEXT 5 VALUES FROM t", Route{Kind: KindSequence, Table: "t", Count: 5}},
	{"select next 10 values from ks.seq", Route{Kind: KindSequence, Table: "ks.seq", Count: 10}},
	{"SELECT NEXT 0 VALUES FROM `ks`.`t`", Route{Kind: KindSequence, Table: "ks.t"}},
	{"SELECT NEXT -1 VALUES FROM t", Route{Kind: KindSequence, Table: "t", Count: -1}},
	{"SELECT NEXT ? VALUES FROM t", Route{Kind: KindSequence, Table: "t"}},
	{"SELECT NEXT :n VALUES FROM t", Route{Kind: KindSequence, Table: "t"}},
	{"SELECT NEXT VALUE FROM t", Route{Kind: KindSequence, Table: "t", Count: 1}},
	{"SELECT NEXT VALUE FOR s", Route{Kind: KindSequence, Table: "s", Count: 1, NativeSyntax: true, Pin: PinLastResult}},
	{"SELECT NEXT VALUE FOR s, 1", Route{Pin: PinLastResult}},
	{"SELECT NEXTVAL(s)", Route{Pin: PinLastResult}},
	{"SELECT SETVAL(s, 100)", Route{Pin: PinLastResult}},
	{"SELECT LASTVAL(s)", Route{Kind: KindRead, ReadsLastResult: true}},
	{"SELECT PREVIOUS VALUE FOR s", Route{Kind: KindRead, ReadsLastResult: true}},
	{"INSERT INTO t VALUES (NEXT VALUE FOR s)", Route{Pin: PinLastResult, Table: "t", DML: DMLInsert}},
	{"SELECT NEXT 99999999999999999999 VALUES FROM t", Route{Pin: PinLastResult}},
	{"STREAM * FROM msgs", Route{Kind: KindStream, Table: "msgs"}},
	{"stream * from ks.msgs", Route{Kind: KindStream, Table: "ks.msgs"}},

	// DML.
	{"INSERT LOW_PRIORITY IGNORE INTO `my``t` VALUES (1)", Route{Pin: PinLastResult, Table: "my`t", DML: DMLInsert}},
	{"INSERT `t` (a) VALUES (1)", Route{Pin: PinLastResult, Table: "t", DML: DMLInsert}},
	{"INSERT INTO ks.t (a) VALUES (1)", Route{Pin: PinLastResult, Table: "ks.t", DML: DMLInsert}},
	{"INSERT INTO `ks`.`t` (a) VALUES (1)", Route{Pin: PinLastResult, Table: "ks.t", DML: DMLInsert}},
	{"REPLACE INTO t VALUES (1)", Route{Pin: PinLastResult, Table: "t", DML: DMLReplace}},
	{"INSERT INTO t SELECT * FROM u", Route{Pin: PinLastResult, Table: "t", DML: DMLInsert}},
	{"INSERT INTO t VALUES (1) RETURNING id", Route{Pin: PinLastResult, Table: "t", DML: DMLInsert}},
	{"DELETE FROM t WHERE id = 1 RETURNING id", Route{Pin: PinLastResult, DML: DMLDelete}},
	{"INSERT INTO t VALUES (LAST_INSERT_ID(5))", Route{Pin: PinLastResult, Table: "t", DML: DMLInsert}},
	{"LOAD DATA LOCAL INFILE 'x' INTO TABLE t", Route{Pin: PinLastResult}},
	{"CALL p(@x)", Route{Pin: PinUserVar | PinLastResult}},
	{"CALL p()", Route{Pin: PinLastResult}},
	{"DO 1", Route{}},

	// SET: user variables.
	{"SET @x=1", Route{Kind: KindSet, Pin: PinUserVar}},
	{"SET @x:=1", Route{Kind: KindSet, Pin: PinUserVar}},
	{"set @x := 5", Route{Kind: KindSet, Pin: PinUserVar}}, // Vitess cannot parse this one
	{"SET@x=1", Route{Kind: KindSet, Pin: PinUserVar}},
	{"SET @`x y` = 1", Route{Kind: KindSet, Pin: PinUserVar}},
	{"SET @'x' = 1, @\"y\" = 2", Route{Kind: KindSet, Pin: PinUserVar}},
	{"SET @x = (SELECT 1)", Route{Kind: KindSet, Pin: PinUserVar}},
	{"SET @a = GET_LOCK('x', 1)", Route{Kind: KindSet, Pin: PinUserVar | PinLock}},
	{"SET @a=1, sql_mode=''", Route{Kind: KindSet, Pin: PinUserVar, Vars: vars(v("sql_mode", "''", true))}},

	// SET: session variables, as ORMs and drivers send them.
	{"SET NAMES utf8mb4", Route{Kind: KindSet, Vars: vars(v("names", "utf8mb4", true))}},
	{"SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci", Route{Kind: KindSet, Vars: vars(v("names", "utf8mb4 COLLATE utf8mb4_unicode_ci", true))}},
	{"SET NAMES 'utf8' COLLATE 'utf8_bin'", Route{Kind: KindSet, Vars: vars(v("names", "'utf8' COLLATE 'utf8_bin'", true))}},
	{"SET names DEFAULT", Route{Kind: KindSet, Vars: vars(v("names", "DEFAULT", true))}},
	{"SET NAMES _utf8'x'", Route{Kind: KindSet, Vars: vars(v("names", "_utf8'x'", false))}},
	{"SET CHARACTER SET utf8", Route{Kind: KindSet, Vars: vars(v("character set", "utf8", true))}},
	{"SET CHARSET 'latin1'", Route{Kind: KindSet, Vars: vars(v("character set", "'latin1'", true))}},
	{"SET SESSION sql_mode='STRICT_ALL_TABLES'", Route{Kind: KindSet, Vars: vars(v("sql_mode", "'STRICT_ALL_TABLES'", true))}},
	{"SET sql_mode = 'a' 'b'", Route{Kind: KindSet, Vars: vars(v("sql_mode", "'a' 'b'", true))}},
	{"SET time_zone='+00:00'", Route{Kind: KindSet, Vars: vars(v("time_zone", "'+00:00'", true))}},
	{"SET time_zone = SYSTEM", Route{Kind: KindSet, Vars: vars(v("time_zone", "SYSTEM", true))}},
	{"SET autocommit=0", Route{Kind: KindSet, Vars: vars(v("autocommit", "0", true))}},
	{"SET autocommit=1", Route{Kind: KindSet, ImplicitCommit: true, Vars: vars(v("autocommit", "1", true))}},
	{"set session autocommit = ON", Route{Kind: KindSet, ImplicitCommit: true, Vars: vars(v("autocommit", "ON", true))}},
	{"SET `autocommit` = 1", Route{Kind: KindSet, ImplicitCommit: true, Vars: vars(v("autocommit", "1", true))}},
	{"SET SQL_SELECT_LIMIT=DEFAULT", Route{Kind: KindSet, Vars: vars(v("sql_select_limit", "DEFAULT", true))}},
	{"SET @@session.wait_timeout=28800", Route{Kind: KindSet, Vars: vars(v("wait_timeout", "28800", true))}},
	{"SET @@SESSION.`sql_mode` = ''", Route{Kind: KindSet, Vars: vars(v("sql_mode", "''", true))}},
	{"SET @@local.sql_mode = 'x'", Route{Kind: KindSet, Vars: vars(v("sql_mode", "'x'", true))}},
	{"SET LOCAL sql_mode = 'x'", Route{Kind: KindSet, Vars: vars(v("sql_mode", "'x'", true))}},
	{"SET @@sql_mode = 'x'", Route{Kind: KindSet, Vars: vars(v("sql_mode", "'x'", true))}},
	{"SET character_set_results = NULL", Route{Kind: KindSet, Vars: vars(v("character_set_results", "NULL", true))}},
	{"SET x = -1", Route{Kind: KindSet, Vars: vars(v("x", "-1", true))}},
	{"SET max_statement_time = 1.5", Route{Kind: KindSet, Vars: vars(v("max_statement_time", "1.5", true))}},
	{"SET sql_mode = @@global.sql_mode", Route{Kind: KindSet, Vars: vars(v("sql_mode", "@@global.sql_mode", false))}},
	{"SET SESSION sql_mode = CONCAT(@@sql_mode, ',STRICT_TRANS_TABLES')", Route{Kind: KindSet, Vars: vars(v("sql_mode", "CONCAT(@@sql_mode, ',STRICT_TRANS_TABLES')", false))}},
	{"SET sql_mode = (SELECT @@sql_mode)", Route{Kind: KindSet, Vars: vars(v("sql_mode", "(SELECT @@sql_mode)", false))}},
	{"SET sql_mode = CURRENT_USER", Route{Kind: KindSet, Vars: vars(v("sql_mode", "CURRENT_USER", false))}},
	{"SET sql_mode = ?", Route{Kind: KindSet, Vars: vars(v("sql_mode", "?", false))}},
	{"SET timestamp = 1700000000", Route{Kind: KindSet, Vars: vars(v("timestamp", "1700000000", true))}},
	{"SET timestamp = UNIX_TIMESTAMP()", Route{Kind: KindSet, Vars: vars(v("timestamp", "UNIX_TIMESTAMP()", false))}},
	{"SET foreign_key_checks = 0, unique_checks = 0", Route{Kind: KindSet, Vars: vars(v("foreign_key_checks", "0", true), v("unique_checks", "0", true))}},
	{"SET SESSION autocommit=0, tx_isolation = 'SERIALIZABLE'", Route{Kind: KindSet, Vars: vars(v("autocommit", "0", true), v("tx_isolation", "'SERIALIZABLE'", true))}},
	{"SET GLOBAL a=1, SESSION b=2", Route{Kind: KindSet, SetsGlobal: true, Vars: vars(v("b", "2", true))}},
	{"SET GLOBAL a=1, @@b=2", Route{Kind: KindSet, SetsGlobal: true, Vars: vars(v("b", "2", true))}},

	// SET: transaction characteristics.
	{"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", Route{Kind: KindSet, Vars: vars(v("tx_isolation", "'READ-COMMITTED'", true))}},
	{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ WRITE", Route{Kind: KindSet, Vars: vars(v("tx_isolation", "'REPEATABLE-READ'", true), v("tx_read_only", "OFF", true))}},
	{"SET LOCAL TRANSACTION READ ONLY", Route{Kind: KindSet, Vars: vars(v("tx_read_only", "ON", true))}},
	{"SET SESSION tx_isolation = 'READ-COMMITTED'", Route{Kind: KindSet, Vars: vars(v("tx_isolation", "'READ-COMMITTED'", true))}},
	{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", Route{Kind: KindSet, NextTxn: true}},
	{"SET TRANSACTION READ ONLY", Route{Kind: KindSet, NextTxn: true}},
	{"SET tx_isolation = 'READ-COMMITTED'", Route{Kind: KindSet, NextTxn: true}},
	{"SET @@transaction_read_only = 1", Route{Kind: KindSet, NextTxn: true}},
	{"SET GLOBAL TRANSACTION ISOLATION LEVEL READ UNCOMMITTED", Route{SetsGlobal: true}},

	// SET: what cannot be replayed, and what is not session state.
	{"SET sql_log_bin=0", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET SESSION SQL_LOG_BIN = 0", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET insert_id = 5", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET last_insert_id = 5", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET identity = 5", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET pseudo_thread_id = 5", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET gtid_seq_no = 5", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET gtid_domain_id = 2, sql_mode = ''", Route{Kind: KindSet, Pin: PinUnreplayable, Vars: vars(v("sql_mode", "''", true))}},
	{"SET rand_seed1 = 1, rand_seed2 = 2", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET debug_dbug = '+d,x'", Route{Kind: KindSet, Pin: PinUnreplayable}},
	{"SET GLOBAL max_connections = 100", Route{SetsGlobal: true}},
	{"SET @@GLOBAL.sql_mode = 'x'", Route{SetsGlobal: true}},
	{"SET PERSIST max_connections = 100", Route{SetsGlobal: true}},
	{"SET GLOBAL a=1, b=2", Route{SetsGlobal: true}},
	{"SET keycache1.key_buffer_size = 1024", Route{SetsGlobal: true}},
	{"SET PASSWORD = PASSWORD('x')", Route{ImplicitCommit: true}},
	{"SET PASSWORD FOR u@localhost = PASSWORD('x')", Route{ImplicitCommit: true}},
	{"SET ROLE admin", Route{Pin: PinUnreplayable}},
	{"SET DEFAULT ROLE admin FOR bob", Route{}},
	{"SET a", Route{Pin: PinUnreplayable}},
	{"SET STATEMENT max_statement_time=1 FOR SELECT * FROM t", Route{SetStatement: true, Kind: KindRead}},
	{"SET STATEMENT max_statement_time=1 FOR UPDATE t SET a=1", Route{SetStatement: true, Pin: PinLastResult, Table: "t", DML: DMLUpdate}},
	{"SET STATEMENT sql_mode='' FOR SELECT @x", Route{SetStatement: true, Kind: KindRead, Pin: PinUserVar}},

	// Temporary tables, locks, prepared statements.
	{"CREATE TEMPORARY TABLE t (a int)", Route{Pin: PinTempTable, CreatedTemp: names("t")}},
	{"CREATE TEMPORARY TABLE t SELECT 1", Route{Pin: PinTempTable, CreatedTemp: names("t")}},
	{"CREATE TEMPORARY TABLE IF NOT EXISTS t LIKE u", Route{Pin: PinTempTable, CreatedTemp: names("t")}},
	{"CREATE TEMPORARY TABLE t AS SELECT @x", Route{Pin: PinTempTable | PinUserVar, CreatedTemp: names("t")}},
	{"CREATE OR REPLACE TEMPORARY TABLE t (a int)", Route{Pin: PinTempTable, CreatedTemp: names("t")}}, // Vitess cannot parse this one
	{"CREATE TEMPORARY SEQUENCE s", Route{Pin: PinTempTable | PinUnreplayable}},
	{"DROP TEMPORARY TABLE t", Route{Unpin: PinTempTable, Dropped: names("t")}},
	{"DROP TEMPORARY TABLE IF EXISTS t", Route{Unpin: PinTempTable, Dropped: names("t")}},
	{"DROP TABLE IF EXISTS t", Route{Unpin: PinTempTable, ImplicitCommit: true, Dropped: names("t")}},
	{"DROP TABLE t1, t2", Route{Unpin: PinTempTable, ImplicitCommit: true, Dropped: names("t1", "t2")}},
	{"DROP TEMPORARY SEQUENCE s", Route{Unpin: PinTempTable}},
	{"LOCK TABLES t READ", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"LOCK TABLES t WRITE, u AS x READ LOCAL", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"LOCK TABLE t WRITE", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"UNLOCK TABLES", Route{Unpin: PinLockTables, ImplicitCommit: true}},
	{"BACKUP STAGE START", Route{Pin: PinUnreplayable}},
	{"backup lock t1", Route{Pin: PinUnreplayable}},
	{"UNLOCK TABLE", Route{Unpin: PinLockTables, ImplicitCommit: true}},
	{"FLUSH TABLES WITH READ LOCK", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"FLUSH TABLES t WITH READ LOCK", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"FLUSH TABLES t FOR EXPORT", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"FLUSH TABLE t1 WITH READ LOCK", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"flush table t1, t2 for export", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"FLUSH TABLES WITH READ LOCK AND DISABLE CHECKPOINT", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"FLUSH TABLE t1", Route{ImplicitCommit: true}},
	{"FLUSH PRIVILEGES", Route{ImplicitCommit: true}},
	{"PREPARE s FROM 'SELECT 1'", Route{PrepareName: "s", Pin: PinPrepare}},
	{"PREPARE s FROM 'SELECT ?'", Route{PrepareName: "s", Pin: PinPrepare}},
	{"PREPARE s FROM 'CREATE TEMPORARY TABLE t (a int)'", Route{PrepareName: "s", Pin: PinPrepare | PinTempTable | PinUnreplayable}}, // EXECUTE s will not name t
	{"PREPARE s FROM 'SET sql_mode = ''x'''", Route{PrepareName: "s", Pin: PinPrepare | PinUnreplayable}},
	{"PREPARE s FROM @sql", Route{PrepareName: "s", Pin: PinPrepare | PinUserVar | PinUnreplayable, DynamicVar: "sql"}},
	{"EXECUTE s", Route{}},
	{"EXECUTE s USING @a, @b", Route{Pin: PinUserVar}},
	{"DEALLOCATE PREPARE s", Route{PrepareName: "s", Unpin: PinPrepare}},
	{"DROP PREPARE s", Route{PrepareName: "s", Unpin: PinPrepare}},
	{"EXECUTE IMMEDIATE 'SELECT 1'", Route{Kind: KindRead}},
	{"EXECUTE IMMEDIATE 'SET @x = 1'", Route{Kind: KindSet, Pin: PinUserVar}},
	{"EXECUTE IMMEDIATE 'SET NAMES utf8mb4'", Route{Kind: KindSet, Vars: vars(v("names", "utf8mb4", true))}},
	{"EXECUTE IMMEDIATE 'SELECT RELEASE_LOCK(''a'')'", Route{}},
	{"EXECUTE IMMEDIATE CONCAT('SELECT ', 1)", Route{Pin: PinUnreplayable}},
	{"HANDLER t OPEN", Route{Pin: PinUnreplayable}},
	{"HANDLER t READ FIRST", Route{Pin: PinUnreplayable}},

	// Temporary table names: CreatedTemp, Dropped, Renames. Names are
	// unquoted, qualified as written, case kept; a part holding '.' or '`'
	// (or empty) stays backquoted so that "a.b" always means database a.
	{"CREATE TEMPORARY TABLE `db`.`t.x` (a int)", Route{Pin: PinTempTable, CreatedTemp: names("db.`t.x`")}},
	{"CREATE TEMPORARY TABLE `my.tmp` (a int)", Route{Pin: PinTempTable, CreatedTemp: names("`my.tmp`")}},
	{"CREATE TEMPORARY TABLE `a``b` (a int)", Route{Pin: PinTempTable, CreatedTemp: names("`a``b`")}},
	{"CREATE TEMPORARY TABLE `a b` (a int)", Route{Pin: PinTempTable, CreatedTemp: names("a b")}},
	{"create temporary table Db1.TmpT (a int)", Route{Pin: PinTempTable, CreatedTemp: names("Db1.TmpT")}},
	{"CREATE TEMPORARY TABLE `db` . `t` LIKE u", Route{Pin: PinTempTable, CreatedTemp: names("db.t")}},
	{"CREATE TEMPORARY TABLE t (LIKE db.u)", Route{Pin: PinTempTable, CreatedTemp: names("t")}},
	{"CREATE TEMPORARY TABLE IF NOT EXISTS db.t AS SELECT * FROM u", Route{Pin: PinTempTable, CreatedTemp: names("db.t")}},
	{"CREATE TEMPORARY TABLE t (a int) ENGINE=MEMORY AS SELECT 1", Route{Pin: PinTempTable, CreatedTemp: names("t")}},
	{"CREATE TEMPORARY TABLE t2 IGNORE SELECT * FROM u", Route{Pin: PinTempTable, CreatedTemp: names("t2")}},
	{"CREATE TEMPORARY TABLE t ENGINE=MEMORY SELECT 1", Route{Pin: PinTempTable, CreatedTemp: names("t")}}, // unparseable
	{"CREATE TEMPORARY TABLE t (SELECT 1)", Route{Pin: PinTempTable, CreatedTemp: names("t")}},             // unparseable
	{"CREATE OR REPLACE TEMPORARY TABLE `d.b`.`t``1` LIKE u", Route{Pin: PinTempTable, CreatedTemp: names("`d.b`.`t``1`")}},
	{"CREATE OR REPLACE TEMPORARY TABLE db.t AS SELECT @x", Route{Pin: PinTempTable | PinUserVar, CreatedTemp: names("db.t")}},
	{"CREATE OR REPLACE TEMPORARY TABLE IF NOT EXISTS t (a int)", Route{Pin: PinTempTable, CreatedTemp: names("t")}},
	{"/*!40101 CREATE TEMPORARY TABLE t1 (a int) */", Route{Pin: PinTempTable, CreatedTemp: names("t1")}},
	{"EXECUTE IMMEDIATE 'CREATE TEMPORARY TABLE t (a int)'", Route{Pin: PinTempTable, CreatedTemp: names("t")}},
	{"SET STATEMENT max_statement_time=1 FOR CREATE TEMPORARY TABLE t SELECT 1", Route{SetStatement: true, Pin: PinTempTable, CreatedTemp: names("t")}},
	{"CREATE OR REPLACE TEMPORARY TABLE (a int)", Route{Pin: PinTempTable | PinUnreplayable}}, // no name: untrackable
	{"CREATE TEMPORARY TABLE a.b.c (a int)", Route{Pin: PinTempTable | PinUnreplayable}},
	{"CREATE TEMPORARY TABLE t@x (a int)", Route{Pin: PinTempTable | PinUnreplayable}},
	{"CREATE TEMPORARY TABLE 1e5 (a int)", Route{Pin: PinTempTable | PinUnreplayable}},
	{"CREATE TABLE t LIKE u", Route{ImplicitCommit: true}}, // not TEMPORARY
	{"DROP TABLE a, db.b, `c`", Route{Unpin: PinTempTable, ImplicitCommit: true, Dropped: names("a", "db.b", "c")}},
	{"DROP TEMPORARY TABLE IF EXISTS a, db.b, `c` RESTRICT", Route{Unpin: PinTempTable, Dropped: names("a", "db.b", "c")}},
	{"DROP TABLES `x.y`, `db`.`t.1` CASCADE", Route{Unpin: PinTempTable, ImplicitCommit: true, Dropped: names("`x.y`", "db.`t.1`")}},
	{"DROP TABLE IF EXISTS a NOWAIT", Route{Unpin: PinTempTable, ImplicitCommit: true, Dropped: names("a")}},
	{"DROP TEMPORARY TABLE a WAIT 5", Route{Unpin: PinTempTable, Dropped: names("a")}},
	{"drop table `A``B`", Route{Unpin: PinTempTable, ImplicitCommit: true, Dropped: names("`A``B`")}},
	{"DROP TABLE IF EXISTS /*COMMENT TO SAVE*/ t3", Route{Unpin: PinTempTable, ImplicitCommit: true, Dropped: names("t3")}},
	{"DROP TABLE a b", Route{Unpin: PinTempTable, ImplicitCommit: true}}, // unreadable: no names
	{"DROP TEMPORARY TABLE", Route{Unpin: PinTempTable}},
	{"DROP VIEW v", Route{ImplicitCommit: true}},
	{"ALTER TABLE t RENAME u", Route{ImplicitCommit: true, Renames: renames("t", "u")}},
	{"ALTER TABLE t RENAME TO db.u", Route{ImplicitCommit: true, Renames: renames("t", "db.u")}},
	{"ALTER TABLE `t.1` RENAME AS `u``2`", Route{ImplicitCommit: true, Renames: renames("`t.1`", "`u``2`")}},
	{"ALTER TABLE t ADD c int, RENAME TO u", Route{ImplicitCommit: true, Renames: renames("t", "u")}},
	{"ALTER TABLE t RENAME TO u, RENAME TO v", Route{ImplicitCommit: true, Renames: renames("t", "v")}},
	{"ALTER ONLINE IGNORE TABLE IF EXISTS db.t NOWAIT RENAME TO u", Route{ImplicitCommit: true, Renames: renames("db.t", "u")}}, // unparseable
	{"ALTER TABLE t NOWAIT ADD c int, RENAME u", Route{ImplicitCommit: true, Renames: renames("t", "u")}},                       // unparseable
	{"ALTER TABLE t RENAME COLUMN a TO b", Route{ImplicitCommit: true}},
	{"ALTER TABLE t RENAME INDEX a TO b", Route{ImplicitCommit: true}},
	{"ALTER TABLE t NOWAIT RENAME KEY a TO b", Route{ImplicitCommit: true}},
	{"ALTER TABLE t RENAME CONSTRAINT a TO b", Route{ImplicitCommit: true}},
	{"ALTER TABLE IF t RENAME TO u", Route{Pin: PinUnreplayable, ImplicitCommit: true}},
	{"ALTER TABLE IF t ADD c int", Route{ImplicitCommit: true}},
	{"ALTER TABLE t RENAME TO", Route{Pin: PinUnreplayable, ImplicitCommit: true}}, // a rename it cannot read
	{"ALTER IGNORE TABLE t RENAME TO u v", Route{Pin: PinUnreplayable, ImplicitCommit: true}},
	{"RENAME TABLE a TO b, db.x TO `y.z`", Route{ImplicitCommit: true, Renames: renames("a", "b", "db.x", "`y.z`")}},
	{"RENAME TABLES IF EXISTS a NOWAIT TO b, b TO c", Route{ImplicitCommit: true, Renames: renames("a", "b", "b", "c")}},
	{"RENAME TABLE a WAIT 3 TO `b`", Route{ImplicitCommit: true, Renames: renames("a", "b")}},
	{"RENAME TABLE a TO", Route{Pin: PinUnreplayable, ImplicitCommit: true}},
	{"RENAME USER a TO b", Route{ImplicitCommit: true}},
	{"PREPARE s FROM 'ALTER TABLE t RENAME TO u'", Route{PrepareName: "s", Pin: PinPrepare | PinUnreplayable}},
	{"PREPARE s FROM 'DROP TEMPORARY TABLE t'", Route{PrepareName: "s", Pin: PinPrepare}},

	// DDL and administration.
	{"CREATE TABLE t (a int)", Route{ImplicitCommit: true}},
	{"CREATE OR REPLACE TABLE t (a int)", Route{ImplicitCommit: true}},
	{"CREATE TABLE t AS SELECT * FROM u", Route{ImplicitCommit: true}},
	{"CREATE SEQUENCE s START WITH 1", Route{ImplicitCommit: true}},
	{"ALTER TABLE t ADD c int", Route{ImplicitCommit: true}},
	{"ALTER TABLE t ENGINE=InnoDB", Route{ImplicitCommit: true}},
	{"TRUNCATE t", Route{ImplicitCommit: true}},
	{"RENAME TABLE a TO b", Route{ImplicitCommit: true, Renames: renames("a", "b")}},
	{"CREATE DATABASE d", Route{ImplicitCommit: true}},
	{"DROP DATABASE d", Route{ImplicitCommit: true}},
	{"CREATE INDEX i ON t (a)", Route{ImplicitCommit: true}},
	{"CREATE VIEW v AS SELECT 1", Route{ImplicitCommit: true}},
	{"ANALYZE TABLE t", Route{ImplicitCommit: true}},
	{"OPTIMIZE TABLE t", Route{ImplicitCommit: true}},
	{"REPAIR TABLE t", Route{ImplicitCommit: true}},
	{"CHECK TABLE t", Route{ImplicitCommit: true}},
	{"CHECKSUM TABLE t", Route{}},
	{"GRANT SELECT ON *.* TO root@localhost", Route{ImplicitCommit: true}},
	{"GRANT ALL ON db.* TO 'u'@'%'", Route{ImplicitCommit: true}},
	{"CREATE USER 'u'@'%' IDENTIFIED BY 'x'", Route{ImplicitCommit: true}},
	{"PURGE BINARY LOGS TO 'x'", Route{}},
	{"SIGNAL SQLSTATE '45000'", Route{}},
	{"VALUES (1),(2)", Route{}},
	{"CREATE FUNCTION f() RETURNS int RETURN 1", Route{ImplicitCommit: true}},
	{"CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END", Route{ImplicitCommit: true}},
	{"CREATE DEFINER=`root`@`localhost` PROCEDURE p() BEGIN IF 1 THEN SELECT 1; END IF; END", Route{ImplicitCommit: true}},
	{"CREATE OR REPLACE DEFINER=root@localhost TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.a = 1; END", Route{ImplicitCommit: true}},
	{"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = @x", Route{Pin: PinUserVar, ImplicitCommit: true}},

	// mysqldump / mariadb-dump output.
	{"/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;", Route{Kind: KindSet, Pin: PinUserVar}},
	{"/*!40101 SET NAMES utf8mb4 */;", Route{Kind: KindSet, Vars: vars(v("names", "utf8mb4", true))}},
	{"/*!40103 SET TIME_ZONE='+00:00' */;", Route{Kind: KindSet, Vars: vars(v("time_zone", "'+00:00'", true))}},
	{"/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;", Route{Kind: KindSet, Pin: PinUserVar, Vars: vars(v("unique_checks", "0", true))}},
	{"/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;", Route{Kind: KindSet, Pin: PinUserVar, Vars: vars(v("sql_mode", "'NO_AUTO_VALUE_ON_ZERO'", true))}},
	{"/*!40111 SET @OLD_SQL_NOTES=@@SQL_NOTES, SQL_NOTES=0 */;", Route{Kind: KindSet, Pin: PinUserVar, Vars: vars(v("sql_notes", "0", true))}},
	{"/*M!100616 SET @OLD_NOTE_VERBOSITY=@@NOTE_VERBOSITY, NOTE_VERBOSITY=0 */;", Route{Kind: KindSet, Pin: PinUserVar, Vars: vars(v("note_verbosity", "0", true))}},
	{"/*!40101 SET character_set_client = @saved_cs_client */;", Route{Kind: KindSet, Pin: PinUserVar, Vars: vars(v("character_set_client", "@saved_cs_client", false))}},
	{"/*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;", Route{Kind: KindSet, Pin: PinUserVar, Vars: vars(v("time_zone", "@OLD_TIME_ZONE", false))}},
	{"/*!999999\\- enable the sandbox mode */", Route{}},
	{"/*!40000 ALTER TABLE `t` DISABLE KEYS */;", Route{ImplicitCommit: true}},
	{"/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ /*!50001 VIEW `v` AS select 1 AS `1` */;", Route{ImplicitCommit: true}},
	{"/*!50003 CREATE*/ /*!50020 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1 */;;", Route{ImplicitCommit: true}},
	{"LOCK TABLES `t` WRITE;", Route{Pin: PinLockTables, ImplicitCommit: true}},
	{"INSERT INTO `t` VALUES (1,'a'),(2,'b');", Route{Pin: PinLastResult, Table: "t", DML: DMLInsert}},
	// MariaDB ignores MySQL 5.7/8.0 comments unless they are /*M! ones.
	{"/*!80000 SET @x = 1 */ SELECT 1", Route{Kind: KindRead}},
	{"/*M!80000 SET @x = 1 */", Route{Kind: KindSet, Pin: PinUserVar}},
	{"/*!50700 SET @x = 1 */ SELECT 1", Route{Kind: KindRead}},
	{"/*!SET @x = 1 */", Route{Kind: KindSet, Pin: PinUserVar}},
	{"SELECT /*!40001 SQL_NO_CACHE */ * FROM t", Route{Kind: KindRead}},
	{"SELECT 1 /*!40101 , @x */", Route{Kind: KindRead, Pin: PinUserVar}},
	{"SELECT '/*!40101 @x */'", Route{Kind: KindRead}},

	// Multi-statement batches.
	{"SELECT 1; SELECT 2", Route{Kind: KindRead, MultiStatement: true}},
	{"SELECT 1;", Route{Kind: KindRead}},
	{"SELECT 1;;", Route{Kind: KindRead}},
	{";SELECT 1", Route{Kind: KindRead}},
	{"SELECT 1; -- trailing", Route{Kind: KindRead}},
	{"SELECT 1 /* ; */ -- ;", Route{Kind: KindRead}},
	{"SELECT * FROM t WHERE a = 'x;y';", Route{Kind: KindRead}},
	{"SELECT 1; SELECT @x", Route{Kind: KindRead, Pin: PinUserVar, MultiStatement: true}},
	{"SET NAMES utf8; SET autocommit=1", Route{Kind: KindSet, ImplicitCommit: true, MultiStatement: true, Vars: vars(v("names", "utf8", true), v("autocommit", "1", true))}},
	{"BEGIN; UPDATE t SET a=1; COMMIT", Route{Pin: PinLastResult, ImplicitCommit: true, MultiStatement: true}},
	{"CREATE TEMPORARY TABLE t(a int); DROP TEMPORARY TABLE t", Route{Pin: PinTempTable, MultiStatement: true, CreatedTemp: names("t"), Dropped: names("t")}},
	{"SELECT GET_LOCK('a', 1); SELECT RELEASE_LOCK('b')", Route{Pin: PinLock, MultiStatement: true}},
	{"CREATE TEMPORARY TABLE a (x int); CREATE OR REPLACE TEMPORARY TABLE db.b LIKE a; RENAME TABLE a TO c; ALTER TABLE c RENAME d; DROP TABLE IF EXISTS d, `e.f`",
		Route{Pin: PinTempTable, ImplicitCommit: true, MultiStatement: true, CreatedTemp: names("a", "db.b"), Dropped: names("d", "`e.f`"), Renames: renames("a", "c", "c", "d")}},
	{"DROP TEMPORARY TABLE a; SELECT 1; DROP TEMPORARY TABLE b", Route{Unpin: PinTempTable, MultiStatement: true, Dropped: names("a", "b")}},
	{"SELECT SQL_CALC_FOUND_ROWS * FROM t; SELECT FOUND_ROWS()", Route{Kind: KindRead, Pin: PinFoundRows, ReadsLastResult: true, MultiStatement: true}},
	{"USE a; USE b", Route{Database: "b", MultiStatement: true}},
	{"CREATE PROCEDURE p() BEGIN SELECT 1; SET @x=1; END; CALL p()", Route{Pin: PinUserVar | PinLastResult, ImplicitCommit: true, MultiStatement: true}},
	{"IF @x THEN SELECT 1; END IF", Route{Pin: PinUserVar | PinUnreplayable}},
	{"IF (1 > 0) THEN SELECT 1; ELSE SELECT 2; END IF; SET NAMES utf8", Route{Kind: KindOther, Pin: PinUnreplayable, MultiStatement: true, Vars: vars(v("names", "utf8", true))}},
	{"WHILE 0 DO SELECT 1; END WHILE", Route{Pin: PinUnreplayable}},
	{"lbl: LOOP LEAVE lbl; END LOOP lbl", Route{Pin: PinUnreplayable}},
	{"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW IF NEW.a > 0 THEN SET NEW.a = 0; END IF; SELECT 1", Route{ImplicitCommit: true, MultiStatement: true}},
	{"CREATE PROCEDURE p() BEGIN CREATE TABLE IF NOT EXISTS t (a int); SET @x = CASE WHEN 1 THEN 2 END; END; SET sql_mode = ''", Route{Kind: KindOther, Pin: PinUserVar, ImplicitCommit: true, MultiStatement: true, Vars: vars(v("sql_mode", "''", true))}},

	// Empty names, found by FuzzClassify: no SetVar or Database may be empty.
	{"SET``=0", Route{Pin: PinUnreplayable}},
	{"use ``", Route{}},

	// Empty and junk input.
	{"", Route{}},
	{"   ", Route{}},
	{"/* only a comment */", Route{}},
	{";", Route{}},
	{"SELECT 'unterminated", Route{Kind: KindRead}},
	{"SELECT 1 /* unterminated", Route{Kind: KindRead}},
	{"@x", Route{Pin: PinUserVar}},
	{"SHOW GATEWAY BACKENDS", Route{Kind: KindGatewayShow, Table: "backends"}},
	{"show gateway Pools;", Route{Kind: KindGatewayShow, Table: "pools"}},
	{"SHOW GATEWAY", Route{Kind: KindGatewayShow}},
	{"\x00\xff", Route{}},
}

func TestClassify(t *testing.T) {
	c := classifier(t)
	seen := map[string]bool{}
	for _, tc := range classifyCases {
		if seen[tc.sql] {
			t.Errorf("duplicate case %q", tc.sql)
		}
		seen[tc.sql] = true
		got := withoutCount(c.Classify(tc.sql))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Classify(%q)\n got %s\nwant %s", tc.sql, describe(got), describe(tc.want))
		}
		checkTempTables(t, got)
	}
	if len(classifyCases) < 150 {
		t.Errorf("only %d cases", len(classifyCases))
	}
}

// describe prints a Route compactly for test failures.
func describe(r Route) string {
	s := "{" + r.Kind.String() + " pin=" + r.Pin.String() + " unpin=" + r.Unpin.String()
	flag := func(b bool, name string) {
		if b {
			s += " " + name
		}
	}
	flag(r.ReadsLastResult, "readsLast")
	flag(r.ImplicitCommit, "implicitCommit")
	flag(r.MultiStatement, "multi")
	flag(r.NextTxn, "nextTxn")
	flag(r.NativeSyntax, "native")
	flag(r.KillQuery, "killQuery")
	flag(r.Chain, "chain")
	flag(r.Release, "release")
	if r.Database != "" {
		s += " db=" + r.Database
	}
	if r.Table != "" {
		s += " table=" + r.Table
	}
	if r.Count != 0 {
		s += " count=" + itoa(r.Count)
	}
	if r.KillID != 0 {
		s += " kill=" + itoa(int64(r.KillID))
	}
	for _, v := range r.Vars {
		lit := ""
		if v.Literal {
			lit = "!"
		}
		s += " [" + v.Name + "=" + v.Value + lit + "]"
	}
	if r.CreatedTemp != nil {
		s += " created=" + strings.Join(r.CreatedTemp, ",")
	}
	if r.Dropped != nil {
		s += " dropped=" + strings.Join(r.Dropped, ",")
	}
	for _, p := range r.Renames {
		s += " rename=" + p[0] + ">" + p[1]
	}
	return s + "}"
}

func itoa(n int64) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func TestSetVarSQL(t *testing.T) {
	for _, tc := range []struct {
		v    SetVar
		want string
	}{
		{v("sql_mode", "'ANSI'", true), "SET SESSION sql_mode = 'ANSI'"},
		{v("names", "utf8mb4 COLLATE utf8mb4_bin", true), "SET NAMES utf8mb4 COLLATE utf8mb4_bin"},
		{v("character set", "utf8", true), "SET CHARACTER SET utf8"},
		{v("tx_isolation", "'READ-COMMITTED'", true), "SET SESSION tx_isolation = 'READ-COMMITTED'"},
		{v("odd name", "1", true), "SET SESSION `odd name` = 1"},
	} {
		if got := tc.v.SQL(); got != tc.want {
			t.Errorf("%+v.SQL() = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestStrings(t *testing.T) {
	if got := (PinUserVar | PinLock).String(); got != "user_var|lock" {
		t.Errorf("Pin.String = %q", got)
	}
	if got := Pin(0).String(); got != "none" {
		t.Errorf("Pin(0).String = %q", got)
	}
	if got := (PinUnreplayable | 1<<12).String(); got != "unreplayable|0x1000" {
		t.Errorf("Pin.String = %q", got)
	}
	if got := KindShowWarnings.String(); got != "show_warnings" {
		t.Errorf("Kind.String = %q", got)
	}
	if got := Kind(200).String(); got != "kind(200)" {
		t.Errorf("Kind.String = %q", got)
	}
}

// TestConcurrent runs one Classifier from many goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	c := classifier(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, tc := range classifyCases {
				if got := withoutCount(c.Classify(tc.sql)); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("Classify(%q) = %s", tc.sql, describe(got))
					return
				}
			}
		}()
	}
	wg.Wait()
}

// withoutCount clears Route.Statements, which TestStatementCount checks
// on its own, so the table of cases need not repeat it.
func withoutCount(r Route) Route {
	r.Statements = 0
	return r
}

func TestStatementCount(t *testing.T) {
	c := classifier(t)
	for sql, want := range map[string]int{
		"SELECT 1":                       0,
		"SELECT 1; SELECT 2":             2,
		"SELECT ';'; SELECT 2; SELECT 3": 3,
		"SELECT 1;":                      0,
		"CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END; CALL p()": 2,
	} {
		if got := c.Classify(sql).Statements; got != want {
			t.Errorf("Classify(%q).Statements = %d, want %d", sql, got, want)
		}
	}
}

func TestConnectionIDAndProcessList(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for sql, want := range map[string][2]string{
		"SELECT CONNECTION_ID()":         {"connection_id", "CONNECTION_ID()"},
		"select connection_id()":         {"connection_id", "connection_id()"},
		"SELECT CONNECTION_ID() AS id":   {"connection_id", "id"},
		"SELECT CONNECTION_ID() `my id`": {"connection_id", "my id"},
		"SELECT CONNECTION_ID() AS 'x'":  {"connection_id", "x"},
		"SHOW PROCESSLIST":               {"processlist", ""},
		"show full processlist":          {"full processlist", ""},
		"SELECT CONNECTION_ID() + 1":     {"", ""},
		"SELECT CONNECTION_ID() FROM t":  {"", ""},
		"SELECT CONNECTION_ID(), 1":      {"", ""},
		"SHOW PROCESSLIST LIKE 'x'":      {"", ""},
	} {
		r := c.Classify(sql)
		got := [2]string{}
		if r.Kind == KindGatewayShow {
			got = [2]string{r.Table, r.Column}
		}
		if got != want {
			t.Errorf("%s: %v (kind %v), want %v", sql, got, r.Kind, want)
		}
	}
}
