package wire

import (
	"bytes"
	"testing"
)

func TestChangeUserRoundTrip(t *testing.T) {
	p := []byte{ComChangeUser}
	p = append(p, "bob\x00"...)
	p = append(p, 3, 'a', 'b', 'c')
	p = append(p, "db1\x00"...)
	p = append(p, 45, 0)
	p = append(p, "mysql_native_password\x00"...)
	r, err := ParseChangeUser(p, CapSecureConnection|CapPluginAuth)
	if err != nil {
		t.Fatal(err)
	}
	if r.User != "bob" || string(r.Auth) != "abc" || r.DB != "db1" || r.Collation != 45 || r.Plugin != "mysql_native_password" {
		t.Fatalf("%+v", r)
	}
	if _, err := ParseChangeUser([]byte{ComChangeUser, 'x'}, CapSecureConnection); err == nil {
		t.Fatal("a user name without its NUL parsed")
	}
}

func TestStmtCommands(t *testing.T) {
	p := AppendStmtCommand(nil, ComStmtExecute, 7)
	p = append(p, 1, 1, 0, 0, 0)
	if id, ok := StmtCommandID(p); !ok || id != 7 || ExecuteFlags(p) != 1 {
		t.Fatalf("id %d %v flags %d", id, ok, ExecuteFlags(p))
	}
	SetStmtCommandID(p, 9)
	if id, _ := StmtCommandID(p); id != 9 {
		t.Fatalf("id %d after SetStmtCommandID", id)
	}
	ld := AppendSendLongData(nil, 3, 2, []byte("xyz"))
	if id, param, data, ok := ParseSendLongData(ld); !ok || id != 3 || param != 2 || !bytes.Equal(data, []byte("xyz")) {
		t.Fatalf("%d %d %q %v", id, param, data, ok)
	}
	if id, ok := ParseProcessKill([]byte{ComProcessKill, 5, 0, 0, 0}); !ok || id != 5 {
		t.Fatalf("kill id %d %v", id, ok)
	}
	if _, ok := StmtCommandID([]byte{ComStmtClose, 1}); ok {
		t.Fatal("a short packet parsed")
	}
}
