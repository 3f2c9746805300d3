package owner

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/directgate/directgate/wire"
)

// kind is what an owned table is.
type kind uint8

const (
	kindSequence kind = iota + 1
	kindMessage
)

// String returns "sequence" or "message", as SHOW OWNER TABLES shows it.
func (k kind) String() string {
	if k == kindSequence {
		return "sequence"
	}
	return "message"
}

// table is one owned table. Schema and Name are spelled as
// information_schema spells them. Exactly one of seq and queue is set.
type table struct {
	Schema, Name string
	kind         kind
	seq          *sequence
	queue        *queue
	// fence is what this owner raised the table's fence row to (fence.go):
	// kept across discoveries, like seq and queue.
	fence *tableFence
}

// key is the lower-case "db.table" the table is looked up by.
func (t *table) key() string { return tableKey(t.Schema, t.Name) }

// quoted is `db`.`table`, for statements the owner builds.
func (t *table) quoted() string { return quoteIdent(t.Schema) + "." + quoteIdent(t.Name) }

func tableKey(schema, name string) string {
	return strings.ToLower(schema) + "." + strings.ToLower(name)
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// tableSet is an immutable set of owned tables, replaced as a whole by
// each discovery.
type tableSet struct {
	byKey map[string]*table
	list  []*table // sorted by schema, then name
}

// lookup finds the table schema.name, case-insensitively.
func (s *tableSet) lookup(schema, name string) *table {
	if s == nil {
		return nil
	}
	return s.byKey[tableKey(schema, name)]
}

// foundTable is what discovery learned about one table.
type foundTable struct {
	Schema, Name string
	kind         kind
	opts         msgOptions
	columns      []columnInfo // in table order
}

// columnInfo is one column of a discovered table.
type columnInfo struct {
	Name string
	Def  wire.Column
	// Numeric is set for integer columns: their values can be written
	// into statements as bare numbers.
	Numeric bool
}

// systemSchemas are never searched for owned tables.
const systemSchemas = "'mysql', 'information_schema', 'performance_schema', 'sys'"

// discoverTables lists the owned tables on the primary: every base table
// whose comment contains vitess_sequence or vitess_message (as Vitess
// decides, so existing schemas move over unchanged), plus the configured
// ones, with their columns. A configured table that does not exist, or a
// table without the columns its kind needs, is left out and reported in
// the returned warnings.
func discoverTables(ctx context.Context, db *sql.DB, sequences, messages []string) ([]foundTable, []string, error) {
	configured := map[string]kind{}
	var cond []string
	var args []any
	for _, group := range []struct {
		names []string
		k     kind
	}{{sequences, kindSequence}, {messages, kindMessage}} {
		for _, n := range group.names {
			schema, name, _ := strings.Cut(n, ".")
			configured[tableKey(schema, name)] = group.k
			cond = append(cond, "(TABLE_SCHEMA = ? AND TABLE_NAME = ?)")
			args = append(args, schema, name)
		}
	}
	q := "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES" +
		" WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN (" + systemSchemas + ")" +
		" AND (TABLE_COMMENT LIKE '%vitess\\_sequence%' OR TABLE_COMMENT LIKE '%vitess\\_message%'"
	if len(cond) > 0 {
		q += " OR " + strings.Join(cond, " OR ")
	}
	q += ")"
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list tables: %w", err)
	}
	var found []foundTable
	var warnings []string
	seen := map[string]bool{}
	for rows.Next() {
		var f foundTable
		var comment string
		if err := rows.Scan(&f.Schema, &f.Name, &comment); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("list tables: %w", err)
		}
		key := tableKey(f.Schema, f.Name)
		seen[key] = true
		switch {
		case strings.Contains(comment, "vitess_sequence"):
			f.kind = kindSequence
		case strings.Contains(comment, "vitess_message"):
			f.kind = kindMessage
		default:
			f.kind = configured[key]
		}
		if want, ok := configured[key]; ok && want != f.kind {
			warnings = append(warnings, fmt.Sprintf("%s.%s is configured as a %s but its comment makes it a %s; the comment wins", f.Schema, f.Name, want, f.kind))
		}
		if f.kind == kindMessage {
			opts, err := parseMsgOptions(comment)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("message table %s.%s left out: comment attribute %v", f.Schema, f.Name, err))
				continue
			}
			f.opts = opts
		}
		found = append(found, f)
	}
	if err := rows.Close(); err != nil {
		return nil, nil, fmt.Errorf("list tables: %w", err)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list tables: %w", err)
	}
	for key := range configured {
		if !seen[key] {
			warnings = append(warnings, fmt.Sprintf("configured owner table %s does not exist on the primary", key))
		}
	}
	if len(found) == 0 {
		return nil, warnings, nil
	}
	if err := loadColumns(ctx, db, found); err != nil {
		return nil, nil, err
	}
	kept := found[:0]
	for _, f := range found {
		if msg := f.check(); msg != "" {
			warnings = append(warnings, msg)
			continue
		}
		kept = append(kept, f)
	}
	slices.SortFunc(kept, func(a, b foundTable) int {
		return cmp.Or(cmp.Compare(a.Schema, b.Schema), cmp.Compare(a.Name, b.Name))
	})
	return kept, warnings, nil
}

