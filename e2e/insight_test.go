package e2e

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querystats"
	"github.com/go-sql-driver/mysql"
)

// insightYAML is a gateway with one pooled connection per backend and
// the top-level keys in top (query_stats, query_rules).
func insightYAML(pool, top string) string {
	return clusterYAML(0, backendUser, backendPass, pool) + top
}

// queryRows reads SHOW GATEWAY QUERIES (or RULES) as maps by column name.
func queryRows(t *testing.T, adm *sql.DB, stmt string) []map[string]string {
	t.Helper()
	rows, err := adm.Query(stmt)
	if err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for i, c := range cols {
			m[c] = vals[i].String
		}
		out = append(out, m)
	}
	return out
}

// byText indexes SHOW GATEWAY QUERIES rows by digest text.
func byText(rows []map[string]string) map[string]map[string]string {
	m := map[string]map[string]string{}
	for _, r := range rows {
		m[r["digest_text"]] = r
	}
	return m
}

func TestQueryInsightDigests(t *testing.T) {
	srv := startTestGateway(t, "insight", insightYAML("{size: 8}", ""))
	addr := srv.Addr().String()
	db := open(t, dsnFor(addr, appUser, appPass)) // text protocol (InterpolateParams)
	adm := open(t, dsnFor(addr, adminUser, adminPass))
	mustExec(t, db, "DROP TABLE IF EXISTS insight_t", "CREATE TABLE insight_t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO insight_t VALUES (1, 10), (2, 20), (3, 30)")
	mustExec(t, adm, "SHOW GATEWAY QUERIES RESET")
	mustExec(t, db,
		"SELECT v FROM insight_t WHERE id = 1",
		"select v from insight_t where id=2 /* a comment */",
		"SELECT  v\nFROM insight_t WHERE id = 3 -- trailing\n",
		"SELECT v FROM insight_t WHERE id IN (1, 2, 3)",
		"SELECT v FROM insight_t WHERE id IN (2)",
		"SELECT id FROM insight_t WHERE id = 1")
	// The binary protocol: the same statement, prepared.
	bin := open(t, strings.Replace(dsnFor(addr, appUser, appPass), "interpolateParams=true", "interpolateParams=false", 1))
	for i := 1; i <= 2; i++ {
		var v int
		if err := bin.QueryRow("SELECT v FROM insight_t WHERE id = ?", i).Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	// 32 clients, each 20 good and 20 failing statements.
	var wg sync.WaitGroup
	for c := 0; c < 32; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				var v int
				if err := db.QueryRow(fmt.Sprintf("SELECT v + 0 FROM insight_t WHERE id = %d", 1+i%3)).Scan(&v); err != nil {
					t.Error(err)
				}
				if _, err := db.Exec(fmt.Sprintf("SELECT missing_col FROM insight_t WHERE id = %d", i)); err == nil {
					t.Error("a missing column went through")
				}
			}
		}()
	}
	wg.Wait()
	// A statement is recorded as its answer ends, a moment after the
	// client may have it: the last ones are polled for.
	var got map[string]map[string]string
	waitUntil(t, func() bool {
		got = byText(queryRows(t, adm, "SHOW GATEWAY QUERIES ORDER BY count"))
		r := got["select missing_col from insight_t where id = ?"]
		return r != nil && r["count"] == "640" && got["select v + ? from insight_t where id = ?"]["count"] == "640"
	}, func() string { return fmt.Sprintf("the counts did not reach 640: %v", got) })
	want := map[string]string{
		"select v from insight_t where id = ?":           "5", // 3 text + 2 binary
		"select v from insight_t where id in (...)":      "2",
		"select id from insight_t where id = ?":          "1",
		"select v + ? from insight_t where id = ?":       "640",
		"select missing_col from insight_t where id = ?": "640",
	}
	for text, count := range want {
		r := got[text]
		if r == nil || r["count"] != count {
			t.Errorf("%q: %v, want count %s (all: %v)", text, r, count, keys(got))
		}
	}
	if r := got["select missing_col from insight_t where id = ?"]; r == nil || r["errors"] != "640" || r["error_codes"] != "1054:640" {
		t.Errorf("errors: %v", r)
	}
	if r := got["select v from insight_t where id = ?"]; r == nil || r["user"] != appUser || r["database"] != testDB || r["cluster"] != "main" ||
		r["role"] != "primary" || r["rows_sent"] != "5" || r["fingerprint"] == "" || r["example"] == "" {
		t.Errorf("entry: %v", r)
	}
	if rows := queryRows(t, adm, "SHOW GATEWAY QUERIES ORDER BY errors LIMIT 1"); len(rows) != 1 || rows[0]["digest_text"] != "select missing_col from insight_t where id = ?" {
		t.Errorf("ORDER BY errors LIMIT 1: %v", rows)
	}
	_, err := db.Exec("SHOW GATEWAY QUERIES")
	sqlErr(t, err, 1227, "42000") // admins only
	_, err = adm.Exec("SHOW GATEWAY QUERIES ORDER BY rows")
	sqlErr(t, err, 1064, "42000")
}

