package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// processRows reads SHOW [FULL] PROCESSLIST: id -> user, info.
func processRows(t *testing.T, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string) map[int64][2]string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if strings.Join(cols, ",") != "Id,User,Host,db,Command,Time,State,Info,Progress" {
		t.Fatalf("%s: columns %v", q, cols)
	}
	out := map[int64][2]string{}
	for rows.Next() {
		var id int64
		var user, host, command string
		var db, state, info sql.NullString
		var secs int64
		var progress float64
		if err := rows.Scan(&id, &user, &host, &db, &command, &secs, &state, &info, &progress); err != nil {
			t.Fatal(err)
		}
		out[id] = [2]string{user, info.String}
	}
	return out
}

// TestTenantIsolation is the reproduction: alice (app) runs a
// slow statement; bob (nopass), on the same backend account, sees only
// his own sessions, gets 1095 for every KILL form, and alice's statement
// runs on. CONNECTION_ID() is the gateway's id, the same on every call.
func TestTenantIsolation(t *testing.T) {
	ctx := context.Background()
	alice := login(t)
	aliceID := int64(alice.Greeting.ConnectionID)
	alice.ResetSeq()
	if err := alice.WriteCommand(append([]byte{0x03}, "SELECT 'alice secret query', SLEEP(3)"...)); err != nil {
		t.Fatal(err)
	}
	bobDB := open(t, shared.gwDSN("nopass", "", "", nil))
	bobDB.SetMaxOpenConns(1)
	bob, err := bobDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	var bobID int64
	for i := 0; i < 3; i++ {
		var id int64
		if err := bob.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if i > 0 && id != bobID {
			t.Fatalf("CONNECTION_ID() changed from %d to %d within one session", bobID, id)
		}
		bobID = id
	}
	time.Sleep(200 * time.Millisecond) // alice's statement is running
	for _, q := range []string{"SHOW PROCESSLIST", "SHOW FULL PROCESSLIST"} {
		rows := processRows(t, bob, q)
		if _, ok := rows[aliceID]; ok {
			t.Errorf("bob's %s shows alice's session: %v", q, rows)
		}
		for id, r := range rows {
			if r[0] != "nopass" || strings.Contains(r[1], "alice secret") {
				t.Errorf("bob's %s shows %d: %v", q, id, r)
			}
		}
		if _, ok := rows[bobID]; !ok {
			t.Errorf("bob's %s lacks bob's own session %d: %v", q, bobID, rows)
		}
	}
	for _, q := range []string{
		fmt.Sprintf("KILL %d", aliceID), fmt.Sprintf("KILL QUERY %d", aliceID), fmt.Sprintf("KILL CONNECTION %d", aliceID),
		fmt.Sprintf("KILL QUERY %d+0", aliceID), fmt.Sprintf("KILL (%d)", aliceID), "KILL USER " + appUser,
		fmt.Sprintf("SELECT 1; KILL QUERY %d", aliceID), fmt.Sprintf("PREPARE k FROM 'KILL QUERY %d'", aliceID),
	} {
		_, err := bob.ExecContext(ctx, q)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1095 {
			t.Errorf("bob: %s: %v, want error 1095", q, err)
		}
	}
	// The admin sees alice's statement.
	adm := open(t, shared.gwDSN(adminUser, adminPass, "", nil))
	rows := processRows(t, adm, "SHOW FULL PROCESSLIST")
	if r, ok := rows[aliceID]; !ok || r[0] != appUser || !strings.Contains(r[1], "alice secret query") {
		t.Errorf("the admin's SHOW FULL PROCESSLIST: alice's line %v (all: %v)", r, rows)
	}
	// alice's statement was not interrupted: SLEEP answers 0.
	p, err := alice.ReadPacket()
	if err != nil || p[0] != 2 { // two columns
		t.Fatalf("alice's answer: %x %v", p, err)
	}
	for {
		p, err := alice.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if p[0] == 0xfe || p[0] == 0xff {
			if p[0] == 0xff {
				t.Fatalf("alice's statement failed: %x", p)
			}
			break
		}
		if strings.HasPrefix(string(p), "\x12alice secret query") && !strings.HasSuffix(string(p), "\x010") {
			t.Fatalf("alice's SLEEP was interrupted: row %q", p)
		}
	}
}