// check returns why the table cannot be served, or "".
func (f *foundTable) check() string {
	need := []string{"id", "next_id", "cache"}
	if f.kind == kindMessage {
		need = []string{"id", "priority", "epoch", "time_next", "time_acked"}
	}
	for _, c := range need {
		if f.column(c) == nil {
			return fmt.Sprintf("%s table %s.%s left out: it has no column %s", f.kind, f.Schema, f.Name, c)
		}
	}
	for _, c := range f.opts.Columns {
		if f.column(c) == nil {
			return fmt.Sprintf("message table %s.%s left out: vt_message_cols names %s, which it does not have", f.Schema, f.Name, c)
		}
	}
	return ""
}

// column finds a column by name, case-insensitively.
func (f *foundTable) column(name string) *columnInfo {
	for i := range f.columns {
		if strings.EqualFold(f.columns[i].Name, name) {
			return &f.columns[i]
		}
	}
	return nil
}

// hiddenColumn reports whether a column is bookkeeping of the owner,
// never streamed unless vt_message_cols names it.
func hiddenColumn(name string) bool {
	switch strings.ToLower(name) {
	case "priority", "epoch", "time_next", "time_acked":
		return true
	}
	return false
}

// streamColumns are the columns a STREAM sends, id first: those of
// vt_message_cols, else every column but the hidden ones in table order.
// Like Vitess, time_created and time_scheduled are streamed when present.
func (f *foundTable) streamColumns() []columnInfo {
	if len(f.opts.Columns) > 0 {
		cols := make([]columnInfo, 0, len(f.opts.Columns))
		for _, n := range f.opts.Columns {
			cols = append(cols, *f.column(n))
		}
		return cols
	}
	cols := []columnInfo{*f.column("id")}
	for _, c := range f.columns {
		if strings.EqualFold(c.Name, "id") || hiddenColumn(c.Name) {
			continue
		}
		cols = append(cols, c)
	}
	return cols
}

// loadColumns reads the columns of the found tables from
// information_schema and builds their result-set definitions.
func loadColumns(ctx context.Context, db *sql.DB, found []foundTable) error {
	index := map[string]int{}
	var cond []string
	var args []any
	for i, f := range found {
		index[tableKey(f.Schema, f.Name)] = i
		cond = append(cond, "(c.TABLE_SCHEMA = ? AND c.TABLE_NAME = ?)")
		args = append(args, f.Schema, f.Name)
	}
	q := "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.IS_NULLABLE," +
		" c.COLUMN_KEY, c.EXTRA, c.CHARACTER_MAXIMUM_LENGTH, c.CHARACTER_OCTET_LENGTH, c.NUMERIC_PRECISION," +
		" c.NUMERIC_SCALE, c.DATETIME_PRECISION, c.COLLATION_NAME" +
		" FROM information_schema.COLUMNS c" +
		" WHERE " + strings.Join(cond, " OR ") +
		" ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION"
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("read columns: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m columnMeta
		var schema, tbl string
		if err := rows.Scan(&schema, &tbl, &m.name, &m.dataType, &m.columnType, &m.nullable, &m.key, &m.extra,
			&m.chars, &m.octets, &m.precision, &m.scale, &m.timePrecision, &m.collation); err != nil {
			return fmt.Errorf("read columns: %w", err)
		}
		i, ok := index[tableKey(schema, tbl)]
		if !ok {
			continue
		}
		f := &found[i]
		def, numeric := m.definition(f.Schema, f.Name)
		f.columns = append(f.columns, columnInfo{Name: m.name, Def: def, Numeric: numeric})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read columns: %w", err)
	}
	return nil
}

