package querypath

import (
	"reflect"
	"strings"
	"testing"
)

// tempTableExtra are statements the Vitess parser reads, on top of the table
// cases, for TestTempTablesLexerAgreesWithParser: the lexer's reading of
// CREATE TEMPORARY TABLE, DROP TABLE, RENAME TABLE and ALTER TABLE (used when
// the parser fails) must give the parser's names.
var tempTableExtra = []string{
	"CREATE TEMPORARY TABLE IF NOT EXISTS `db`.`t.x` (a int, b varchar(10) DEFAULT 'x;y')",
	"CREATE TEMPORARY TABLE t1 (id INT PRIMARY KEY) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
	"CREATE TEMPORARY TABLE t REPLACE SELECT * FROM u WHERE a = 'RENAME TO x'",
	"CREATE TEMPORARY TABLE `1x` LIKE `2y`",
	"CREATE TEMPORARY TABLE ks.`select` (a int)",
	"CREATE TEMPORARY TABLE `` (a int)",
	"CREATE TABLE t (a int)",
	"CREATE TABLE IF NOT EXISTS db.t LIKE u",
	"DROP TABLE `a`.`b`, `c.d`, e.f",
	"DROP TEMPORARY TABLE IF EXISTS `x``y`",
	"DROP TABLE IF EXISTS a, b CASCADE",
	"ALTER TABLE db.t ENGINE=InnoDB, RENAME TO db.u",
	"ALTER TABLE t ADD INDEX i (a), ALGORITHM=INPLACE, LOCK=NONE",
	"ALTER TABLE t PARTITION BY HASH (a) PARTITIONS 4",
	"ALTER TABLE t RENAME COLUMN a TO b, RENAME TO u",
	"ALTER TABLE t ADD COLUMN c int AFTER b, RENAME AS `u.v`",
	"ALTER TABLE t COMMENT 'RENAME TO x'",
	"ALTER TABLE `rename` RENAME `rename2`",
	"RENAME TABLE `a` TO `b`, `b` TO `c`, db1.c TO db2.c",
	"RENAME TABLE t TO `x.y`.z",
}

// tempTablesAgree compares, for one statement that the parser reads, the
// names the lexer reads with those of the AST. It returns "" when they agree
// or the statement does not apply, and whether it compared anything.
func tempTablesAgree(c *Classifier, sql string) (msg string, compared bool) {
	if hasExecComment(sql) {
		sql = expandComments(sql, false)
	}
	var st stmt
	scanStmt(&st, sql, 0, false)
	if st.more || st.unterminated || st.count == 0 || st.compound {
		return "", false
	}
	node, ok := c.parse(st.text())
	if !ok {
		return "", false
	}
	var lexed, parsed Route
	known := lexTempTables(&st, &lexed)
	astTempTables(node, &parsed)
	if !known {
		// The lexer gives up where the parser reads the names: the session
		// would only stay pinned. Only a table creation or rename may be
		// unreadable.
		if parsed.CreatedTemp == nil && parsed.Renames == nil && !st.kw(0, "CREATE") && !st.kw(0, "ALTER") && !st.kw(0, "RENAME") {
			return "lexer gave up on a statement that creates and renames nothing", true
		}
		return "", true
	}
	if lexed.Dropped != nil && !reflect.DeepEqual(lexed.Dropped, parsed.Dropped) {
		// A DROP the lexer cannot read is left without names (safe), but
		// names it gives must be right.
		return "Dropped: lexer " + strings.Join(lexed.Dropped, ",") + ", parser " + strings.Join(parsed.Dropped, ","), true
	}
	lexed.Dropped, parsed.Dropped = nil, nil
	if !reflect.DeepEqual(lexed, parsed) {
		return "lexer " + describe(lexed) + ", parser " + describe(parsed), true
	}
	return "", true
}

func TestTempTablesLexerAgreesWithParser(t *testing.T) {
	c := classifier(t)
	all := append([]string(nil), tempTableExtra...)
	for _, tc := range classifyCases {
		all = append(all, tc.sql)
	}
	compared := 0
	for _, sql := range all {
		msg, ok := tempTablesAgree(c, sql)
		if msg != "" {
			t.Errorf("%q: %s", sql, msg)
		}
		if ok {
			compared++
		}
	}
	if compared < 60 {
		t.Errorf("only %d statements compared", compared)
	}
	t.Logf("%d statements compared", compared)
}

