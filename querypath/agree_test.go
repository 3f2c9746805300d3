package querypath

import (
	"reflect"
	"strings"
	"testing"

	"vitess.io/vitess/go/vt/sqlparser"
)

// agreementExtra are typical application statements, on top of the table
// cases, for TestFastPathAgreesWithParser.
var agreementExtra = []string{
	"SELECT `users`.* FROM `users` WHERE `users`.`id` = 1 LIMIT 1",
	"SELECT COUNT(*) FROM t WHERE a IN (1, 2, 3)",
	"SELECT a, b FROM t1 JOIN t2 ON t1.id = t2.id WHERE t2.x > 5 GROUP BY a HAVING COUNT(*) > 1 ORDER BY b DESC LIMIT 10 OFFSET 5",
	"SELECT CASE WHEN a THEN 1 ELSE 2 END FROM t",
	"SELECT * FROM t WHERE a LIKE '%@%'",
	"SELECT * FROM t WHERE email = 'bob@example.com'",
	"SELECT DATABASE()",
	"SELECT VERSION(), CONNECTION_ID(), NOW(6), UUID()",
	"SELECT @@version, @@sql_mode, @@autocommit, @@session.time_zone",
	"SELECT * FROM information_schema.tables WHERE table_schema = DATABASE()",
	"SELECT 1 FROM dual WHERE EXISTS (SELECT 1 FROM t LOCK IN SHARE MODE)",
	"SELECT a FROM t WHERE b = ? AND c IN (?, ?) ORDER BY d LIMIT ?",
	"SELECT t.a, (SELECT MAX(b) FROM u WHERE u.a = t.a) FROM t",
	"SELECT SQL_NO_CACHE * FROM t",
	"SELECT HIGH_PRIORITY STRAIGHT_JOIN a FROM t",
	"SELECT GET_LOCK('lock1', 10), RELEASE_LOCK('lock2')",
	"SELECT IFNULL(@a, 0) + 1",
	"SELECT LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS()",
	"UPDATE t SET a = a + 1, b = NOW() WHERE id IN (SELECT id FROM u)",
	"UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.a = t2.a",
	"DELETE t1 FROM t1 JOIN t2 ON t1.id = t2.id",
	"DELETE FROM t ORDER BY id LIMIT 10",
	"INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)",
	"INSERT IGNORE INTO t VALUES (1)",
	"INSERT INTO t (a, b) VALUES (?, ?), (?, ?)",
	"INSERT DELAYED INTO db1.t VALUES (1)",
	"REPLACE INTO t SET a = 1",
	"SHOW DATABASES",
	"SHOW INDEX FROM t",
	"SHOW COLUMNS FROM t FROM db",
	"SHOW FULL COLUMNS FROM `t`",
	"SHOW CREATE DATABASE db",
	"SHOW TRIGGERS",
	"SHOW CHARACTER SET",
	"SHOW ENGINES",
	"SHOW PLUGINS",
	"SHOW STATUS LIKE 'Threads%'",
	"SHOW BINARY LOGS",
	"EXPLAIN SELECT * FROM t WHERE a = 1",
	"DESCRIBE db.t",
	"START TRANSACTION READ WRITE",
	"START TRANSACTION WITH CONSISTENT SNAPSHOT",
	"SAVEPOINT sp1",
	"RELEASE SAVEPOINT sp1",
	"USE sbtest",
	"KILL QUERY 42",
	"SELECT NEXT 1 VALUES FROM seq",
	"SELECT NEXT VALUE FROM `user_seq`",
	"SET SESSION wait_timeout = 60",
	"SET @@session.sql_auto_is_null = 0",
	"SET sql_mode='STRICT_TRANS_TABLES,NO_ZERO_DATE', time_zone='UTC'",
	"SET @a = 1, @@session.sql_mode = 'ANSI', GLOBAL x = 2",
	"SET character_set_client = utf8mb4, character_set_connection = utf8mb4",
	"CALL proc(1, @out)",
	"DO SLEEP(1)",
	"LOAD DATA INFILE '/tmp/x' INTO TABLE t",
}

// knownDifferences are statements where the fast path is right and the
// Vitess parser is not.
var knownDifferences = map[string]string{
	"KILL 18446744073709551616": "Vitess clamps an out-of-range id to 2^64-1; MariaDB rejects it",
	"SET GLOBAL a=1, b=2":       "the last GLOBAL/SESSION applies to following variables (MariaDB, MySQL); Vitess makes b a session variable",
}