// columnMeta is one row of information_schema.COLUMNS.
type columnMeta struct {
	name, dataType, columnType, nullable, key, extra string
	chars, octets, precision, scale, timePrecision   sql.NullInt64
	collation                                        sql.NullString
}

// resultCollation is the collation text columns are declared in: the
// owner reads rows in utf8mb4 (go-sql-driver's default, and wire.Dial's
// collation 45), and MariaDB converts text columns to the connection's
// character set, four bytes per character.
const (
	resultCollation = uint16(wire.DefaultCollation)
	resultMaxLen    = 4
)

// definition builds the column definition MariaDB sends for the column in
// a SELECT on a utf8mb4_general_ci connection (checked against the server
// by TestColumnDefinitionsMatchServer) and reports whether the column is
// an integer. MariaDB sends no NUM_FLAG.
func (m *columnMeta) definition(schema, tbl string) (wire.Column, bool) {
	c := wire.Column{Schema: schema, Table: tbl, Name: m.name, Charset: wire.BinaryCollation}
	c.Flags = m.flags()
	integer := false
	switch dt := strings.ToLower(m.dataType); dt {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		integer = true
		c.Type, c.Length = integerType(dt, strings.ToLower(m.columnType))
	case "decimal", "numeric":
		m.decimalType(&c)
	case "float", "double", "real":
		m.floatType(&c, dt)
	case "bit":
		c.Type, c.Length = wire.TypeBit, uint32(m.precision.Int64)
		c.Flags |= wire.FlagUnsigned
	case "year":
		c.Type, c.Length = wire.TypeYear, 4
		c.Flags |= wire.FlagUnsigned | wire.FlagZerofill
	case "date", "datetime", "timestamp", "time":
		m.timeType(&c, dt)
	case "char", "binary":
		m.textType(&c, wire.TypeString, m.chars.Int64)
	case "varchar", "varbinary":
		m.textType(&c, wire.TypeVarString, m.chars.Int64)
	case "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob", "json":
		m.textType(&c, wire.TypeBlob, m.chars.Int64)
		c.Flags |= wire.FlagBlob
	case "enum":
		m.textType(&c, wire.TypeString, m.chars.Int64)
		c.Flags |= wire.FlagEnum
	case "set":
		m.textType(&c, wire.TypeString, m.chars.Int64)
		c.Flags |= wire.FlagSet
	case "uuid", "inet4", "inet6":
		// MariaDB's fixed-format types, sent as text.
		c.Type, c.Charset = wire.TypeString, resultCollation
		c.Length = map[string]uint32{"uuid": 36, "inet4": 15, "inet6": 39}[dt] * resultMaxLen
		c.Flags |= wire.FlagBinary | wire.FlagUnsigned
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		c.Type, c.Length = wire.TypeGeometry, 1<<32-1
		c.Flags |= wire.FlagBlob | wire.FlagBinary
	default:
		m.textType(&c, wire.TypeVarString, max(m.chars.Int64, m.octets.Int64))
	}
	return c, integer
}

// unsigned reports whether the column's type is UNSIGNED.
func (m *columnMeta) unsigned() bool {
	return strings.Contains(strings.ToLower(m.columnType), "unsigned")
}

