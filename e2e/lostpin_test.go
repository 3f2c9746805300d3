package e2e

import (
	"context"
	"database/sql"
	"encoding/binary"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/wire"
)

// TestStateLostBeforeStatementEndsSession: the connection holding a
// session's transaction can break while the gateway brings it in line
// before the client's statement (here the SET of LAST_INSERT_ID() an
// INSERT needs after another session's insert on the pooled connection).
// The session then ends, as MariaDB ends a client's session whose
// connection it killed. Before, the client got 1158 and the session went
// on without its transaction: its next statements ran in autocommit on
// another connection, and the client's ROLLBACK undid nothing.
func TestStateLostBeforeStatementEndsSession(t *testing.T) {
	root := rootDB(t)
	ctx := context.Background()
	for _, mode := range []struct {
		name string
		mod  func(*mysql.Config)
	}{
		{"text", nil},
		{"prepared", func(c *mysql.Config) { c.InterpolateParams = false }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			mustExec(t, direct(t), "DROP TABLE IF EXISTS lostpin", "CREATE TABLE lostpin (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB")
			srv := startLostpinGateway(t)
			tg := gatewayTarget(srv)
			a, b := tg.session(t, mode.mod), tg.session(t, mode.mod)
			ins := func(c *sql.Conn, v string) error {
				_, err := c.ExecContext(ctx, "INSERT INTO lostpin (v) VALUES (?)", v)
				return err
			}
			// a's LAST_INSERT_ID() is not the pooled connection's once b
			// inserted there: a's first INSERT on it after that is
			// preceded by a SET.
			if err := ins(a, "a before"); err != nil {
				t.Fatal(err)
			}
			if err := ins(b, "b before"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // past b's hold of the connection
			if _, err := a.ExecContext(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			// Not an insert: the SET is still to come.
			if _, err := a.ExecContext(ctx, "UPDATE lostpin SET v = 'a in txn' WHERE v = 'a before'"); err != nil {
				t.Fatal(err)
			}
			// MariaDB may list the thread as running for a moment after
			// its answer reached the client (seen under make test's load).
			waitUntil(t, func() bool { return killIdle(t, root, lostpinUser) >= 1 },
				func() string { return "no idle pooled connection to kill" })
			time.Sleep(200 * time.Millisecond)
			err := ins(a, "a lost")
			t.Logf("INSERT on the killed connection: %v", err)
			after := ins(a, "a after")
			t.Logf("the next INSERT: %v", after)
			if after == nil {
				_, rerr := a.ExecContext(ctx, "ROLLBACK")
				t.Logf("ROLLBACK: %v", rerr)
			}
			var got string
			if err := direct(t).QueryRow("SELECT COALESCE(GROUP_CONCAT(v ORDER BY id), '') FROM lostpin WHERE v IN ('a in txn', 'a lost', 'a after')").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != "" {
				t.Errorf("rows of the transaction the client rolled back were committed: %s", got)
			}
			if after == nil {
				t.Errorf("the session went on after its transaction's connection was lost")
			}
		})
	}
}

// lostpinUser is the backend account of TestStateLostBeforeStatementEndsSession's
// gateway, its own: the test kills that account's idle connections, and
// tests running beside it kill mplxUser's.
const lostpinUser, lostpinPass = "lostpin", "lostpin-secret"

// startLostpinGateway starts a gateway with a pool of one connection that
// logs in as lostpinUser.
func startLostpinGateway(t *testing.T) *gateway.Server {
	t.Helper()
	ensureAccount(t, lostpinUser, lostpinPass)
	return startGatewayAs(t, "lostpin", lostpinUser, lostpinPass, 1, 1<<20)
}

// TestHeldConnectionLostInCommandEndsSession: two more places where the
// connection holding a session's transaction can break outside a
// statement, both found after the test above. The session must end there
// too; before, it went on:
//   - the COM_STMT_RESET that closes a cursor: the statement was answered
//     OK and the session's next INSERT committed in autocommit;
//   - bringing the held connection in line with a change the gateway
//     keeps itself (COM_SET_OPTION) before the next statement: that
//     statement failed, and so did every later one, on the dead
//     connection the session kept.
func TestHeldConnectionLostInCommandEndsSession(t *testing.T) {
	root := rootDB(t)
	for _, tc := range []struct {
		name string
		// lose runs after the connection was killed: the command that
		// meets the dead connection first. The rawSession's statement
		// "c" has an open cursor.
		lose func(t *testing.T, s *rawSession)
	}{
		{"cursor reset", func(t *testing.T, s *rawSession) {
			s.send(binary.LittleEndian.AppendUint32([]byte{wire.ComStmtReset}, s.stmt("c")))
		}},
		{"sync before a statement", func(t *testing.T, s *rawSession) {
			s.send([]byte{wire.ComSetOption, 0, 0})
			if p, err := s.bc.ReadPacket(); err != nil || wire.IsERR(p) {
				t.Fatalf("COM_SET_OPTION: %x %v", p, err)
			}
			s.send(append([]byte{wire.ComQuery}, "INSERT INTO lostpin (v) VALUES ('lost')"...))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustExec(t, direct(t), "DROP TABLE IF EXISTS lostpin", "CREATE TABLE lostpin (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB")
			srv := startLostpinGateway(t)
			s := newRawSession(t, gatewayTarget(srv), 0)
			for _, step := range []struct {
				what string
				resp []byte
			}{
				{"USE", s.query("USE " + testDB)},
				{"BEGIN", s.query("BEGIN")},
				{"INSERT", s.query("INSERT INTO lostpin (v) VALUES ('in txn')")},
				{"prepare", s.prepare("c", "SELECT seq FROM seq_1_to_10")},
				{"execute with a cursor", s.execute("c", 1, true)},
			} {
				if len(step.resp) > 4 && wire.IsERR(step.resp[4:]) {
					t.Fatalf("%s: %s", step.what, step.resp[4:])
				}
			}
			// MariaDB may list the thread as running for a moment after
			// its answer reached the client (seen under make test's load).
			waitUntil(t, func() bool { return killIdle(t, root, lostpinUser) >= 1 },
				func() string { return "no idle pooled connection to kill" })
			time.Sleep(200 * time.Millisecond)
			tc.lose(t, s)
			first, ferr := s.bc.ReadPacket()
			t.Logf("the command that met the dead connection: %x %v", first, ferr)
			// The session is over: the next command gets no answer.
			var after error
			if err := s.bc.WriteCommand(append([]byte{wire.ComQuery}, "INSERT INTO lostpin (v) VALUES ('after')"...)); err == nil {
				var p []byte
				if p, after = s.bc.ReadPacket(); after == nil {
					t.Errorf("the session went on after its transaction's connection was lost: the next INSERT got %x", p)
				}
			}
			var got string
			if err := direct(t).QueryRow("SELECT COALESCE(GROUP_CONCAT(v ORDER BY id), '') FROM lostpin").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != "" {
				t.Errorf("rows of the lost transaction or after it were committed: %s", got)
			}
		})
	}
}
