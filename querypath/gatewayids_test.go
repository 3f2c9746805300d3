package querypath

import "testing"

func TestRewriteGatewayIDs(t *testing.T) {
	pl := func(t GatewayTable) string {
		if t == TableProcessList {
			return "SELECT 7 AS ID"
		}
		return "SELECT 7 AS PROCESSLIST_ID, " + string('0'+byte(t)) + " AS ATTR_NAME"
	}
	cases := []struct {
		in, want string // want "": left alone
	}{
		{"SELECT CONNECTION_ID(), NOW()", "SELECT 42 AS `CONNECTION_ID()`, NOW()"},
		{"select connection_id() id", "select 42 id"},
		{"SELECT DISTINCT CONNECTION_ID() AS c FROM t", "SELECT DISTINCT 42 AS c FROM t"},
		{"SELECT a FROM t WHERE b = CONNECTION_ID()", "SELECT a FROM t WHERE b = 42"},
		{"INSERT INTO log VALUES (CONNECTION_ID(), 'x')", "INSERT INTO log VALUES (42, 'x')"},
		{"SET @c = CONNECTION_ID()", "SET @c = 42"},
		// make compat (user_var): CONNECTION_ID() in a larger item.
		{"SELECT CONNECTION_ID()+0", "SELECT 42+0 AS `CONNECTION_ID()+0`"},
		{"select @a - connection_id()", "select @a - 42 AS `@a - connection_id()`"},
		{"SELECT (CONNECTION_ID()), 1 FROM t", "SELECT (42) AS `(CONNECTION_ID())`, 1 FROM t"},
		{"SELECT ABS(CONNECTION_ID()) a", "SELECT ABS(42) a"},
		{"SELECT CONNECTION_ID() - x AS d", "SELECT 42 - x AS d"},
		{"SELECT 1 - CONNECTION_ID() x", "SELECT 1 - 42 x"},
		{"SELECT CONNECTION_ID() + INTERVAL 1 DAY", ""},
		{"SELECT CONNECTION_ID() - `x`", "SELECT 42 - `x` AS `CONNECTION_ID() - ``x```"},
		{"SELECT (SELECT CONNECTION_ID()) UNION SELECT 2",
			"SELECT (SELECT 42 AS `CONNECTION_ID()`) AS `(SELECT CONNECTION_ID())` UNION SELECT 2"},
		{"SELECT (SELECT 1 FROM t WHERE id = CONNECTION_ID()) FROM u",
			"SELECT (SELECT 1 FROM t WHERE id = 42) AS `(SELECT 1 FROM t WHERE id = CONNECTION_ID())` FROM u"},
		{"SELECT * FROM (SELECT CONNECTION_ID() + 1) d", "SELECT * FROM (SELECT 42 + 1 AS `CONNECTION_ID() + 1`) d"},
		{"SELECT IS_USED_LOCK('a') = CONNECTION_ID()", ""},
		{"SELECT x FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()", ""},
		// Issue 37: the client's own connection attributes.
		{"SELECT ATTR_NAME FROM performance_schema.session_connect_attrs WHERE PROCESSLIST_ID = CONNECTION_ID()",
			"SELECT ATTR_NAME FROM (SELECT 7 AS PROCESSLIST_ID, 1 AS ATTR_NAME) AS SESSION_CONNECT_ATTRS WHERE PROCESSLIST_ID = 42"},
		{"SELECT * FROM `performance_schema`.`session_account_connect_attrs` a",
			"SELECT * FROM (SELECT 7 AS PROCESSLIST_ID, 2 AS ATTR_NAME) a"},
		{"SELECT * FROM performance_schema.session_connect_attrs a JOIN performance_schema.threads t USING (PROCESSLIST_ID)", ""},
		{"SELECT PROCESSLIST_ID FROM threads", ""},
		{"SELECT * FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()", ""},
		{"CREATE PROCEDURE p() SELECT CONNECTION_ID()", ""},
		{"SELECT db.CONNECTION_ID()", ""},
		{"SELECT 'CONNECTION_ID()', CONNECTION_ID() AS c", "SELECT 'CONNECTION_ID()', 42 AS c"},
		{"/*!SELECT*/ CONNECTION_ID() AS c", ""},
		{"SELECT ID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()",
			"SELECT ID FROM (SELECT 7 AS ID) AS PROCESSLIST WHERE ID = 42"},
		{"SELECT p.ID FROM `information_schema`.`processlist` p",
			"SELECT p.ID FROM (SELECT 7 AS ID) p"},
		{"SELECT COUNT(*) FROM INFORMATION_SCHEMA.PROCESSLIST AS x JOIN t ON t.id = x.ID",
			"SELECT COUNT(*) FROM (SELECT 7 AS ID) AS x JOIN t ON t.id = x.ID"},
		{"SELECT * FROM t, information_schema.PROCESSLIST", "SELECT * FROM t, (SELECT 7 AS ID) AS PROCESSLIST"},
		{"SELECT information_schema.PROCESSLIST.ID FROM information_schema.PROCESSLIST", ""},
		{"SHOW COLUMNS FROM information_schema.PROCESSLIST", ""},
		{"SELECT 1; SELECT CONNECTION_ID() AS c", "SELECT 1; SELECT 42 AS c"},
		{"SELECT 1; CALL p(CONNECTION_ID())", ""},
		{"SELECT 'unterminated CONNECTION_ID()", ""},
		{"SELECT!0(CONNECTION_ID()", ""}, // a parenthesis left open
	}
	for _, c := range cases {
		got, ok := RewriteGatewayIDs(c.in, false, 42, pl)
		if !ok {
			got = ""
		}
		if got != c.want {
			t.Errorf("RewriteGatewayIDs(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestGatewayIDsFlag(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for sql, want := range map[string]bool{
		"SELECT CONNECTION_ID() + 1":                                       true,
		"SELECT * FROM information_schema.PROCESSLIST":                     true,
		"SELECT * FROM `information_schema`.`PROCESSLIST`":                 true,
		"SELECT 1; SELECT ID FROM information_schema.processlist":          true,
		"SELECT 'CONNECTION_ID()' FROM t":                                  false,
		"SELECT processlist FROM t":                                        false,
		"SELECT * FROM performance_schema.session_connect_attrs":           true,
		"SELECT * FROM performance_schema.`session_account_connect_attrs`": true,
		"UPDATE t SET a = 1 WHERE id = 3":                                  false,
	} {
		if got := c.Classify(sql).GatewayIDs; got != want {
			t.Errorf("Classify(%q).GatewayIDs = %v, want %v", sql, got, want)
		}
	}
}

// FuzzRewriteGatewayIDs checks that a rewrite never panics, changes text
// only where it found CONNECTION_ID() or PROCESSLIST, and leaves a text
// that still lexes to its end.
func FuzzRewriteGatewayIDs(f *testing.F) {
	for _, s := range []string{
		"SELECT CONNECTION_ID(), NOW()", "SELECT ID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()",
		"SELECT p.ID FROM `information_schema`.`processlist` p", "SET @c = CONNECTION_ID(); SELECT 1",
		"SELECT 'a\\'', CONNECTION_ID() c", "INSERT INTO t VALUES (CONNECTION_ID(), (SELECT 1))",
	} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, sql string, noBackslash bool) {
		out, ok := RewriteGatewayIDs(sql, noBackslash, 42, func(GatewayTable) string { return "SELECT 7 AS ID" })
		if !ok {
			return
		}
		if out == sql {
			return
		}
		l := lexer{s: out, noBackslash: noBackslash}
		for tok := l.next(); tok.kind != tkEOF; tok = l.next() {
		}
		if l.unterminated {
			t.Fatalf("RewriteGatewayIDs(%q) = %q: does not lex to its end", sql, out)
		}
	})
}