// flags are the definition's flags that do not depend on the data type:
// NOT NULL, the key, UNSIGNED, ZEROFILL and AUTO_INCREMENT.
func (m *columnMeta) flags() uint16 {
	var f uint16
	if m.nullable == "NO" {
		f |= wire.FlagNotNull
	}
	switch m.key {
	case "PRI":
		f |= wire.FlagPriKey
	case "UNI":
		f |= wire.FlagUniqueKey
	case "MUL":
		f |= wire.FlagMultipleKey
	}
	if m.unsigned() {
		f |= wire.FlagUnsigned
	}
	if strings.Contains(strings.ToLower(m.columnType), "zerofill") {
		f |= wire.FlagZerofill
	}
	if strings.Contains(strings.ToLower(m.extra), "auto_increment") {
		f |= wire.FlagAutoIncrement
	}
	return f
}

// decimalType declares a DECIMAL column: its precision, one more for the
// point when it has a scale and one more for the sign unless UNSIGNED.
func (m *columnMeta) decimalType(c *wire.Column) {
	c.Type, c.Decimals = wire.TypeNewDecimal, byte(m.scale.Int64)
	c.Length = uint32(m.precision.Int64)
	if m.scale.Int64 > 0 {
		c.Length++
	}
	if !m.unsigned() {
		c.Length++
	}
}

// floatType declares a FLOAT, DOUBLE or REAL column (dt): a declared
// precision and scale, or the type's own width and 0x1f decimals.
func (m *columnMeta) floatType(c *wire.Column, dt string) {
	c.Type, c.Length, c.Decimals = wire.TypeFloat, 12, 0x1f
	if dt != "float" {
		c.Type, c.Length = wire.TypeDouble, 22
	}
	if m.scale.Valid {
		c.Decimals = byte(m.scale.Int64)
		c.Length = uint32(m.precision.Int64)
	}
}

// timeType declares a DATE, DATETIME, TIMESTAMP or TIME column (dt), with
// its fractional seconds.
func (m *columnMeta) timeType(c *wire.Column, dt string) {
	c.Type, c.Length = wire.TypeDatetime, 19
	switch dt {
	case "date":
		c.Type, c.Length = wire.TypeDate, 10
	case "time":
		c.Type, c.Length = wire.TypeTime, 10
	case "timestamp":
		c.Type = wire.TypeTimestamp
		c.Flags |= wire.FlagUnsigned
	}
	if p := byte(m.timePrecision.Int64); p > 0 && dt != "date" {
		c.Decimals, c.Length = p, c.Length+1+uint32(p)
	}
	c.Flags |= wire.FlagBinary
}

// textType declares a character column of type typ converted to utf8mb4
// of chars characters; binary strings keep their byte length.
func (m *columnMeta) textType(c *wire.Column, typ byte, chars int64) {
	c.Type = typ
	if !m.collation.Valid {
		c.Flags |= wire.FlagBinary
		c.Length = clampLength(m.octets.Int64)
		return
	}
	c.Charset = resultCollation
	c.Length = clampLength(chars * resultMaxLen)
	if strings.HasSuffix(m.collation.String, "_bin") {
		c.Flags |= wire.FlagBinary
	}
}

// clampLength fits a display length into the definition's 32 bits.
func clampLength(n int64) uint32 { return uint32(min(max(n, 0), 1<<32-1)) }

// integerType is the type byte and display width of an integer column.
func integerType(dataType, columnType string) (byte, uint32) {
	switch dataType {
	case "tinyint":
		return wire.TypeTiny, displayWidth(columnType, 4)
	case "smallint":
		return wire.TypeShort, displayWidth(columnType, 6)
	case "mediumint":
		return wire.TypeInt24, displayWidth(columnType, 9)
	case "bigint":
		return wire.TypeLongLong, displayWidth(columnType, 20)
	}
	return wire.TypeLong, displayWidth(columnType, 11)
}

// displayWidth is the width in "bigint(20) unsigned", or def (one less
// for unsigned types, which have no sign to show) when the server does
// not show widths (MySQL 8.0.19+).
func displayWidth(columnType string, def uint32) uint32 {
	if open := strings.IndexByte(columnType, '('); open >= 0 {
		if end := strings.IndexByte(columnType[open:], ')'); end > 0 {
			if w, err := strconv.ParseUint(columnType[open+1:open+end], 10, 32); err == nil {
				return uint32(w)
			}
		}
	}
	if strings.Contains(columnType, "unsigned") && def != 20 {
		return def - 1
	}
	return def
}
