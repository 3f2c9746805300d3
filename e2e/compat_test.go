package e2e

// Drop-in compatibility: the same statements answered byte for byte as
// MariaDB answers them, multi-statements and multiple result sets, the
// smaller commands, LOAD DATA LOCAL INFILE, packets over 16 MiB, MariaDB
// syntax the classifier cannot parse, and the mariadb command-line client.

import (
	"bytes"
	"context"
	"crypto/md5"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
)

// cmpDB is the database the byte-for-byte comparison runs in, dropped and
// recreated before each run so both runs start from the same state.
const cmpDB = "e2e_cmp"

// compatStep is one statement of the comparison: text protocol, or
// prepared (COM_STMT_PREPARE, EXECUTE with args, CLOSE).
type compatStep struct {
	q    string
	prep bool
	args []any
}

func txt(qs ...string) []compatStep {
	out := make([]compatStep, len(qs))
	for i, q := range qs {
		out[i] = compatStep{q: q}
	}
	return out
}

func prp(q string, args ...any) compatStep { return compatStep{q: q, prep: true, args: args} }

// allTypesDDL has a column of every MariaDB column type.
const allTypesDDL = `CREATE TABLE all_types (
	id INT PRIMARY KEY,
	c_tinyint TINYINT, c_utinyint TINYINT UNSIGNED, c_smallint SMALLINT, c_usmallint SMALLINT UNSIGNED,
	c_mediumint MEDIUMINT, c_umediumint MEDIUMINT UNSIGNED, c_int INT, c_uint INT UNSIGNED, c_zerofill INT(8) UNSIGNED ZEROFILL,
	c_bigint BIGINT, c_ubigint BIGINT UNSIGNED, c_decimal DECIMAL(65,30), c_decimal2 DECIMAL(10,2) UNSIGNED,
	c_float FLOAT, c_double DOUBLE, c_bit1 BIT(1), c_bit64 BIT(64), c_bool BOOLEAN,
	c_char CHAR(10), c_varchar VARCHAR(255), c_latin1 VARCHAR(20) CHARACTER SET latin1, c_binary BINARY(4), c_varbinary VARBINARY(20),
	c_tinytext TINYTEXT, c_text TEXT, c_mediumtext MEDIUMTEXT, c_longtext LONGTEXT,
	c_tinyblob TINYBLOB, c_blob BLOB, c_mediumblob MEDIUMBLOB, c_longblob LONGBLOB,
	c_enum ENUM('a','b','c'), c_set SET('x','y','z'),
	c_date DATE, c_time TIME, c_time6 TIME(6), c_datetime DATETIME, c_datetime6 DATETIME(6), c_timestamp TIMESTAMP(3) NULL DEFAULT NULL,
	c_year YEAR, c_json JSON, c_point POINT, c_geometry GEOMETRY, c_inet6 INET6, c_inet4 INET4, c_uuid UUID
) DEFAULT CHARSET=utf8mb4`

// allTypesColumns lists all_types' columns after id.
var allTypesColumns = []string{"c_tinyint", "c_utinyint", "c_smallint", "c_usmallint", "c_mediumint", "c_umediumint", "c_int", "c_uint",
	"c_zerofill", "c_bigint", "c_ubigint", "c_decimal", "c_decimal2", "c_float", "c_double", "c_bit1", "c_bit64", "c_bool",
	"c_char", "c_varchar", "c_latin1", "c_binary", "c_varbinary", "c_tinytext", "c_text", "c_mediumtext", "c_longtext",
	"c_tinyblob", "c_blob", "c_mediumblob", "c_longblob", "c_enum", "c_set", "c_date", "c_time", "c_time6", "c_datetime",
	"c_datetime6", "c_timestamp", "c_year", "c_json", "c_point", "c_geometry", "c_inet6", "c_inet4", "c_uuid"}

// allTypesRows are typical values, extremes, NULLs, and zero dates with
// characters outside the BMP.
var allTypesRows = []string{
	`(1, -5, 200, -300, 60000, -70000, 16000000, -2000000000, 4000000000, 42, -9000000000000000000, 18000000000000000000,
	  '12345.678901234567890123456789', 1234.5, 3.14159, 2.718281828459045, b'1', b'1010101010101010', TRUE,
	  'chars', 'héllo wörld', _latin1 X'636166E9', 'ab', 0x00ff, 'tiny', REPEAT('text ', 60), REPEAT('medium ', 3000), REPEAT('long ', 20000),
	  0x01, REPEAT(0x0200, 200), REPEAT(0x03, 70000), 0x04, 'b', 'x,z', '2024-02-29', '12:34:56', '-01:02:03.456789',
	  '2024-01-02 03:04:05', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.678', 2024, '{"a": [1, 2.5, "x"], "b": null}',
	  ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('LINESTRING(0 0, 1 1, 2 0)'), '2001:db8::1', '192.168.0.1',
	  '123e4567-e89b-12d3-a456-426655440000')`,
	`(2, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, 99999999, -9223372036854775808, 18446744073709551615,
	  '-99999999999999999999999999999999999.999999999999999999999999999999', 99999999.99, -3.40282e38, -1.7976931348623157e308,
	  b'0', b'1111111111111111111111111111111111111111111111111111111111111111', FALSE,
	  '', '', '', '', '', '', '', '', '', '', '', '', '', 'c', '', '1000-01-01', '-838:59:59', '838:59:59.999999',
	  '1000-01-01 00:00:00', '9999-12-31 23:59:59.999999', '2038-01-01 00:00:00.999', 1901, '[]',
	  ST_GeomFromText('POINT(-1.5 1e10)'), ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))'), '::', '0.0.0.0',
	  '00000000-0000-0000-0000-000000000000')`,
	`(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
	`(4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.0, b'0', b'0', 0,
	  '😀', '€ ü 😀 𝄞', '', 0x00, 0x00, '😀', '', '', '', '', '', '', '', 'a', 'x,y,z', '0000-00-00', '00:00:00', '00:00:00',
	  '0000-00-00 00:00:00', '0000-00-00 00:00:00.000000', NULL, 0, '"str"', ST_GeomFromText('POINT(0 0)'),
	  ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1))'), '::ffff:1.2.3.4', '255.255.255.255', 'ffffffff-ffff-ffff-ffff-ffffffffffff')`,
}

