package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/directgate/directgate/wire"
)

// TestClientSessionTrackers: a client that asks for CLIENT_SESSION_TRACK
// gets exactly the session-state information MariaDB would send it with
// its own session_track_* settings (MariaDB's defaults first, then what it
// sets), not the trackers the gateway turns on for its backend
// connections; a client without it gets none. Byte for byte, directly and
// through the gateway, with and without CLIENT_DEPRECATE_EOF.
func TestClientSessionTrackers(t *testing.T) {
	script := func(s *rawSession) []recorded {
		var out []recorded
		q := func(sql string) { out = append(out, recorded{sql, s.query(sql)}) }
		q("USE e2e")
		q("SET time_zone = '+01:00'")
		q("SET sql_mode = 'ANSI'")
		q("SELECT 1")
		q("SET @tracked_a = 1")
		q("SET session_track_state_change = ON")
		q("SET @tracked_b = 2")
		q("SET sql_mode = DEFAULT")
		q("SET session_track_transaction_info = 'CHARACTERISTICS'")
		q("SET TRANSACTION READ ONLY")
		q("START TRANSACTION")
		q("SELECT @@time_zone")
		q("COMMIT")
		q("SET session_track_schema = OFF")
		q("USE e2e")
		q("SET session_track_system_variables = 'sql_mode,time_zone'")
		// One variable a statement: MariaDB orders several variables of one
		// OK packet by its tracker's internal hash, which differs between
		// a variable list and '*' (what backend connections track).
		q("SET time_zone = SYSTEM")
		q("SET sql_mode = 'TRADITIONAL'")
		q("SELECT @@sql_mode")
		return out
	}
	for _, caps := range []uint32{wire.CapSessionTrack, wire.CapSessionTrack | wire.CapDeprecateEOF, wire.CapDeprecateEOF} {
		var runs [2][]recorded
		for i, tg := range targets() {
			runs[i] = script(newRawSession(t, tg, caps))
		}
		compareRecorded(t, fmt.Sprintf("caps %#x", caps), runs[0], runs[1])
	}
}

// TestStatusAfterFailedImplicitCommit: a statement that commits
// implicitly and then fails (DROP TABLE of a missing table) ends the
// transaction on MariaDB although it answers with an error, which carries
// no status. The status the gateway answers with itself afterwards
// (COM_PING, COM_SET_OPTION) said the transaction was still open.
func TestStatusAfterFailedImplicitCommit(t *testing.T) {
	ctx := context.Background()
	mustExec(t, direct(t), "CREATE TABLE IF NOT EXISTS trk_implicit (id INT PRIMARY KEY)")
	for _, tg := range targets() {
		bc, err := wire.Dial(ctx, tg.addr, wire.DialOptions{User: tg.user, Password: tg.pass})
		if err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		for _, q := range []string{"USE " + testDB, "START TRANSACTION", "INSERT INTO trk_implicit VALUES (1) ON DUPLICATE KEY UPDATE id = id"} {
			if _, err := bc.Exec(q); err != nil {
				t.Fatalf("%s: %s: %v", tg.name, q, err)
			}
		}
		if _, err := bc.Exec("DROP TABLE trk_no_such_table"); err == nil {
			t.Fatalf("%s: DROP TABLE of a missing table succeeded", tg.name)
		}
		bc.ResetSeq()
		ok, err := bc.SimpleCommand([]byte{wire.ComPing})
		if err != nil {
			t.Fatalf("%s: COM_PING: %v", tg.name, err)
		}
		if ok.Status&wire.StatusInTrans != 0 {
			t.Errorf("%s: COM_PING after the failed DROP TABLE: status %#x has IN_TRANS; the DROP committed", tg.name, ok.Status)
		}
		bc.Close()
	}
}
