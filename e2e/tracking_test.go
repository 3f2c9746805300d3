package e2e

import (
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