func keys(m map[string]map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestQueryInsightEviction(t *testing.T) {
	srv := startTestGateway(t, "insight-evict", insightYAML("{size: 2}", "query_stats: {max_digests: 10}\n"))
	db := open(t, dsnFor(srv.Addr().String(), appUser, appPass))
	for i := 0; i < 40; i++ {
		mustExec(t, db, fmt.Sprintf("SELECT 1 AS c%d", i))
		if d, _ := srv.QueryDigests(querystats.ByCount, 0); len(d) > 10 {
			t.Fatalf("%d digests kept, bound 10", len(d))
		}
	}
	// A statement is recorded after its answer went out: the last one's
	// record may still be on its way.
	var d []querystats.Digest
	var evicted uint64
	waitUntil(t, func() bool {
		d, evicted = srv.QueryDigests(querystats.ByCount, 0)
		return evicted >= 30
	}, func() string { return fmt.Sprintf("%d digests, %d evicted; want 10 and 30", len(d), evicted) })
	if len(d) != 10 || evicted != 30 {
		t.Fatalf("%d digests, %d evicted; want 10 and 30", len(d), evicted)
	}
}

const insightRules = `query_rules:
  - name: no-scan
    match: {pattern: "^select v \\* \\? from insight_t", kind: select, tables: [insight_t], users: [app]}
    deny: "scans go to the reporting replica"
  - name: watch-deletes
    match: {kind: delete, tables: [insight_t]}
    deny: "would refuse"
    dry_run: true
  - name: primary-reads
    match: {pattern: "^select id \\+ ?"}
    route: primary
    priority: 90
    log: true
  - name: cap-time
    match: {pattern: "sleep"}
    timeout: 500ms
  - name: cap-rows
    match: {pattern: "^select a.id from insight_t a"}
    max_rows: 5
`

func TestQueryRules(t *testing.T) {
	srv := startTestGateway(t, "rules", insightYAML("{size: 1}", insightRules))
	addr := srv.Addr().String()
	db := open(t, dsnFor(addr, appUser, appPass))
	db.SetMaxOpenConns(1)
	adm := open(t, dsnFor(addr, adminUser, adminPass))
	mustExec(t, db, "DROP TABLE IF EXISTS insight_t", "CREATE TABLE insight_t (id INT PRIMARY KEY, v INT)")
	for i := 0; i < 10; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO insight_t VALUES (%d, %d)", i, i))
	}
	// deny: the rule's name and message; the statement ran nowhere.
	_, err := db.Exec("SELECT v * 2 FROM insight_t")
	if e := sqlErr(t, err, 1148, "42000"); !strings.Contains(e.Message, "no-scan") || !strings.Contains(e.Message, "scans go to the reporting replica") {
		t.Errorf("deny message: %s", e.Message)
	}
	// The admin is not in users: [app].
	mustExec(t, adm, "SELECT v * 2 FROM insight_t")
	// dry run: counted, not applied.
	mustExec(t, db, "DELETE FROM insight_t WHERE id = 9")
	mustExec(t, db, "SELECT id + 1 FROM insight_t WHERE id = 1")
	// timeout: killed on the backend with MariaDB's own error; the pooled
	// connection serves the next statement.
	start := time.Now()
	_, err = db.Exec("SELECT SLEEP(5) FROM insight_t WHERE id = 1")
	sqlErr(t, err, 1317, "70100")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the timeout took %v", d)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM insight_t").Scan(&n); err != nil || n != 9 {
		t.Fatalf("after the timeout: %d %v", n, err)
	}
	root, err := shared.db.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	waitUntil(t, func() bool {
		var c int
		_ = root.QueryRow("SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'SELECT SLEEP(5)%'").Scan(&c)
		return c == 0
	}, func() string { return "the timed-out statement is still in the processlist" })
	// max_rows: 5 rows, then the error; the connection stays usable.
	rows, err := db.Query("SELECT a.id FROM insight_t a, insight_t b, insight_t c")
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for rows.Next() {
		got++
	}
	err = rows.Err()
	rows.Close()
	if got != 5 {
		t.Errorf("max_rows 5: %d rows", got)
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1317 || !strings.Contains(me.Message, "cap-rows") {
		t.Errorf("max_rows: error %v", err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM insight_t").Scan(&n); err != nil || n != 9 {
		t.Fatalf("after max_rows: %d %v", n, err)
	}
	hits := map[string][2]string{}
	for _, r := range queryRows(t, adm, "SHOW GATEWAY RULES") {
		hits[r["name"]] = [2]string{r["hits"], r["dry_run_hits"]}
	}
	for name, want := range map[string][2]string{"no-scan": {"1", "0"}, "watch-deletes": {"0", "1"}, "primary-reads": {"1", "0"},
		"cap-time": {"1", "0"}, "cap-rows": {"1", "0"}} {
		if hits[name] != want {
			t.Errorf("rule %s: hits, dry-run hits %v, want %v", name, hits[name], want)
		}
	}
}

func TestQueryRulesReload(t *testing.T) {
	yaml := insightYAML("{size: 2}", "")
	srv := startTestGateway(t, "rules-reload", yaml)
	db := open(t, dsnFor(srv.Addr().String(), appUser, appPass))
	db.SetMaxOpenConns(1)
	mustExec(t, db, "SELECT 41 + 1") // the session is open before the reload
	reload := func(top string) {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml + top))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	reload("query_rules: [{name: stop-it, match: {pattern: '^select \\? \\+ \\?$'}, deny: stopped by reload}]\n")
	_, err := db.Exec("SELECT 41 + 1")
	if e := sqlErr(t, err, 1148, "42000"); !strings.Contains(e.Message, "stopped by reload") {
		t.Errorf("message %s", e.Message)
	}
	fresh := open(t, dsnFor(srv.Addr().String(), appUser, appPass))
	_, err = fresh.Exec("SELECT 1 + 2")
	sqlErr(t, err, 1148, "42000")
	reload("")
	mustExec(t, db, "SELECT 41 + 1")
	// A bad rule is refused at load with its position.
	_, err = config.Parse([]byte(yaml + "query_rules: [{name: ok, log: true}, {name: broken, match: {kind: nothing}, deny: x}]\n"))
	if err == nil || !strings.Contains(err.Error(), "query_rules[1] (broken): match.kind") {
		t.Errorf("bad rule: %v", err)
	}
}