// compatSteps are the ~230 statements of the comparison, run in order on
// one connection.
func compatSteps() []compatStep {
	var s []compatStep
	s = append(s, txt("USE "+cmpDB, allTypesDDL, "INSERT INTO all_types VALUES "+strings.Join(allTypesRows, ", "))...)
	s = append(s, txt(
		"SELECT * FROM all_types ORDER BY id",
		"SELECT id, HEX(c_bit64), ST_AsText(c_point), ST_AsText(c_geometry), JSON_TYPE(c_json), JSON_UNQUOTE(JSON_EXTRACT(c_json, '$.a[1]')) FROM all_types ORDER BY id",
	)...)
	s = append(s, prp("SELECT * FROM all_types ORDER BY id"))
	for _, c := range allTypesColumns {
		s = append(s, compatStep{q: "SELECT id, " + c + " FROM all_types ORDER BY id"},
			prp("SELECT "+c+" FROM all_types WHERE id >= ? ORDER BY id", int64(1)))
	}
	s = append(s, txt(
		// Expressions and their metadata.
		"SELECT 1, -1, 1.5, -0.0, 1e308, 'str', _latin1'l\xe9', X'00ff', NULL, TRUE, b'101', DATE'2024-01-01', TIME'12:00:00', TIMESTAMP'2024-01-01 00:00:00'",
		"SELECT 18446744073709551615 + 0, -9223372036854775808, 1/3, 10 DIV 3, 2 * 0.1, CAST(1 AS DECIMAL(5,2)), CAST('2024-01-01' AS DATE), CAST(1.5 AS SIGNED), CAST(-1 AS UNSIGNED)",
		"SELECT CONCAT('a', NULL), COALESCE(NULL, 2), IFNULL(NULL, 'x'), NULLIF(1, 1), GREATEST(1, 2.5, '3'), 'a' = 'A', 'a' = 'A' COLLATE utf8mb4_bin",
		"SELECT REPEAT('x', 300) AS r300, REPEAT('y', 70000) AS r70000, LENGTH(REPEAT('z', 1000000))",
		`SELECT JSON_OBJECT('a', 1, 'b', JSON_ARRAY(1, 2)), JSON_EXTRACT('{"x": [1]}', '$.x'), JSON_VALID('{')`,
		"SELECT COUNT(*), SUM(c_int), AVG(c_double), MIN(c_date), MAX(c_varchar), GROUP_CONCAT(id ORDER BY id), BIT_OR(c_tinyint), STD(c_float) FROM all_types",
		"SELECT c_enum, COUNT(*) FROM all_types GROUP BY c_enum WITH ROLLUP",
		"SELECT id, ROW_NUMBER() OVER (ORDER BY id DESC), LAG(c_int) OVER (ORDER BY id) FROM all_types ORDER BY id",
		"WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 20) SELECT n, n * n FROM r",
		"SELECT seq, seq % 7, CONCAT('row', seq) FROM seq_1_to_1000",
		"SELECT * FROM all_types WHERE 1 = 0",
		"SELECT id FROM all_types WHERE c_varchar LIKE 'h%'",
		"VALUES (1, 'a'), (2, 'b')",
		// Metadata statements.
		"SHOW CREATE TABLE all_types",
		"SHOW COLUMNS FROM all_types",
		"SHOW FULL COLUMNS FROM all_types LIKE 'c_%text'",
		"DESCRIBE all_types c_json",
		"SHOW TABLES",
		"SHOW DATABASES LIKE '"+cmpDB+"'",
		"SHOW CREATE DATABASE "+cmpDB,
		"SHOW VARIABLES LIKE 'sql_mode'",
		"SHOW SESSION VARIABLES WHERE Variable_name IN ('autocommit', 'character_set_client', 'collation_connection', 'time_zone')",
		"SHOW COLLATION LIKE 'utf8mb4_bin'",
		"SHOW CHARACTER SET LIKE 'latin1'",
		"ANALYZE TABLE all_types",
		"EXPLAIN SELECT * FROM all_types WHERE id = 1",
		"EXPLAIN SELECT c_int FROM all_types WHERE c_int > 0 ORDER BY c_varchar",
		"SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, DATETIME_PRECISION, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '"+cmpDB+"' AND TABLE_NAME = 'all_types' ORDER BY ORDINAL_POSITION",
		// DML with affected rows, insert ids and info strings.
		"CREATE TABLE t2 (id INT AUTO_INCREMENT PRIMARY KEY, u INT UNIQUE, v VARCHAR(20) NOT NULL DEFAULT '', n DECIMAL(10,2), d DATETIME NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
		"INSERT INTO t2 (u, v, n) VALUES (1, 'a', 1.5), (2, 'b', 2.25), (3, 'c', NULL)",
		"INSERT INTO t2 (u, v) VALUES (1, 'dup')",
		"INSERT IGNORE INTO t2 (u, v) VALUES (1, 'dup'), (4, 'd')",
		"SHOW WARNINGS",
		"INSERT INTO t2 (u, v) VALUES (2, 'x') ON DUPLICATE KEY UPDATE v = 'updated'",
		"REPLACE INTO t2 (id, u, v) VALUES (3, 3, 'replaced')",
		"UPDATE t2 SET n = n * 2 WHERE n IS NOT NULL",
		"UPDATE t2 SET v = v",
		"UPDATE t2 SET n = 1 WHERE u = 999",
		"DELETE FROM t2 WHERE u = 4",
		"INSERT INTO t2 (u, v) SELECT u + 10, CONCAT(v, '!') FROM t2 WHERE u < 3",
		"INSERT INTO t2 SET u = 5, v = 'set syntax'",
		"SELECT * FROM t2 ORDER BY id",
		// Errors and warnings.
		"INSERT INTO t2 (u, v) VALUES (20, REPEAT('x', 30))",
		"INSERT INTO t2 (u, v) VALUES (21, NULL)",
		"INSERT INTO t2 (u, n) VALUES (22, 'abc')",
		"INSERT INTO t2 (u, n) VALUES (23, 1/0)",
		"SHOW ERRORS",
		"SELECT 1/0",
		"SHOW WARNINGS",
		"SHOW COUNT(*) WARNINGS",
		"SELECT CAST('12abc' AS SIGNED), CAST('x' AS DATE)",
		"SHOW WARNINGS LIMIT 1",
		"SELECT nope FROM t2",
		"SELECT * FROM nope",
		"SELEC 1",
		"SELECT no_such_function(1)",
		"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom error', MYSQL_ERRNO = 5001",
		"DROP TABLE IF EXISTS no_such_table",
		"SHOW WARNINGS",
		"SELECT CAST('q' AS SIGNED)",
		"GET DIAGNOSTICS CONDITION 1 @cmp_e = MYSQL_ERRNO, @cmp_m = MESSAGE_TEXT",
		"SELECT @cmp_e, @cmp_m",
		// Transactions.
		"BEGIN",
		"INSERT INTO t2 (u, v) VALUES (30, 'tx')",
		"SELECT COUNT(*) FROM t2",
		"ROLLBACK",
		"SELECT COUNT(*) FROM t2",
		"START TRANSACTION",
		"UPDATE t2 SET v = 'in tx' WHERE u = 1",
		"SELECT v FROM t2 WHERE u = 1 FOR UPDATE",
		"COMMIT",
		"SET autocommit = 0",
		"DELETE FROM t2 WHERE u = 11",
		"SELECT @@autocommit, @@in_transaction",
		"ROLLBACK",
		"SET autocommit = 1",
		"SELECT COUNT(*) FROM t2",
		// Session state: user variables, temporary tables, SQL prepared
		// statements, FOUND_ROWS, LAST_INSERT_ID, locks.
		"SET @cmp_a = 10, @cmp_b = 'str'",
		"SELECT @cmp_a + 1, @cmp_b, @cmp_undefined",
		"SELECT id INTO @cmp_id FROM t2 WHERE u = 2",
		"SELECT @cmp_id",
		"CREATE TEMPORARY TABLE tmp1 (a INT)",
		"INSERT INTO tmp1 VALUES (1), (2)",
		"SELECT SUM(a) FROM tmp1",
		"DROP TEMPORARY TABLE tmp1",
		"PREPARE sp FROM 'SELECT ? * 3'",
		"EXECUTE sp USING 7",
		"DEALLOCATE PREPARE sp",
		"SELECT SQL_CALC_FOUND_ROWS id FROM t2 ORDER BY id LIMIT 1",
		"SELECT FOUND_ROWS()",
		"INSERT INTO t2 (u, v) VALUES (40, 'lid')",
		"SELECT LAST_INSERT_ID()",
		"SELECT GET_LOCK('cmp_lock', 0), IS_USED_LOCK('cmp_lock') = CONNECTION_ID()",
		"SELECT RELEASE_LOCK('cmp_lock')",
		"LOCK TABLES t2 READ",
		"SELECT COUNT(*) FROM t2",
		"SELECT COUNT(*) FROM all_types",
		"UNLOCK TABLES",
		// Views, routines, sequences.
		"CREATE VIEW v2 AS SELECT id, v FROM t2 WHERE u < 10",
		"SELECT * FROM v2 ORDER BY id",
		"SHOW CREATE VIEW v2",
		"CREATE PROCEDURE p_out(IN x INT, OUT y INT) BEGIN SELECT x AS in_x; SET y = x * 2; END",
		"CALL p_out(5, @cmp_out)",
		"SELECT @cmp_out",
		"CREATE PROCEDURE p_two() BEGIN SELECT 1 AS a; SELECT 'b' AS b, 2 AS c; END",
		"CALL p_two()",
		"SHOW CREATE PROCEDURE p_two",
		"CREATE FUNCTION f1(x INT) RETURNS INT DETERMINISTIC RETURN x + 100",
		"SELECT f1(1), f1(NULL)",
		"CREATE SEQUENCE s1 START WITH 100 INCREMENT BY 10",
		"SELECT NEXT VALUE FOR s1",
		"SELECT NEXTVAL(s1), PREVIOUS VALUE FOR s1, LASTVAL(s1)",
		// MariaDB syntax.
		"INSERT INTO t2 (u, v) VALUES (50, 'ret'), (51, 'ret2') RETURNING id, u, v",
		"DELETE FROM t2 WHERE u >= 50 RETURNING id, v",
		"CREATE OR REPLACE TABLE t3 (a INT)",
		"CREATE OR REPLACE TABLE t3 (a INT, b INT)",
		"SHOW CREATE TABLE t3",
		"ALTER TABLE t3 ADD COLUMN c VARCHAR(5)",
		"CREATE INDEX ix_b ON t3 (b)",
		"DROP INDEX ix_b ON t3",
		"RENAME TABLE t3 TO t4",
		"TRUNCATE TABLE t4",
		"DROP TABLE t4",
		"SET STATEMENT max_statement_time = 10 FOR SELECT COUNT(*) FROM t2",
		"SELECT @@max_statement_time",
		"HANDLER t2 OPEN",
		"HANDLER t2 READ `PRIMARY` FIRST",
		"HANDLER t2 READ `PRIMARY` NEXT",
		"HANDLER t2 CLOSE",
		"XA START 'cmpxa'",
		"INSERT INTO t2 (u, v) VALUES (70, 'xa')",
		"XA END 'cmpxa'",
		"XA PREPARE 'cmpxa'",
		"XA COMMIT 'cmpxa'",
		"BEGIN NOT ATOMIC DECLARE x INT DEFAULT 3; SELECT x * 2 AS doubled; END",
		"EXECUTE IMMEDIATE 'SELECT 1 + ?' USING 2",
		"SELECT * FROM JSON_TABLE('[{\"a\": 1}, {\"a\": 2}]', '$[*]' COLUMNS (a INT PATH '$.a')) AS jt",
		"DO 1",
		"DO SLEEP(0)",
		// Character sets and session variables.
		"SET NAMES latin1",
		"SELECT 'é', @@character_set_results, c_varchar, c_latin1 FROM all_types WHERE id = 1",
		"SET NAMES utf8mb4",
		"SET sql_mode = ''",
		"INSERT INTO t2 (u, v) VALUES (60, REPEAT('y', 30))",
		"SHOW WARNINGS",
		"SET sql_mode = DEFAULT",
		"SET time_zone = '+05:00'",
		"SELECT c_timestamp FROM all_types ORDER BY id",
		"SET time_zone = DEFAULT",
		"SELECT @@sql_mode, @@autocommit, @@character_set_client, @@collation_connection, @@time_zone",
		"CHECKSUM TABLE t2, all_types",
		"SELECT * FROM t2 ORDER BY id",
	)...)
	// Prepared statements with arguments of each kind.
	ts := time.Date(2024, 1, 2, 3, 4, 5, 500000000, time.UTC)
	s = append(s,
		prp("SELECT ? AS i, ? AS s, ? AS n, ? AS f, ? AS b, ? AS t, ? AS u", int64(-7), "str é", nil, 0.25, []byte{0, 0xff}, ts, uint64(math.MaxUint64)),
		prp("SELECT ? + 0, ? IS NULL, CONCAT(?, '!')", uint64(1<<63), nil, "x"),
		prp("INSERT INTO t2 (u, v, n) VALUES (?, ?, ?)", int64(100), "p", "3.25"),
		prp("INSERT INTO t2 (u, v, n) VALUES (?, ?, ?)", int64(100), "p", nil),
		prp("INSERT INTO t2 (u, v, d) VALUES (?, ?, ?) RETURNING id, d", int64(101), "r", ts),
		prp("UPDATE t2 SET v = ? WHERE u >= ?", "pu", int64(100)),
		prp("SELECT * FROM t2 WHERE u > ? ORDER BY id", int64(0)),
		prp("SELECT COUNT(*), SUM(n), MAX(d) FROM t2 WHERE v <> ?", ""),
		prp("SELECT c_datetime6, c_time6, c_date FROM all_types WHERE c_datetime6 > ? ORDER BY id", ts),
		prp("SELECT CAST(? AS SIGNED)", "12x"),
		compatStep{q: "SHOW WARNINGS"},
		prp("DELETE FROM t2 WHERE u = ?", int64(100)),
		prp("CALL p_two()"),
		prp("CALL p_out(?, @cmp_out2)", int64(8)),
		compatStep{q: "SELECT @cmp_out2"},
		prp("SELECT * FROM nope WHERE id = ?", int64(1)),
		prp("SHOW COLUMNS FROM t2"),
		prp("EXPLAIN SELECT * FROM t2 WHERE id = ?", int64(1)),
		// Preparing raises a note: the EOFs of the answer count it.
		prp("EXPLAIN EXTENDED SELECT (SELECT 2) FROM t2 WHERE id = ?", int64(1)),
		compatStep{q: "SHOW WARNINGS"},
		prp("SET @cmp_p = ?", "from prepared"),
		compatStep{q: "SELECT @cmp_p"},
		prp("SELECT f1(?)", int64(5)),
		compatStep{q: "SELECT * FROM t2 ORDER BY id"},
	)
	return s
}

