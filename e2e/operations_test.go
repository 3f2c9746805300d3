package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/metricstest"
)

// opsYAML is a gateway config over the shared MariaDB with extra top-level
// keys, users and pool settings.
func opsYAML(top, users, pool string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
%s
users:
  - {user: %s, password: %s}
%s
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {%s}
`, logLevel(), top, appUser, appPass, users, backendUser, backendPass, shared.db.Addr(), pool)
}

// forIOLoops runs fn as subtests, name/io_loops=0 and name/io_loops=1:
// with the gateway's sessions on goroutines and on an io_uring loop
// (which falls back to goroutines where the kernel refuses io_uring).
func forIOLoops(t *testing.T, name string, fn func(t *testing.T, loops int)) {
	if name != "" {
		name += "/"
	}
	for _, loops := range []int{0, 1} {
		t.Run(fmt.Sprintf("%sio_loops=%d", name, loops), func(t *testing.T) { fn(t, loops) })
	}
}

func dsnFor(addr, user, pass string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, pass, "tcp", addr, testDB
	c.Timeout = 5 * time.Second
	c.InterpolateParams = true
	return c.FormatDSN()
}

func TestShowGateway(t *testing.T) {
	db := gw(t)
	db.SetMaxOpenConns(1)
	// Everyone's sessions, the backends and the backend accounts are for
	// the gateway's admins only.
	for _, q := range []string{"SHOW GATEWAY BACKENDS", "SHOW GATEWAY POOLS", "SHOW GATEWAY SESSIONS"} {
		_, err := db.Exec(q)
		sqlErr(t, err, 1227, "42000")
	}
	adm := open(t, shared.gwDSN(adminUser, adminPass, testDB, nil))
	query := func(q string) (cols []string, rows [][]string) {
		t.Helper()
		r, err := adm.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer r.Close()
		cols, _ = r.Columns()
		for r.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := r.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			row := make([]string, len(cols))
			for i, v := range vals {
				row[i] = v.String
			}
			rows = append(rows, row)
		}
		return cols, rows
	}
	cols, rows := query("SHOW GATEWAY BACKENDS")
	if len(rows) != 1 || cols[1] != "Backend" || rows[0][1] != shared.db.Addr() || rows[0][2] != "primary" || rows[0][3] != "serving" {
		t.Fatalf("SHOW GATEWAY BACKENDS: %v %v", cols, rows)
	}
	_, rows = query("SHOW GATEWAY POOLS")
	if len(rows) == 0 || rows[0][1] != shared.db.Addr() || rows[0][2] != "backend" {
		t.Fatalf("SHOW GATEWAY POOLS: %v", rows)
	}
	mustExec(t, db, "SET @pin = 1")
	// The session books its pin right after the OK reached the client:
	// look again for a moment.
	found := false
	for deadline := time.Now().Add(2 * time.Second); !found && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, rows = query("show gateway sessions")
		for _, r := range rows {
			if r[1] == appUser && strings.Contains(r[5], "user_var") && r[6] == shared.db.Addr() {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("SHOW GATEWAY SESSIONS does not show this session pinned by a user variable: %v", rows)
	}
	_, err := adm.Exec("SHOW GATEWAY NONSENSE")
	sqlErr(t, err, 1064, "42000")
}

// TestReloadUnderLoad: pool size, timeouts and users change while clients
// run statements, without a client error.
func TestReloadUnderLoad(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS reload_load", "CREATE TABLE reload_load (id INT PRIMARY KEY, n INT)", "INSERT INTO reload_load VALUES (1, 0)")
	before := opsYAML("", "", "size: 4, min_idle: 1, acquire_timeout: 10s")
	srv := startTestGateway(t, "gateway-reload", before)
	addr := srv.Addr().String()
	var dbs []*sql.DB
	for i := 0; i < 8; i++ {
		db := open(t, dsnFor(addr, appUser, appPass))
		db.SetMaxOpenConns(1)
		dbs = append(dbs, db)
	}
	l := startLoad(dbs, func(db *sql.DB) error {
		if _, err := db.Exec("UPDATE reload_load SET n = n + 1 WHERE id = 1"); err != nil {
			return err
		}
		var n int
		return db.QueryRow("SELECT n FROM reload_load WHERE id = 1").Scan(&n)
	})
	time.Sleep(500 * time.Millisecond)
	after, err := config.Parse([]byte(opsYAML("", "  - {user: second, password: pw2}", "size: 8, min_idle: 2, acquire_timeout: 5s, idle_timeout: 1m")))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(after); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	l.stop()
	if l.failed.Load() != 0 || l.ok.Load() == 0 {
		t.Fatalf("reload under load: %d ok, %d failed (first: %v)", l.ok.Load(), l.failed.Load(), l.firstErr.Load())
	}
	t.Logf("reload under load: %d statements, none failed", l.ok.Load())
	for _, p := range srv.PoolStats() {
		if !p.FoundRows && p.Size != 8 {
			t.Errorf("pool of %s: size %d after the reload, want 8", p.Backend, p.Size)
		}
	}
	if err := open(t, dsnFor(addr, "second", "pw2")).Ping(); err != nil {
		t.Fatalf("user added by the reload: %v", err)
	}
}

// TestDrainWithOpenTransaction: on shutdown an idle session is closed at
// once, a session in a transaction may still commit it, new clients are
// refused, and the drain is clean.
func TestDrainWithOpenTransaction(t *testing.T) {
	forIOLoops(t, "", testDrainWithOpenTransaction)
}

func testDrainWithOpenTransaction(t *testing.T, loops int) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS drain_tx", "CREATE TABLE drain_tx (id INT PRIMARY KEY)")
	srv := startTestGateway(t, "gateway-drain", opsYAML(fmt.Sprintf("drain_timeout: 20s\nio_loops: %d", loops), "", "size: 4"))
	addr := srv.Addr().String()
	ctx := context.Background()
	idleDB := open(t, dsnFor(addr, appUser, appPass))
	idle, err := idleDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if err := idle.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	txDB := open(t, dsnFor(addr, appUser, appPass))
	tx, err := txDB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO drain_tx VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var shutdownErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		shutdownErr = srv.Shutdown(sctx)
	}()
	// The drain closes idle sessions at once: within 5 s however loaded
	// the machine is.
	for deadline := time.Now().Add(5 * time.Second); idle.PingContext(ctx) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Error("an idle session survived the shutdown")
			break
		}
	}
	if c, err := sql.Open("mysql", dsnFor(addr, appUser, appPass)); err == nil {
		if err := c.Ping(); err == nil {
			t.Error("a new client was accepted during the drain")
		}
		c.Close()
	}
	// The transaction can still finish.
	if _, err := tx.Exec("INSERT INTO drain_tx VALUES (2)"); err != nil {
		t.Fatalf("statement in the open transaction during the drain: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("COMMIT during the drain: %v", err)
	}
	wg.Wait()
	if shutdownErr != nil {
		t.Fatalf("drain with a transaction that committed in time: %v", shutdownErr)
	}
	var n int
	if err := direct(t).QueryRow("SELECT COUNT(*) FROM drain_tx").Scan(&n); err != nil || n != 2 {
		t.Fatalf("committed rows: %d (%v), want 2", n, err)
	}
}

// TestConnectionLimits: max_client_connections gives 1040, a user's
// max_connections 1203; closing a connection frees its slot.
func TestConnectionLimits(t *testing.T) {
	srv := startTestGateway(t, "gateway-limits", opsYAML("max_client_connections: 3", "  - {user: capped, password: pw, max_connections: 2}", "size: 4"))
	addr := srv.Addr().String()
	// connect opens one client connection; closing the returned pool
	// closes it.
	connect := func(user, pass string) (*sql.DB, error) {
		db := open(t, dsnFor(addr, user, pass))
		db.SetMaxIdleConns(1)
		return db, db.Ping()
	}
	c1, err := connect("capped", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connect("capped", "pw"); err != nil {
		t.Fatal(err)
	}
	_, err = connect("capped", "pw")
	sqlErr(t, err, 1203, "42000")
	// The refused connection leaves its slot once the gateway has closed
	// it, just after the client read the error.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		db, err := connect(appUser, appPass)
		if err == nil {
			break
		}
		db.Close()
		if time.Now().After(deadline) {
			t.Fatalf("third connection, another user: %v", err)
		}
	}
	_, err = connect(appUser, appPass)
	sqlErr(t, err, 1040, "08004")
	// Closing a connection frees its slot (once the gateway has seen the
	// client leave).
	c1.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := connect("capped", "pw"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("slot not freed after a close: %v", err)
		}
	}
}

// scrapeCounter sums the samples of a counter family whose labels include
// want.
func scrapeCounter(t *testing.T, h http.Handler, family string, want map[string]string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams := metricstest.Parse(t, rec.Body.String())
	if fams[family] == nil {
		t.Fatalf("/metrics has no %s", family)
	}
	return metricstest.Sum(fams, family, want)
}

// TestMetricsAndStatusUnderLoad scrapes /metrics during a load and checks
// the counters move, then reads /debug/status as HTML and JSON.
func TestMetricsAndStatusUnderLoad(t *testing.T) {
	h := shared.gw.HTTPHandler()
	primary := map[string]string{"route": "primary", "outcome": "ok"}
	before := scrapeCounter(t, h, "directgate_statements_total", primary)
	latBefore := scrapeCounter(t, h, "directgate_statement_duration_seconds", map[string]string{"route": "primary"})
	var dbs []*sql.DB
	for i := 0; i < 4; i++ {
		db := gw(t)
		db.SetMaxOpenConns(1)
		dbs = append(dbs, db)
	}
	l := startLoad(dbs, func(db *sql.DB) error {
		var one int
		return db.QueryRow("SELECT 1").Scan(&one)
	})
	// Statements done before each scrape, counted rather than timed
	// (the first ones include the logins).
	okAtLeast := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); l.ok.Load() < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d statements of the load in 10 s, want %d", l.ok.Load(), n)
			}
		}
	}
	okAtLeast(20)
	during := scrapeCounter(t, h, "directgate_statements_total", primary)
	okAtLeast(l.ok.Load() + 20)
	l.stop()
	// A statement is counted right after its answer reached the client:
	// the last ones may land a moment after the load stopped.
	var after, latAfter float64
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		after = scrapeCounter(t, h, "directgate_statements_total", primary)
		latAfter = scrapeCounter(t, h, "directgate_statement_duration_seconds", map[string]string{"route": "primary"})
		if ok := float64(l.ok.Load()); after-before >= ok && latAfter-latBefore >= ok || time.Now().After(deadline) {
			break
		}
	}
	if !(before < during && during < after) || after-before < float64(l.ok.Load()) {
		t.Fatalf("statements_total: %v, %v during, %v after %d statements", before, during, after, l.ok.Load())
	}
	if latAfter-latBefore < float64(l.ok.Load()) {
		t.Fatalf("latency histogram counted %v of %d statements", latAfter-latBefore, l.ok.Load())
	}
	if n := scrapeCounter(t, h, "directgate_pool_max_connections", map[string]string{"backend": shared.db.Addr()}); n < 1 {
		t.Fatalf("pool size metric: %v", n)
	}

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/status", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), shared.db.Addr()) || !strings.Contains(rec.Body.String(), "primary") {
		t.Fatalf("/debug/status HTML: %d, backend row missing", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/status?format=json", nil))
	var status struct {
		Ready    bool `json:"ready"`
		Clusters []struct {
			Primary  string `json:"primary"`
			Backends []struct {
				Addr  string `json:"addr"`
				Role  string `json:"role"`
				Pools []struct {
					Size int `json:"size"`
				} `json:"pools"`
			} `json:"backends"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &status); err != nil {
		t.Fatalf("/debug/status JSON: %v", err)
	}
	if !status.Ready || len(status.Clusters) != 1 || status.Clusters[0].Primary != shared.db.Addr() ||
		len(status.Clusters[0].Backends) != 1 || status.Clusters[0].Backends[0].Role != "primary" || len(status.Clusters[0].Backends[0].Pools) == 0 {
		t.Fatalf("/debug/status JSON: %s", rec.Body.String())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Fatalf("/readyz: %d %s", rec.Code, rec.Body.String())
	}
}
