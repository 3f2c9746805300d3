package gateway

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

func TestVarsDiff(t *testing.T) {
	cases := []struct {
		have, want map[string]string
		out        []string // items expected in the SET, in any order after NAMES
	}{
		{nil, nil, nil},
		{map[string]string{"sql_mode": "''"}, map[string]string{"sql_mode": "''"}, nil},
		{nil, map[string]string{"time_zone": "'+00:00'"}, []string{"@@SESSION.time_zone = '+00:00'"}},
		{map[string]string{"time_zone": "'+00:00'"}, nil, []string{"@@SESSION.time_zone = DEFAULT"}},
		{nil, map[string]string{"names": "latin1 COLLATE latin1_swedish_ci", "sql_mode": "'ANSI'"},
			[]string{"NAMES latin1 COLLATE latin1_swedish_ci", "@@SESSION.sql_mode = 'ANSI'"}},
		{map[string]string{"names": "latin1 COLLATE latin1_swedish_ci"}, nil,
			[]string{"NAMES utf8mb4 COLLATE utf8mb4_general_ci"}},
	}
	for _, c := range cases {
		got := varsDiff(c.have, c.want)
		if len(c.out) == 0 {
			if got != "" {
				t.Errorf("varsDiff(%v, %v) = %q, want nothing", c.have, c.want, got)
			}
			continue
		}
		if !strings.HasPrefix(got, "SET ") {
			t.Fatalf("varsDiff = %q", got)
		}
		items := strings.Split(strings.TrimPrefix(got, "SET "), ", ")
		if len(items) != len(c.out) || items[0] != c.out[0] {
			t.Errorf("varsDiff(%v, %v) = %q, want items %q", c.have, c.want, got, c.out)
		}
	}
}

func TestSQLLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "28800": "28800", "-1": "-1", "1.5": "1.5",
		"STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION": "'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'",
		"+05:30": "'+05:30'", "it's": "'it''s'", "": "''",
	} {
		got, err := sqlLiteral(in)
		if err != nil || got != want {
			t.Errorf("sqlLiteral(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := sqlLiteral(`a\b`); err == nil {
		t.Error("a backslash must not be replayed")
	}
}

func TestToClientError(t *testing.T) {
	backend := &wire.SQLError{Code: 1146, State: "42S02", Message: "Table 'a.b' doesn't exist"}
	cases := []struct {
		err   error
		code  uint16
		state string
		text  string
	}{
		{backend, 1146, "42S02", "Table 'a.b'"},
		{&pools.AcquireTimeoutError{Pool: "main/x/gw", Size: 4, InUse: 4, Waited: 2 * time.Second}, 1040, "08004", "main/x/gw"},
		{&dialError{addr: "127.0.0.1:1", cluster: "main", err: errors.New("connection refused")}, 1429, "HY000", "127.0.0.1:1"},
		{&wire.BackendError{Err: errors.New("EOF")}, 1158, "08S01", "Lost connection"},
		{pools.ErrClosed, 1053, "08S01", "shutdown"},
		{errors.New("odd"), 1105, "HY000", "odd"},
	}
	for _, c := range cases {
		got := toClientError(c.err)
		if got.Code != c.code || got.State != c.state || !strings.Contains(got.Message, c.text) {
			t.Errorf("toClientError(%v) = %v, want %d (%s) containing %q", c.err, got, c.code, c.state, c.text)
		}
	}
	if toClientError(backend) != backend {
		t.Error("backend errors must pass through unchanged")
	}
}
