package gateway

import "testing"

// TestHandshakeDBError: a login's database name that does not convert to
// utf8mb3 gets MariaDB's 1300 with its quoting (make compat:
// main.mysql_not_windows); before, the backend answered 1102.
func TestHandshakeDBError(t *testing.T) {
	for _, c := range []struct {
		db        string
		collation byte
		want      string
	}{
		{"test😁 ", 33, `Invalid utf8mb3 character string: 'test\xF0\x9F\x98\x81 '`},
		{"test😁 ", 63, `Invalid binary character string: 'test\xF0\x9F\x98\x81 '`},
		{"t\xffx", 33, `Invalid utf8mb3 character string: 't\xFFx'`},
		{"test😁 ", 45, ""},
		{"tést", 33, ""},
		{"test", 63, ""},
	} {
		e := handshakeDBError(c.db, c.collation)
		got := ""
		if e != nil {
			got = e.Message
			if e.Code != 1300 || e.State != "HY000" {
				t.Errorf("%q: %d %s", c.db, e.Code, e.State)
			}
		}
		if got != c.want {
			t.Errorf("handshakeDBError(%q, %d) = %q, want %q", c.db, c.collation, got, c.want)
		}
	}
}
