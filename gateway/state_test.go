package gateway

import "testing"

// stateKey is the same for the same state whatever the map order, changes
// with the version, and is cached per version.
func TestStateKey(t *testing.T) {
	a := replayState{db: "app", vars: map[string]string{"sql_mode": "''", "time_zone": "'+00:00'", "names": "utf8mb4"}, stateID: 1}
	b := replayState{db: "app", vars: map[string]string{"names": "utf8mb4", "time_zone": "'+00:00'", "sql_mode": "''"}, stateID: 7}
	if a.stateKey() != b.stateKey() {
		t.Fatalf("same state, different keys: %q %q", a.stateKey(), b.stateKey())
	}
	a.db = "other" // without a new version the cached key stays
	if a.stateKey() != b.stateKey() {
		t.Fatal("the key changed without a new state version")
	}
	a.stateID = 2
	if a.stateKey() == b.stateKey() {
		t.Fatal("a new database under a new version kept the old key")
	}
}

func TestQualify(t *testing.T) {
	rs := replayState{db: "app"}
	for in, want := range map[string]string{
		"t": "app.t", "other.t": "other.t", "`a.b`": "app.`a.b`", "`x`.`a.b`": "`x`.`a.b`",
	} {
		if got := rs.qualify(in); got != want {
			t.Errorf("qualify(%q) = %q, want %q", in, got, want)
		}
	}
}

// The state-version rule: a change made by a statement on a connection
// leaves that connection carrying the new version, and no other.
func TestStateChangesMarkTheirConnection(t *testing.T) {
	srv := &Server{}
	ss := &Session{srv: srv, replayState: replayState{versions: &srv.stateIDs}}
	ss.vars = map[string]string{"sql_mode": "''"}
	on, other := &backendConn{}, &backendConn{}
	ss.nextState()
	other.syncedState = ss.stateID
	ss.dbChangedOn(on, "app")
	if on.db != "app" || on.syncedState != ss.stateID || other.syncedState == ss.stateID {
		t.Fatalf("after USE: conn db %q state %d, other %d, session %d", on.db, on.syncedState, other.syncedState, ss.stateID)
	}
	ss.vars["time_zone"] = "'+01:00'"
	ss.varsChangedOn(on)
	if on.vars["time_zone"] != "'+01:00'" || on.syncedState != ss.stateID {
		t.Fatalf("after SET: conn vars %v state %d, session %d", on.vars, on.syncedState, ss.stateID)
	}
	ss.vars["time_zone"] = "SYSTEM"
	if on.vars["time_zone"] != "'+01:00'" {
		t.Fatal("the connection shares the session's map: a later change would look applied")
	}
}