// FuzzTempTablesLexerAgreesWithParser runs the comparison of
// TestTempTablesLexerAgreesWithParser on any input.
func FuzzTempTablesLexerAgreesWithParser(f *testing.F) {
	for _, s := range tempTableExtra {
		f.Add(s)
	}
	for _, tc := range classifyCases {
		f.Add(tc.sql)
	}
	c := classifier(f)
	f.Fuzz(func(t *testing.T, sql string) {
		if msg, _ := tempTablesAgree(c, sql); msg != "" {
			t.Fatalf("%q: %s", sql, msg)
		}
	})
}

// canonicalTableName reports whether s is a canonical table name: one or two
// parts separated by '.', each unquoted (not empty, without '.' or '`') or
// backquoted with '`' doubled because it is empty or holds '.' or '`'.
func canonicalTableName(s string) bool {
	for part := 0; part < 2; part++ {
		if s == "" {
			return false
		}
		var id string
		if s[0] == '`' {
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '`' {
					if i+1 < len(s) && s[i+1] == '`' {
						i++
						continue
					}
					break
				}
			}
			if i >= len(s) {
				return false // unterminated
			}
			id = strings.ReplaceAll(s[1:i], "``", "`")
			if id != "" && !strings.ContainsAny(id, ".`") {
				return false // quoted without need
			}
			s = s[i+1:]
		} else {
			i := strings.IndexByte(s, '.')
			if i < 0 {
				i = len(s)
			}
			id = s[:i]
			if id == "" || strings.IndexByte(id, '`') >= 0 {
				return false
			}
			s = s[i:]
		}
		if s == "" {
			return true
		}
		if s[0] != '.' {
			return false
		}
		s = s[1:]
	}
	return false
}

// checkTempTables checks the invariants of CreatedTemp, Dropped and Renames.
func checkTempTables(t *testing.T, r Route) {
	t.Helper()
	if r.CreatedTemp != nil && len(r.CreatedTemp) == 0 || r.Dropped != nil && len(r.Dropped) == 0 ||
		r.Renames != nil && len(r.Renames) == 0 {
		t.Fatalf("empty, non-nil name list: %s", describe(r))
	}
	var all []string
	all = append(all, r.CreatedTemp...)
	all = append(all, r.Dropped...)
	for _, p := range r.Renames {
		all = append(all, p[0], p[1])
	}
	for _, n := range all {
		if !canonicalTableName(n) {
			t.Fatalf("table name %q is not canonical: %s", n, describe(r))
		}
	}
	if r.CreatedTemp != nil && r.Pin&PinTempTable == 0 {
		t.Fatalf("CreatedTemp without PinTempTable: %s", describe(r))
	}
	if r.Pin&PinTempTable != 0 && r.CreatedTemp == nil && r.Pin&PinUnreplayable == 0 {
		t.Fatalf("PinTempTable without a name or PinUnreplayable: %s", describe(r))
	}
	if r.Dropped != nil && (r.Pin|r.Unpin)&PinTempTable == 0 {
		t.Fatalf("Dropped without PinTempTable in Unpin: %s", describe(r))
	}
}

func TestCanonicalName(t *testing.T) {
	for _, tc := range []struct{ db, table, want string }{
		{"", "t", "t"},
		{"db", "t", "db.t"},
		{"Db", "T", "Db.T"},
		{"", "a.b", "`a.b`"},
		{"d.b", "t", "`d.b`.t"},
		{"db", "a`b", "db.`a``b`"},
		{"", "`", "````"},
		{"", "", "``"},
		{"", "a b", "a b"},
	} {
		got := canonicalName(tc.db, tc.table)
		if got != tc.want {
			t.Errorf("canonicalName(%q, %q) = %q, want %q", tc.db, tc.table, got, tc.want)
		}
		if !canonicalTableName(got) {
			t.Errorf("canonicalName(%q, %q) = %q, not canonical", tc.db, tc.table, got)
		}
	}
	for _, s := range []string{"", ".", "a.", ".a", "a.b.c", "`a`", "`a", "a`b", "`a.b`x", "``.``.``"} {
		if canonicalTableName(s) {
			t.Errorf("canonicalTableName(%q) = true", s)
		}
	}
}
