package e2e

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// preparedOnServer is MariaDB's count of statements prepared now.
func preparedOnServer(t *testing.T, root *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPrepareAgainClosesOldCopy pins down a leak make soak found: a
// client's COM_STMT_PREPARE always runs on a backend connection, and when
// that connection already had the same text prepared the gateway replaced
// its record of the statement without closing the older copy on the
// server. go-sql-driver prepares, executes and closes for every Exec with
// arguments, so each left a statement on MariaDB until
// max_prepared_stmt_count (16382) refused every prepare of the server,
// direct clients' too.
func TestPrepareAgainClosesOldCopy(t *testing.T) {
	root := direct(t)
	root.SetMaxOpenConns(1)
	mustExec(t, root, "CREATE TABLE IF NOT EXISTS stmtleak (id INT PRIMARY KEY)")
	// Without InterpolateParams: every Exec with arguments is
	// prepare, execute, close.
	cfg, err := mysql.ParseDSN(shared.gwDSN(appUser, appPass, testDB, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = false
	db := open(t, cfg.FormatDSN())
	db.SetMaxOpenConns(2)
	before := preparedOnServer(t, root)
	const n = 500
	for i := range n {
		if _, err := db.Exec("INSERT INTO stmtleak VALUES (?) ON DUPLICATE KEY UPDATE id = id", i); err != nil {
			t.Fatal(err)
		}
	}
	after := preparedOnServer(t, root)
	t.Logf("statements prepared on MariaDB: %d before, %d after %d prepare/execute/close through the gateway", before, after, n)
	if after-before > 16 {
		t.Fatalf("%d statements left prepared on MariaDB after %d prepare/execute/close cycles (at most one per pooled connection expected)", after-before, n)
	}
}
