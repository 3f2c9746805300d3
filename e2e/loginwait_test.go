package e2e

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TestLoginPoolWait pins down issue 35's login hang: through a gateway
// with pool.size 2 and acquire_timeout 30s, clients logging in with a
// default database while both connections were busy waited for one until
// handshake_timeout closed their socket, with no error packet ("unexpected
// EOF", "invalid connection"). Now a login whose database must be checked
// on a backend gets error 1040 naming the pool within what is left of
// handshake_timeout; one whose database a login of the same backend
// account found a moment ago is let in without a pooled connection.
func TestLoginPoolWait(t *testing.T) {
	const otherDB = "e2e_loginwait"
	mustExec(t, direct(t), "CREATE DATABASE IF NOT EXISTS "+otherDB)
	forIOLoops(t, "", func(t *testing.T, loops int) {
		const handshake = 2 * time.Second
		srv := startTestGateway(t, "loginwait", "handshake_timeout: 2s\n"+clusterYAML(loops, backendUser, backendPass,
			"{size: 2, min_idle: 0, acquire_timeout: 30s}", "hot_row: {max_concurrency: 0}"))
		addr := srv.Addr().String()
		db := open(t, dsnFor(addr, appUser, appPass))
		ctx := context.Background()
		// Both pooled connections held by open transactions.
		var txs []*sql.Tx
		for range 2 {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec("SELECT 1 FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			txs = append(txs, tx)
		}

		// A database no login checked yet: 1040 within handshake_timeout.
		cfg, err := mysql.ParseDSN(dsnFor(addr, appUser, appPass))
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = otherDB
		start := time.Now()
		c, err := open(t, cfg.FormatDSN()).Conn(ctx)
		took := time.Since(start)
		if err == nil {
			c.Close()
			t.Fatal("the login got in with both pooled connections busy and its database unchecked")
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			t.Fatalf("after %v: want MySQL error 1040, got %T %v (a silent close)", took, err, err)
		}
		if me.Number != 1040 || string(me.SQLState[:]) != "08004" || !strings.Contains(me.Message, "handshake_timeout") {
			t.Fatalf("after %v: got %d (%s) %q; want 1040 (08004) naming handshake_timeout", took, me.Number, me.SQLState, me.Message)
		}
		if took > handshake+time.Second {
			t.Errorf("the login's error came after %v, past handshake_timeout %v", took, handshake)
		}
		t.Logf("login to an unchecked database: %v after %v", me, took.Round(time.Millisecond))

		// The test database was found by the logins above: no pooled
		// connection is needed to log in to it.
		fresh := open(t, dsnFor(addr, appUser, appPass))
		c, err = fresh.Conn(ctx)
		if err != nil {
			t.Fatalf("login to a database checked a moment ago, with both pooled connections busy: %v", err)
		}
		defer c.Close()
		// Once the two connections are given back, the session runs in
		// its database.
		for _, tx := range txs {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
		}
		var name string
		if err := c.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name); err != nil || name != testDB {
			t.Fatalf("SELECT DATABASE() = %q, %v; want %q", name, err, testDB)
		}
	})
}
