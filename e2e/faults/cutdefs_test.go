package faults

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/e2e/faultproxy"
)

// TestDefinitionsCutMidway: the link from MariaDB to the gateway closes
// within the definitions of an answer (a prepared statement's 300
// parameters, a result's 300 columns), after the client got the first
// packets: the client's connection is closed at once, a clean connection
// error. Found by TestSoak: the gateway wrote error 1158 there, which the
// client read as one more definition: a prepare then waited for the rest
// forever (go-sql-driver has no read timeout by default), a query failed
// with io.EOF from the misread column.
func TestDefinitionsCutMidway(t *testing.T) {
	needStack(t)
	params := "SELECT ?" + strings.Repeat(", ?", 299)
	columns := "SELECT 1 AS c1" + strings.Repeat(", 1 AS c", 299)
	for _, tc := range []struct {
		name string
		run  func(*sql.Conn) error
	}{
		{"Prepare", func(c *sql.Conn) error {
			st, err := c.PrepareContext(context.Background(), params)
			if err == nil {
				st.Close()
			}
			return err
		}},
		{"Columns", func(c *sql.Conn) error {
			rs, err := c.QueryContext(context.Background(), columns)
			if err == nil {
				for rs.Next() {
				}
				err = rs.Err()
				rs.Close()
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := link(t, "gateway-mariadb")
			srv := startGateway(t, "cutdefs", "{size: 1, min_idle: 0, acquire_timeout: 5s}", "{interval: 200ms, timeout: 500ms}", l.Addr())
			cfg := mysql.NewConfig()
			cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = appUser, appPass, "tcp", srv.Addr().String(), testDB
			cfg.Timeout, cfg.ReadTimeout = 5*time.Second, 5*time.Second
			db, err := sql.Open("mysql", cfg.FormatDSN())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			conn, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(context.Background(), "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			// The answer is over 6 KiB of definitions: the cut falls
			// within them whatever the gateway sent before.
			if err := l.CutAfter(faultproxy.Down, 2<<10); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = tc.run(conn)
			took := time.Since(start)
			t.Logf("cut after 2 KiB: %v after %v", err, took.Round(time.Millisecond))
			var me *mysql.MySQLError
			switch {
			case err == nil:
				t.Fatal("the cut answer looked complete")
			case took > 2*time.Second:
				t.Errorf("the client waited %v (its read timeout is 5 s): the gateway neither finished the answer nor closed the connection", took.Round(time.Millisecond))
			case errors.As(err, &me):
				t.Errorf("the client read an error packet in the definitions: %v", err)
			case !errors.Is(err, mysql.ErrInvalidConn) && !errors.Is(err, driver.ErrBadConn):
				t.Errorf("the client did not see its connection closed but %T %v (a misread definition)", err, err)
			}
			l.Clear()
			t.Logf("serving again %v after the link came back", waitServes(t, db).Round(time.Millisecond))
		})
	}
}
