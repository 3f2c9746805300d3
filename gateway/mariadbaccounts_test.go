package gateway

import "testing"

func TestChangesAccounts(t *testing.T) {
	for sql, want := range map[string]bool{
		"CREATE USER foo@localhost":            true,
		"create or replace user foo":           true,
		"DROP USER IF EXISTS foo":              true,
		"RENAME USER a TO b":                   true,
		"ALTER USER foo IDENTIFIED BY 'x'":     true,
		"  GRANT SELECT ON *.* TO foo":         true,
		"REVOKE ALL ON *.* FROM foo":           true,
		"SET PASSWORD FOR foo = PASSWORD('x')": true,
		"set password = 'x'":                   true,
		"FLUSH PRIVILEGES":                     true,
		"flush local hosts, privileges":        true,
		"FLUSH TABLE_STATISTICS":               false,
		"FLUSH TABLES":                         false,
		"CREATE ROLE r":                        true,
		"DROP ROLE r":                          true,
		"CREATE TABLE t (a INT)":               false,
		"DROP TABLE users":                     false,
		"ALTER TABLE user ADD c INT":           false,
		"SET autocommit = 0":                   false,
		"CREATE OR REPLACE TABLE t (a INT)":    false,
		"SELECT 1":                             false,
	} {
		if got := changesAccounts(sql); got != want {
			t.Errorf("changesAccounts(%q) = %v, want %v", sql, got, want)
		}
	}
}

func TestPrivKey(t *testing.T) {
	if got := privKey(poolKey{user: "app"}); got != "app" {
		t.Errorf("users[] account: %q", got)
	}
	a := privKey(poolKey{user: "foo", host: "localhost", version: 1})
	b := privKey(poolKey{user: "foo", host: "localhost", version: 3})
	if a == b || a == "foo" {
		t.Errorf("MariaDB account versions share a key: %q %q", a, b)
	}
}
