package owner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
)

// The column definitions a STREAM sends are built from information_schema;
// they must be what MariaDB itself sends for a SELECT of those columns.
func TestColumnDefinitionsMatchServer(t *testing.T) {
	srv := needServer(t)
	root := rootDB(t)
	cols := []string{
		"id BIGINT NOT NULL", "priority TINYINT NOT NULL DEFAULT 50", "epoch BIGINT NOT NULL DEFAULT 0",
		"time_next BIGINT DEFAULT 0", "time_acked BIGINT",
		"u8 TINYINT UNSIGNED", "i16 SMALLINT", "i24 MEDIUMINT UNSIGNED NOT NULL DEFAULT 0", "i32 INT", "z INT(5) ZEROFILL",
		"dec1 DECIMAL(10,2)", "dec2 DECIMAL(5,0) UNSIGNED", "f FLOAT", "f2 FLOAT(7,3)", "d DOUBLE", "b BIT(5)",
		"vc VARCHAR(64)", "c CHAR(3) CHARACTER SET latin1", "vb VARBINARY(20)", "bn BINARY(4)",
		"tx TEXT", "bl BLOB", "mt MEDIUMTEXT", "lb LONGBLOB", "js JSON",
		"dt DATETIME(3)", "ts TIMESTAMP NULL", "da DATE", "tm TIME(2)", "yr YEAR",
		"en ENUM('a','b')", "st SET('x','y')", "uid UUID", "k INT UNIQUE", "m INT",
		"i4 INET4", "i6 INET6 NOT NULL", "bi BIGINT UNSIGNED", "vcb VARCHAR(5) COLLATE utf8mb4_bin", "tu TEXT COLLATE utf8mb4_unicode_ci",
		"lt LONGTEXT", "ts2 TIMESTAMP(6) NULL", "e5 ENUM('long one','b') NOT NULL",
	}
	if _, err := root.Exec("CREATE TABLE " + testDB + ".coltypes (" + strings.Join(cols, ", ") +
		", PRIMARY KEY (id), KEY (m)) COMMENT 'vitess_message'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = root.Exec("DROP TABLE " + testDB + ".coltypes") })

	p, err := newPrimary(srv.Addr(), 1, backendUser, backendPass, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	found, warnings, err := discoverTables(ctx, p.db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var f *foundTable
	for i := range found {
		if found[i].Name == "coltypes" {
			f = &found[i]
		}
	}
	if f == nil {
		t.Fatalf("coltypes not discovered (warnings %v)", warnings)
	}
	stream := f.streamColumns()
	names := make([]string, len(stream))
	for i, c := range stream {
		names[i] = quoteIdent(c.Name)
	}

	// What the server sends, read raw.
	bc, err := wire.Dial(ctx, srv.Addr(), wire.DialOptions{User: backendUser, Password: backendPass})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if err := bc.WriteCommand(append([]byte{wire.ComQuery}, "SELECT "+strings.Join(names, ", ")+" FROM "+testDB+".coltypes"...)); err != nil {
		t.Fatal(err)
	}
	if _, err := bc.ReadPacket(); err != nil { // column count
		t.Fatal(err)
	}
	for _, c := range stream {
		pkt, err := bc.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		want, err := wire.ParseColumnDef(pkt)
		if err != nil {
			t.Fatal(err)
		}
		got := c.Def
		// Flags about defaults and keys (no default, default or on update
		// CURRENT_TIMESTAMP, part of a key) say nothing about the values.
		const ignored = wire.FlagNoDefault | 0x4000 /* PART_KEY */ | wire.FlagOnUpdateNow | wire.FlagTimestamp
		want.Flags &^= ignored
		got.Flags &^= ignored
		if got != want {
			t.Errorf("column %s:\n got %s\nwant %s", c.Name, describe(got), describe(want))
		}
	}
}

func describe(c wire.Column) string {
	return fmt.Sprintf("type 0x%02x charset %d length %d flags 0x%04x decimals %d (%s.%s.%s org %q/%q)",
		c.Type, c.Charset, c.Length, c.Flags, c.Decimals, c.Schema, c.Table, c.Name, c.OrgTable, c.OrgName)
}