// recreateCmpDB gives the comparison an empty database.
func recreateCmpDB(t *testing.T, db *sql.DB) {
	t.Helper()
	// A run that failed half way may leave its XA transaction prepared.
	rows, err := db.Query("XA RECOVER")
	if err == nil {
		for rows.Next() {
			var format, gl, bl int
			var data string
			if rows.Scan(&format, &gl, &bl, &data) == nil && data == "cmpxa" {
				defer db.Exec("XA ROLLBACK 'cmpxa'")
			}
		}
		rows.Close()
	}
	mustExec(t, db, "DROP DATABASE IF EXISTS "+cmpDB, "CREATE DATABASE "+cmpDB+" CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
}

// runCompat runs the steps on one raw connection and records every
// response.
func runCompat(t *testing.T, tg target, caps uint32, steps []compatStep) []recorded {
	s := newRawSession(t, tg, caps)
	var out []recorded
	for i, st := range steps {
		what := fmt.Sprintf("step %d %q", i, st.q)
		if !st.prep {
			out = append(out, recorded{what, s.query(st.q)})
			continue
		}
		prep := s.prepare("s", st.q)
		out = append(out, recorded{"prepare " + what, prep})
		if prep[4] == 0xff {
			continue
		}
		out = append(out, recorded{fmt.Sprintf("execute %s %v", what, st.args), s.execute("s", 0, true, st.args...)})
		s.close("s")
	}
	return out
}

// TestCompatByteForByte runs the same ~230 statements (DDL, DML with
// affected rows and insert ids, SELECTs over every column type with NULLs,
// SHOW, EXPLAIN, warnings, errors, transactions, session state, MariaDB
// syntax; text protocol and prepared) directly and through the gateway and
// compares every response byte for byte: column metadata, values, OK and
// EOF packets with their status flags and warning counts, error packets.
// Both runs start from the same freshly created database, so insert ids
// and metadata (which names the database) are the same.
func TestCompatByteForByte(t *testing.T) {
	setup := direct(t)
	steps := compatSteps()
	if len(steps) < 200 {
		t.Fatalf("only %d statements", len(steps))
	}
	t.Cleanup(func() { recreateCmpDB(t, setup) })
	for _, caps := range []uint32{0, wire.CapDeprecateEOF} {
		var runs [2][]recorded
		for i, tg := range targets() {
			recreateCmpDB(t, setup)
			runs[i] = runCompat(t, tg, caps, steps)
		}
		compareRecorded(t, fmt.Sprintf("caps %#x", caps), runs[0], runs[1])
	}
}

// TestMultiStatements: with CLIENT_MULTI_STATEMENTS a batch runs, as one
// unit, on one backend connection; state it creates stays with the session;
// an error in the middle ends the batch and leaves the session usable.
func TestMultiStatements(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS ms_t", "CREATE TABLE ms_t (id INT PRIMARY KEY)")
	eachTarget(t, func(t *testing.T, tg target) {
		mustExec(t, direct(t), "DELETE FROM ms_t")
		churn(t, tg, 8)
		conn := tg.session(t, func(c *mysql.Config) { c.MultiStatements = true })
		run(t, conn, "INSERT INTO ms_t VALUES (1); INSERT INTO ms_t VALUES (2); INSERT INTO ms_t VALUES (3)")
		if got := str(t, conn, "SELECT COUNT(*) FROM ms_t"); got != "3" {
			t.Fatalf("after a batch of inserts: %s rows", got)
		}
		if got := str(t, conn, "SET @ms = 1; SELECT @ms"); got != "1" {
			t.Fatalf("SET @ms = 1; SELECT @ms gave %s", got)
		}
		for i := 0; i < 20; i++ {
			if got := str(t, conn, "SELECT @ms"); got != "1" {
				t.Fatalf("statement %d after the batch: @ms = %s", i, got)
			}
		}
		if got := str(t, conn, "CREATE TEMPORARY TABLE ms_tmp (a INT); INSERT INTO ms_tmp VALUES (1), (2); SELECT SUM(a) FROM ms_tmp"); got != "3" {
			t.Fatalf("temporary table batch: %s", got)
		}
		for i := 0; i < 20; i++ {
			if got := str(t, conn, "SELECT COUNT(*) FROM ms_tmp"); got != "2" {
				t.Fatalf("statement %d after the batch: temporary table has %s rows", i, got)
			}
		}
		// One batch, one connection: every result names the same one.
		for i := 0; i < 10; i++ {
			rows, err := conn.QueryContext(context.Background(), "SELECT CONNECTION_ID(); DO 0; SELECT CONNECTION_ID(); SELECT CONNECTION_ID()")
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for {
				for rows.Next() {
					var id string
					rows.Scan(&id)
					ids = append(ids, id)
				}
				if !rows.NextResultSet() {
					break
				}
			}
			rows.Close()
			if len(ids) != 3 || ids[0] != ids[1] || ids[1] != ids[2] {
				t.Fatalf("batch %d served by %v", i, ids)
			}
		}
		// An error in the middle.
		rows, err := conn.QueryContext(context.Background(), "SELECT 1; SELEC 2; SELECT 3")
		if err == nil {
			for rows.Next() {
			}
			rows.NextResultSet()
			err = rows.Err()
			rows.Close()
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1064 {
			t.Fatalf("batch with a syntax error: want 1064, got %v", err)
		}
		if got := str(t, conn, "SELECT 'after'"); got != "after" {
			t.Fatalf("after a failed batch: %s", got)
		}
		// Without multi-statements a batch is a syntax error.
		single := tg.session(t, nil)
		wantErr(t, single, "SELECT 1; SELECT 2", 1064, "42000")
	})
}

// TestStoredProcedures: a CALL returns every result set of the procedure;
// OUT and INOUT parameters land in user variables the next statement reads;
// state a procedure leaves behind (a user variable, a temporary table)
// stays with the session, since CALL may do anything.
func TestStoredProcedures(t *testing.T) {
	mustExec(t, direct(t), "DROP PROCEDURE IF EXISTS sp_two", "DROP PROCEDURE IF EXISTS sp_out",
		"DROP PROCEDURE IF EXISTS sp_state",
		"CREATE PROCEDURE sp_two() BEGIN SELECT 1 AS a; SELECT 'x' AS b, 2 AS c; END",
		"CREATE PROCEDURE sp_out(IN x INT, OUT y INT, INOUT z INT) BEGIN SET y = x * 2; SET z = z + 1; END",
		"CREATE PROCEDURE sp_state() BEGIN SET @from_proc = 7; CREATE TEMPORARY TABLE sp_tmp (a INT); INSERT INTO sp_tmp VALUES (1); END")
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		for i := 0; i < 10; i++ {
			rows, err := conn.QueryContext(context.Background(), "CALL sp_two()")
			if err != nil {
				t.Fatal(err)
			}
			var a, c int
			var b string
			if !rows.Next() || rows.Scan(&a) != nil || a != 1 {
				t.Fatalf("first result set: %d (%v)", a, rows.Err())
			}
			if rows.Next() || !rows.NextResultSet() || !rows.Next() || rows.Scan(&b, &c) != nil || b != "x" || c != 2 {
				t.Fatalf("second result set: %q %d (%v)", b, c, rows.Err())
			}
			for rows.NextResultSet() {
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 10; i++ {
			run(t, conn, fmt.Sprintf("SET @z = %d", i))
			run(t, conn, fmt.Sprintf("CALL sp_out(%d, @out, @z)", i))
			if got := strs(t, conn, "SELECT @out, @z"); got[0] != fmt.Sprint(2*i) || got[1] != fmt.Sprint(i+1) {
				t.Fatalf("round %d: OUT, INOUT = %q", i, got)
			}
		}
		conn = tg.session(t, nil)
		run(t, conn, "CALL sp_state()")
		for i := 0; i < 20; i++ {
			if got := strs(t, conn, "SELECT @from_proc, (SELECT COUNT(*) FROM sp_tmp)"); got[0] != "7" || got[1] != "1" {
				t.Fatalf("statement %d after CALL: variable, temporary table rows = %q", i, got)
			}
		}
	})
}

// TestSmallCommandsByteForByte: COM_PING, COM_INIT_DB, COM_FIELD_LIST and
// COM_SET_OPTION (multi-statements off and on again) answer as MariaDB
// does; COM_STATISTICS answers a status line.
func TestSmallCommandsByteForByte(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS cmd_fl", "CREATE TABLE cmd_fl (id INT PRIMARY KEY, name VARCHAR(10) DEFAULT 'n', at DATETIME)")
	one := func(s *rawSession, cmd []byte) []byte {
		s.send(cmd)
		var out []byte
		for {
			seq := s.bc.Seq()
			p, err := s.bc.ReadPacket()
			if err != nil {
				t.Fatalf("command %x: %v", cmd[0], err)
			}
			out = append(out, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq)
			out = append(out, p...)
			// COM_FIELD_LIST: definitions up to an EOF.
			if cmd[0] != wire.ComFieldList || wire.IsERR(p) || p[0] == 0xfe {
				return out
			}
		}
	}
	for _, caps := range []uint32{0, wire.CapDeprecateEOF} {
		var runs [2][]recorded
		for i, tg := range targets() {
			s := newRawSession(t, tg, caps)
			var out []recorded
			rec := func(what string, b []byte) { out = append(out, recorded{what, b}) }
			rec("ping", one(s, []byte{wire.ComPing}))
			rec("init db unknown", one(s, append([]byte{wire.ComInitDB}, "no_such_db"...)))
			rec("init db", one(s, append([]byte{wire.ComInitDB}, testDB...)))
			rec("field list", one(s, append([]byte{wire.ComFieldList}, "cmd_fl\x00"...)))
			rec("field list wildcard", one(s, append([]byte{wire.ComFieldList}, "cmd_fl\x00na%"...)))
			rec("field list unknown", one(s, append([]byte{wire.ComFieldList}, "no_such_table\x00"...)))
			rec("batch", s.query("SELECT 1; SELECT 2"))
			rec("multi-statements off", one(s, []byte{wire.ComSetOption, 1, 0}))
			rec("batch refused", s.query("SELECT 1; SELECT 2"))
			rec("multi-statements on", one(s, []byte{wire.ComSetOption, 0, 0}))
			rec("batch again", s.query("SELECT 1; SELECT 2"))
			rec("select", s.query("SELECT DATABASE()"))
			runs[i] = out
			stat := one(s, []byte{wire.ComStatistics})
			if !bytes.HasPrefix(stat[4:], []byte("Uptime: ")) {
				t.Errorf("%s: COM_STATISTICS answered %q", tg.name, stat)
			}
			if got := s.query("SELECT 'in sync'"); !bytes.Contains(got, []byte("in sync")) {
				t.Errorf("%s: out of sync after COM_STATISTICS: %q", tg.name, got)
			}
		}
		compareRecorded(t, fmt.Sprintf("caps %#x", caps), runs[0], runs[1])
	}
}

// TestLoadDataLocalInfile: LOAD DATA LOCAL INFILE is relayed both ways
// (registered files, io.Reader handlers, allowAllFiles); a file the client
// refuses loads nothing and leaves the session usable; a client without
// CLIENT_LOCAL_FILES gets MariaDB's error instead of a file request.
func TestLoadDataLocalInfile(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS ld_t", "CREATE TABLE ld_t (id INT PRIMARY KEY, name VARCHAR(20))")
	dir := t.TempDir()
	writeFile := func(name string, from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "%d,name %d\n", i, i)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	registered := writeFile("registered.csv", 0, 1000)
	unregistered := writeFile("unregistered.csv", 5000, 5100)
	mysql.RegisterLocalFile(registered)
	defer mysql.DeregisterLocalFile(registered)
	mysql.RegisterReaderHandler("e2e_ld", func() io.Reader {
		var b strings.Builder
		for i := 2000; i < 2500; i++ {
			fmt.Fprintf(&b, "%d,reader %d\n", i, i)
		}
		return strings.NewReader(b.String())
	})
	defer mysql.DeregisterReaderHandler("e2e_ld")
	load := func(path string) string {
		return fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE ld_t FIELDS TERMINATED BY ','", path)
	}
	eachTarget(t, func(t *testing.T, tg target) {
		mustExec(t, direct(t), "DELETE FROM ld_t")
		conn := tg.session(t, nil)
		for _, c := range []struct {
			q    string
			rows int64
		}{{load(registered), 1000}, {load("Reader::e2e_ld"), 500}} {
			res := run(t, conn, c.q)
			if n, _ := res.RowsAffected(); n != c.rows {
				t.Fatalf("%s: %d rows, want %d", c.q, n, c.rows)
			}
		}
		_, err := conn.ExecContext(context.Background(), load(unregistered))
		if err == nil || !strings.Contains(err.Error(), "is not registered") {
			t.Fatalf("unregistered file: want the driver's refusal, got %v", err)
		}
		if got := str(t, conn, "SELECT COUNT(*) FROM ld_t"); got != "1500" {
			t.Fatalf("after the refused file: %s rows, want 1500", got)
		}
		all := tg.session(t, func(c *mysql.Config) { c.AllowAllFiles = true })
		if n, _ := run(t, all, load(unregistered)).RowsAffected(); n != 100 {
			t.Fatalf("allowAllFiles: %d rows", n)
		}
	})
	// A client that did not offer CLIENT_LOCAL_FILES.
	var codes [2]string
	for i, tg := range targets() {
		bc := dialWithoutLocalFiles(t, tg)
		if err := bc.WriteCommand(append([]byte{wire.ComQuery}, load(unregistered)...)); err != nil {
			t.Fatal(err)
		}
		p, err := bc.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if !wire.IsERR(p) {
			t.Fatalf("%s: client without CLIENT_LOCAL_FILES got %x, want an error", tg.name, p)
		}
		e := wire.ParseERR(p)
		codes[i] = fmt.Sprintf("%d (%s)", e.Code, e.State)
		if _, err := bc.Exec("DO 1"); err != nil {
			t.Fatalf("%s: session unusable after the refused LOAD DATA: %v", tg.name, err)
		}
	}
	if codes[0] != codes[1] {
		t.Fatalf("client without CLIENT_LOCAL_FILES: MariaDB answers %s, the gateway %s", codes[0], codes[1])
	}
}

// dialWithoutLocalFiles logs in with a hand-made handshake response that
// leaves out CLIENT_LOCAL_FILES (wire.Dial always offers it).
func dialWithoutLocalFiles(t *testing.T, tg target) *wire.BackendConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", tg.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	c := wire.NewConn(nc, 64<<10, 16<<10)
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	g, err := wire.ParseGreeting(p)
	if err != nil {
		t.Fatal(err)
	}
	caps := (wire.BackendCaps &^ wire.CapLocalFiles) & g.Caps
	if err := c.WritePacket(wire.AppendHandshakeResponse(nil, &wire.HandshakeResponse{
		Caps: caps, MaxPacket: 1 << 24, Collation: wire.DefaultCollation, User: tg.user,
		AuthData: wire.ScrambleNative(g.Salt, tg.pass), AuthPlugin: wire.NativePassword,
	})); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case wire.IsOK(p):
			return &wire.BackendConn{Conn: c, Greeting: g, Caps: caps}
		case wire.IsERR(p):
			t.Fatalf("%s: login: %v", tg.name, wire.ParseERR(p))
		case p[0] == 0xfe:
			salt := bytes.TrimRight(p[1+bytes.IndexByte(p[1:], 0)+1:], "\x00")
			if err := c.WritePacket(wire.ScrambleNative(salt, tg.pass)); err != nil {
				t.Fatal(err)
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatalf("%s: login did not finish", tg.name)
	return nil
}

// bigPacketStack is the big-packet test's own MariaDB, with
// max_allowed_packet 64 MiB (the shared one has 1 MiB) and no binary log
// (writing 100 MiB of rows to it twice is most of the test's time), and a
// gateway in front of it with the same limit.
type bigPacketStack struct {
	db *mariadbtest.Server
	gw string
}

func startBigPacketStack(t *testing.T) bigPacketStack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{
		NoBinlog:  true,
		ExtraArgs: []string{"--max-allowed-packet=67108864"},
		Users:     []mariadbtest.User{{Name: backendUser, Password: backendPass}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	root, err := srv.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	mustExec(t, root, "CREATE DATABASE "+testDB)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
max_allowed_packet: 67108864
users:
  - {user: %s, password: %s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {size: 4, min_idle: 1, max_dials: 2, acquire_timeout: 20s}
`, logLevel(), appUser, appPass, backendUser, backendPass, srv.Addr())
	return bigPacketStack{db: srv, gw: startTestGateway(t, "gateway-bigpacket", yaml).Addr().String()}
}

// TestPacketsOver16MiB: statements, arguments and rows larger than one
// protocol packet (split at 16 MiB - 1 bytes, including a payload of exactly
// 16 MiB - 1, which needs an empty packet after it) go through whole, with
// the text and the binary protocol.
func TestPacketsOver16MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	// Parallel: its own server, gateway and tables (see the package doc);
	// the two targets run side by side, each on a table of its own.
	t.Parallel()
	st := startBigPacketStack(t)
	for _, tg := range []target{
		{name: "direct", addr: st.db.Addr(), user: backendUser, pass: backendPass},
		{name: "gateway", gateway: true, addr: st.gw, user: appUser, pass: appPass},
	} {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			conn := tg.session(t, func(c *mysql.Config) {
				binaryProtocol(c)
				c.MaxAllowedPacket = 64 << 20
				c.ReadTimeout, c.WriteTimeout = 2*time.Minute, 2*time.Minute
			})
			bigPackets(t, conn, open(t, st.db.DSN(backendUser, backendPass, testDB)), "big_pkt_"+tg.name)
		})
	}
}

// bigPackets writes and reads back values larger than a protocol packet
// through conn, in the table it creates; db writes to the server directly.
func bigPackets(t *testing.T, conn *sql.Conn, db *sql.DB, table string) {
	ctx := context.Background()
	run(t, conn, "CREATE TABLE "+table+" (id INT PRIMARY KEY, b LONGBLOB)")
	blob := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + (byte(i)+seed)%26
		}
		return b
	}
	check := func(id int, want []byte) {
		t.Helper()
		var n int
		var sum string
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT LENGTH(b), MD5(b) FROM "+table+" WHERE id = %d", id)).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		if n != len(want) || sum != fmt.Sprintf("%x", md5.Sum(want)) {
			t.Fatalf("row %d stored as %d bytes, md5 %s; sent %d bytes", id, n, sum, len(want))
		}
		// Text protocol row of the whole value.
		var got []byte
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT b FROM "+table+" WHERE id = %d", id)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("row %d read back (text protocol) differs: %d bytes", id, len(got))
		}
		// Binary protocol row.
		got = nil
		if err := conn.QueryRowContext(ctx, "SELECT b FROM "+table+" WHERE id = ?", id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("row %d read back (binary protocol) differs: %d bytes", id, len(got))
		}
	}
	// Just past one packet: 16 MiB + 64 KiB.
	const overOne = 16<<20 + 64<<10
	// Reading first: a row of overOne bytes written directly.
	b0 := blob(overOne, 5)
	if _, err := db.Exec("INSERT INTO "+table+" VALUES (0, ?)", b0); err != nil {
		t.Fatal(err)
	}
	check(0, b0)
	// A text statement of two packets.
	b1 := blob(overOne, 0)
	run(t, conn, "INSERT INTO "+table+" VALUES (1, '"+string(b1)+"')")
	check(1, b1)
	// A statement whose COM_QUERY payload is exactly 16 MiB - 1 bytes.
	prefix, suffix := "INSERT INTO "+table+" VALUES (2, '", "')"
	b2 := blob(wire.MaxPacketPayload-1-len(prefix)-len(suffix), 3)
	run(t, conn, prefix+string(b2)+suffix)
	check(2, b2)
	// An argument of two packets inside COM_STMT_EXECUTE (below
	// go-sql-driver's long-data threshold of max_allowed_packet / 3).
	b3 := blob(overOne, 7)
	if _, err := conn.ExecContext(ctx, "INSERT INTO "+table+" VALUES (?, ?)", 3, b3); err != nil {
		t.Fatal(err)
	}
	check(3, b3)
	// A statement of three packets.
	b4 := blob(16<<20+overOne, 11)
	run(t, conn, "INSERT INTO "+table+" VALUES (4, '"+string(b4)+"')")
	check(4, b4)
}

// TestMariaDBSyntaxForwarded: MariaDB syntax the classifier cannot parse is
// forwarded verbatim, and the state such statements leave (XA transactions,
// open HANDLERs, sequence values, variables set by compound statements) is
// kept with the session.
func TestMariaDBSyntaxForwarded(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		other := tg.open(t, nil)
		run(t, conn, "CREATE OR REPLACE TABLE syn_t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))")
		run(t, conn, "CREATE OR REPLACE TABLE syn_t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB")
		rowsOf := func(q string) string {
			t.Helper()
			rows, err := conn.QueryContext(context.Background(), q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			vals, _ := scanAll(t, rows)
			return fmt.Sprint(vals)
		}
		if got := rowsOf("INSERT INTO syn_t (v) VALUES ('a'), ('b'), ('c') RETURNING id, v"); got != "[[1 a] [2 b] [3 c]]" {
			t.Fatalf("INSERT ... RETURNING: %s", got)
		}
		if got := rowsOf("DELETE FROM syn_t WHERE v = 'a' RETURNING id"); got != "[[1]]" {
			t.Fatalf("DELETE ... RETURNING: %s", got)
		}
		if got := rowsOf("WITH c AS (SELECT 1 AS x) SELECT * FROM c"); got != "[[1]]" {
			t.Fatalf("WITH: %s", got)
		}
		if got := rowsOf("VALUES (1, 'a'), (2, 'b')"); got != "[[1 a] [2 b]]" {
			t.Fatalf("VALUES: %s", got)
		}
		for i := 0; i < 10; i++ {
			if got := strs(t, conn, "SET STATEMENT max_statement_time = 10 FOR SELECT @@max_statement_time, 1"); got[0] != "10" || got[1] != "1" {
				t.Fatalf("SET STATEMENT ... FOR: %q", got)
			}
			if got := str(t, conn, "SELECT @@max_statement_time"); got != "0" {
				t.Fatalf("SET STATEMENT ... FOR stuck: max_statement_time %s", got)
			}
		}
		// Sequences: PREVIOUS VALUE FOR reads the session's last NEXT VALUE.
		run(t, conn, "CREATE OR REPLACE SEQUENCE syn_s START WITH 10 INCREMENT BY 5")
		for i := 0; i < 10; i++ {
			want := fmt.Sprint(10 + 5*i)
			if got := str(t, conn, "SELECT NEXT VALUE FOR syn_s"); got != want {
				t.Fatalf("NEXT VALUE FOR: %s, want %s", got, want)
			}
			if got := str(t, conn, "SELECT PREVIOUS VALUE FOR syn_s"); got != want {
				t.Fatalf("PREVIOUS VALUE FOR right after NEXT VALUE FOR %s: %s", want, got)
			}
		}
		// XA: one transaction branch across statements, visible to others
		// only after XA COMMIT.
		for _, q := range []string{"XA START 'syn_xa'", "INSERT INTO syn_t (v) VALUES ('xa')", "XA END 'syn_xa'", "XA PREPARE 'syn_xa'"} {
			run(t, conn, q)
		}
		var n int
		if err := other.QueryRow("SELECT COUNT(*) FROM syn_t WHERE v = 'xa'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("prepared XA branch visible to others: %d (%v)", n, err)
		}
		run(t, conn, "XA COMMIT 'syn_xa'")
		if err := other.QueryRow("SELECT COUNT(*) FROM syn_t WHERE v = 'xa'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("after XA COMMIT: %d rows (%v)", n, err)
		}
		for _, q := range []string{"XA START 'syn_xb'", "INSERT INTO syn_t (v) VALUES ('xb')", "XA END 'syn_xb'", "XA ROLLBACK 'syn_xb'"} {
			run(t, conn, q)
		}
		if got := str(t, conn, "SELECT COUNT(*) FROM syn_t WHERE v = 'xb'"); got != "0" {
			t.Fatalf("after XA ROLLBACK: %s rows", got)
		}
		// HANDLER: the open handler and its position belong to the session.
		run(t, conn, "HANDLER syn_t OPEN")
		var got []string
		for _, q := range []string{"HANDLER syn_t READ `PRIMARY` FIRST", "HANDLER syn_t READ `PRIMARY` NEXT", "HANDLER syn_t READ `PRIMARY` NEXT"} {
			got = append(got, strs(t, conn, q)[1])
		}
		if strings.Join(got, ",") != "b,c,xa" {
			t.Fatalf("HANDLER READ FIRST, NEXT, NEXT: %q, want b, c, xa", got)
		}
		if got := rowsOf("HANDLER syn_t READ `PRIMARY` NEXT"); got != "[]" {
			t.Fatalf("HANDLER READ NEXT past the end: %s", got)
		}
		run(t, conn, "HANDLER syn_t CLOSE")
		// Compound statements and EXECUTE IMMEDIATE.
		run(t, conn, "BEGIN NOT ATOMIC SET @syn_c = 6; END")
		for i := 0; i < 10; i++ {
			if got := str(t, conn, "SELECT @syn_c"); got != "6" {
				t.Fatalf("variable set by BEGIN NOT ATOMIC: %s", got)
			}
		}
		if got := str(t, conn, "EXECUTE IMMEDIATE 'SELECT 1 + ?' USING 2"); got != "3" {
			t.Fatalf("EXECUTE IMMEDIATE: %s", got)
		}
		run(t, conn, "EXECUTE IMMEDIATE 'CREATE TEMPORARY TABLE syn_tmp (a INT)'")
		for i := 0; i < 10; i++ {
			if got := str(t, conn, "SELECT COUNT(*) FROM syn_tmp"); got != "0" {
				t.Fatalf("temporary table created by EXECUTE IMMEDIATE: %s", got)
			}
		}
		run(t, conn, "DROP TABLE syn_t")
	})
}

// TestMariaDBCLISession: a script of session-state statements run with the
// mariadb command-line client (each statement sent on its own, text
// protocol) prints exactly the same directly and through the gateway while
// other sessions churn the pool.
func TestMariaDBCLISession(t *testing.T) {
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		t.Skip("mariadb client not installed")
	}
	script := strings.Join([]string{
		"SET @a = 5", "SELECT @a + 1 AS a",
		"CREATE TEMPORARY TABLE cli_tmp (a INT)", "INSERT INTO cli_tmp VALUES (1), (2)", "SELECT SUM(a) FROM cli_tmp",
		"SELECT CAST('zz' AS SIGNED) AS c", "SHOW WARNINGS",
		"PREPARE s FROM 'SELECT ? * 2 AS p'", "SET @p = 21", "EXECUTE s USING @p", "DEALLOCATE PREPARE s",
		"SELECT SQL_CALC_FOUND_ROWS seq FROM seq_1_to_50 LIMIT 3", "SELECT FOUND_ROWS()",
		"BEGIN", "INSERT INTO cli_tmp VALUES (3)", "SELECT COUNT(*), @@in_transaction FROM cli_tmp", "ROLLBACK",
		"SELECT GET_LOCK('cli_lock', 0)", "SELECT IS_USED_LOCK('cli_lock') = CONNECTION_ID() AS mine", "SELECT RELEASE_LOCK('cli_lock')",
		"SET NAMES latin1", "SELECT @@character_set_client, @@character_set_results",
		"SET time_zone = '+07:00'", "SELECT @@time_zone",
		"SELECT @a, (SELECT COUNT(*) FROM cli_tmp) AS n",
	}, ";\n") + ";\n"
	var outs [2]string
	for i, tg := range targets() {
		churn(t, tg, 8)
		host, port, _ := net.SplitHostPort(tg.addr)
		cmd := exec.Command(bin, "--no-defaults", "-h"+host, "-P"+port, "-u"+tg.user, "-p"+tg.pass, "--batch", testDB)
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tg.name, err, out)
		}
		outs[i] = string(out)
	}
	if outs[0] != outs[1] {
		t.Fatalf("mariadb client output differs\ndirect:\n%s\ngateway:\n%s", outs[0], outs[1])
	}
}