// TestFastPathAgreesWithParser runs every statement the fast path decides
// through the parser as well and requires the same answer.
func TestFastPathAgreesWithParser(t *testing.T) {
	c := classifier(t)
	all := append([]string(nil), agreementExtra...)
	for _, tc := range classifyCases {
		all = append(all, tc.sql)
	}
	compared := 0
	for _, sql := range all {
		if hasExecComment(sql) {
			sql = expandComments(sql, false)
		}
		var st stmt
		scanStmt(&st, sql, 0, false)
		if st.more || st.unterminated || st.count == 0 {
			continue
		}
		fast, ok := c.fast(&st, 0)
		if !ok {
			continue
		}
		node, ok := c.parse(st.text())
		if !ok {
			continue
		}
		if why, ok := knownDifferences[sql]; ok {
			t.Logf("skipping %q: %s", sql, why)
			continue
		}
		compared++
		parsed := c.astRoute(node, &st, 0)
		fv, pv := fast.Vars, parsed.Vars
		fast.Vars, parsed.Vars = nil, nil
		if !reflect.DeepEqual(fast, parsed) {
			t.Errorf("%q:\n  fast   %s\n  parser %s", sql, describe(fast), describe(parsed))
		}
		if show, ok := node.(*sqlparser.Show); ok {
			if k, known := astShowKind(show); known && k != fast.Kind {
				t.Errorf("%q: fast %s, AST says %s", sql, fast.Kind, k)
			}
		}
		if set, ok := node.(*sqlparser.Set); ok {
			checkSetAgainstAST(t, sql, set, fast, fv)
		} else if len(fv)+len(pv) > 0 {
			t.Errorf("%q: Vars on a %T", sql, node)
		}
	}
	if compared < 150 {
		t.Errorf("only %d statements compared", compared)
	}
	t.Logf("%d statements compared", compared)
}

// checkSetAgainstAST compares what the lexer's SET reader found with the
// Vitess AST: user variables, and the names of session variables set.
func checkSetAgainstAST(t *testing.T, sql string, set *sqlparser.Set, r Route, vs []SetVar) {
	t.Helper()
	user := false
	var names []string
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		if v, ok := n.(*sqlparser.Variable); ok && v.Scope == sqlparser.VariableScope {
			user = true
		}
		return true, nil
	}, set)
	for _, e := range set.Exprs {
		name := strings.ToLower(e.Var.Name.String())
		switch e.Var.Scope {
		case sqlparser.VariableScope:
			user = true
		case sqlparser.GlobalScope, sqlparser.PersistSysScope, sqlparser.PersistOnlySysScope:
		case sqlparser.NextTxScope:
			// Vitess' transaction_* names; the lexer reports tx_* or NextTxn.
		default:
			switch name {
			case "charset":
				name = "character set"
			case "transaction_isolation":
				name = "tx_isolation"
			case "transaction_read_only":
				name = "tx_read_only"
			}
			if unreplayableVar(name) || nextTxnVar(name) && !r.NextTxn && len(vs) == 0 {
				continue
			}
			if nextTxnVar(name) && r.NextTxn {
				continue
			}
			names = append(names, name)
		}
	}
	if user != (r.Pin&PinUserVar != 0) {
		t.Errorf("%q: AST user variable %v, route pin %s", sql, user, r.Pin)
	}
	var got []string
	for _, v := range vs {
		if v.Name == "tx_isolation" || v.Name == "tx_read_only" {
			if !contains(names, v.Name) {
				continue // SET SESSION TRANSACTION: Vitess reports NextTxScope
			}
		}
		got = append(got, v.Name)
	}
	if !reflect.DeepEqual(got, names) {
		t.Errorf("%q: lexer vars %q, AST vars %q", sql, got, names)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// astShowKind classifies a SHOW from the Vitess AST, independently of the
// lexer. known is false for forms the AST does not tell apart.
func astShowKind(show *sqlparser.Show) (k Kind, known bool) {
	switch n := show.Internal.(type) {
	case *sqlparser.ShowBasic:
		switch n.Command {
		case sqlparser.Warnings, sqlparser.Errors:
			return KindShowWarnings, true
		case sqlparser.ProcessList:
			// The gateway's sessions, answered by the gateway.
			return KindGatewayShow, true
		case sqlparser.StatusGlobal, sqlparser.StatusSession,
			sqlparser.OpenTable, sqlparser.Profiles:
			return KindOther, true
		case sqlparser.UnknownCommandType:
			return 0, false
		}
		return KindRead, true
	case *sqlparser.ShowCreate:
		return KindRead, true
	}
	return 0, false
}
