package faults

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/e2e/faultproxy"
)

// TestResultCutMidway: the link from MariaDB to the gateway closes after
// 64 KiB of a 2 MB result: the client reads whole rows, then a clean
// MySQL error (1158, the statement may not have completed), never a
// malformed row or a result that looks complete; the gateway serves on
// fresh connections afterwards.
func TestResultCutMidway(t *testing.T) {
	needStack(t)
	l := link(t, "gateway-mariadb")
	srv := startGateway(t, "cut", "{size: 4, min_idle: 0, acquire_timeout: 5s}", "{interval: 200ms, timeout: 500ms}", l.Addr())
	db := open(t, srv.Addr().String())
	if _, err := db.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := l.CutAfter(faultproxy.Down, 64<<10); err != nil {
		t.Fatal(err)
	}
	const rows, width = 2000, 1000
	start := time.Now()
	rs, err := db.Query("SELECT seq, REPEAT('x', 1000) FROM seq_1_to_2000")
	n := 0
	if err == nil {
		for rs.Next() {
			var id int
			var s string
			if err := rs.Scan(&id, &s); err != nil {
				t.Fatalf("row %d: %v", n, err)
			}
			if id != n+1 || len(s) != width || strings.Trim(s, "x") != "" {
				t.Fatalf("row %d is malformed: id %d, %d bytes", n, id, len(s))
			}
			n++
		}
		err = rs.Err()
		rs.Close()
	}
	took := time.Since(start)
	t.Logf("cut after 64 KiB: %d whole rows, then %v, after %v", n, err, took.Round(time.Millisecond))
	if n == rows || err == nil {
		t.Fatalf("the cut result looked complete: %d rows, error %v", n, err)
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1158 {
		t.Errorf("the cut result ended with %T %v, want MySQL error 1158", err, err)
	}
	l.Clear()
	t.Logf("serving again %v after the link came back", waitServes(t, db).Round(time.Millisecond))
}
