package querypath

import (
	"strconv"
	"strings"
)

// Kind says what a statement is, for routing. The zero value is KindOther.
type Kind uint8

const (
	// KindOther is anything not listed below: DDL, DML, administrative
	// statements, unknown and unparseable text. It is forwarded verbatim to the
	// primary.
	KindOther Kind = iota
	// KindRead is a SELECT, SHOW, DESCRIBE, EXPLAIN or WITH ... SELECT without a
	// locking clause, INTO, or function with side effects. It may be served by a
	// replica. Check ReadsLastResult and Pin before moving it, though.
	KindRead
	// KindBegin starts a transaction: BEGIN [WORK] or START TRANSACTION [...].
	// BEGIN NOT ATOMIC (a MariaDB compound statement) and XA START are not
	// KindBegin.
	KindBegin
	// KindCommit is COMMIT [WORK] [AND [NO] CHAIN] [[NO] RELEASE]; see
	// Route.Chain and Route.Release.
	KindCommit
	// KindRollback is ROLLBACK [WORK] [AND [NO] CHAIN] [[NO] RELEASE]. ROLLBACK
	// TO [SAVEPOINT] x is KindOther.
	KindRollback
	// KindUse is USE db; Route.Database holds the database.
	KindUse
	// KindSet is a SET statement that changes session state: system variables
	// (Route.Vars), user variables (PinUserVar), or the next transaction's
	// characteristics (Route.NextTxn). SET GLOBAL, SET PASSWORD and SET ROLE are
	// KindOther.
	KindSet
	// KindSequence is SELECT NEXT n VALUES FROM t, SELECT NEXT VALUE FROM t, or
	// MariaDB's SELECT NEXT VALUE FOR s (Route.NativeSyntax). Route.Table and
	// Route.Count describe the request.
	KindSequence
	// KindStream is STREAM * FROM t; Route.Table holds t.
	KindStream
	// KindShowWarnings reads the diagnostics of the previous statement: SHOW
	// WARNINGS, SHOW ERRORS, SHOW COUNT(*) WARNINGS|ERRORS, GET [CURRENT|STACKED]
	// DIAGNOSTICS, and SELECTs of @@warning_count or @@error_count. It must be
	// answered by the connection that ran the previous statement (or from
	// captured warnings).
	KindShowWarnings
	// KindKill is KILL [HARD|SOFT] [CONNECTION|QUERY] <id>: Route.KillID and
	// Route.KillQuery. The id is a gateway connection id. KILL QUERY ID and
	// KILL USER are KindOther.
	KindKill
	// KindGatewayShow is a statement the gateway answers itself from its
	// own state. Route.Table says which: for SHOW GATEWAY <what>, <what> in
	// lower case (backends, pools, sessions, or anything else, which the
	// gateway refuses); "processlist" and "full processlist" for SHOW
	// [FULL] PROCESSLIST (the gateway's sessions); "connection_id" for
	// SELECT CONNECTION_ID() [[AS] alias], with Route.Column the result
	// column's name.
	KindGatewayShow
)

var kindNames = [...]string{
	KindOther:        "other",
	KindRead:         "read",
	KindBegin:        "begin",
	KindCommit:       "commit",
	KindRollback:     "rollback",
	KindUse:          "use",
	KindSet:          "set",
	KindSequence:     "sequence",
	KindStream:       "stream",
	KindShowWarnings: "show_warnings",
	KindKill:         "kill",
	KindGatewayShow:  "gateway_show",
}

// String returns a short lower-case name such as "read", for logs and metric
// labels.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// DML is the verb of a data-changing statement.
type DML uint8

const (
	// DMLNone is any other statement.
	DMLNone DML = iota
	// DMLInsert is INSERT.
	DMLInsert
	// DMLReplace is REPLACE.
	DMLReplace
	// DMLUpdate is UPDATE.
	DMLUpdate
	// DMLDelete is DELETE.
	DMLDelete
)

// Pin is a set of reasons a session must stay on its backend connection. The
// zero value is the empty set.
type Pin uint16

const (
	// PinUserVar: the statement sets or reads a user variable: SET @x,
	// SELECT ... INTO @x, @x := ..., or any other @x reference (reading is
	// harmless on an unpinned session but pinning is simpler and always right).
	// Reads of @@system variables never pin. Ends with the session.
	PinUserVar Pin = 1 << iota
	// PinTempTable: CREATE TEMPORARY TABLE (or another temporary object).
	// Ended by Unpin when the gateway's own count says every temporary table
	// is gone: see Route.CreatedTemp, Route.Dropped and Route.Renames.
	PinTempTable
	// PinLock: GET_LOCK(). Ended by RELEASE_ALL_LOCKS() (not by
	// RELEASE_LOCK(name): other locks may be held).
	PinLock
	// PinLockTables: LOCK TABLE(S), FLUSH TABLES ... WITH READ LOCK, FLUSH
	// TABLES ... FOR EXPORT. Ended by UNLOCK TABLES.
	PinLockTables
	// PinPrepare: SQL-level PREPARE stmt FROM .... Ended by DEALLOCATE PREPARE
	// or DROP PREPARE (when the gateway's count of prepared names reaches zero).
	PinPrepare
	// PinFoundRows: SELECT SQL_CALC_FOUND_ROWS; the next FOUND_ROWS() must run
	// on the same connection. Ended by a statement that reads FOUND_ROWS().
	PinFoundRows
	// PinLastResult: the statement leaves a result that LAST_INSERT_ID(),
	// ROW_COUNT(), FOUND_ROWS() or LASTVAL() of the next statement may read:
	// INSERT, REPLACE, UPDATE, DELETE, LOAD DATA, CALL, LAST_INSERT_ID(expr),
	// NEXTVAL()/NEXT VALUE FOR/SETVAL(). It is transient (see TransientPins):
	// it holds only until the next statement of the session has been routed,
	// which may then read the result when its ReadsLastResult is set.
	PinLastResult
	// PinUnreplayable: session state the gateway cannot replay on another
	// connection: SET of sql_log_bin, pseudo_thread_id, last_insert_id,
	// insert_id, identity, gtid_*, rand_seed1/2, debug*, server_id, ...;
	// SET ROLE; HANDLER; XA; compound statements (BEGIN NOT ATOMIC ...);
	// EXECUTE IMMEDIATE and PREPARE of SQL that is not a literal; a temporary
	// object created or a table renamed under a name the classifier cannot
	// give (see Route.CreatedTemp and Route.Renames); unparseable statements
	// whose leading keywords suggest session state. Ends with the session.
	PinUnreplayable
	// PinXA: an XA statement. MariaDB keeps XA state per connection, and a
	// connection that ran one must be closed, never reset: on MariaDB 10.11
	// COM_RESET_CONNECTION after XA PREPARE leaves the prepared transaction
	// holding its locks after its XA ROLLBACK, while a disconnect leaves
	// it recoverable. Always comes with PinUnreplayable; ends with the
	// session, whose connection is then closed.
	PinXA
)

// TransientPins are the reasons that last for one statement only: the gateway
// drops them once the following statement has been routed.
const TransientPins = PinLastResult

var pinNames = [...]string{
	"user_var", "temp_table", "lock", "lock_tables", "prepare", "found_rows",
	"last_result", "unreplayable", "xa",
}

// String lists the reasons separated by '|', such as "user_var|lock", or
// returns "none" for the empty set.
func (p Pin) String() string {
	if p == 0 {
		return "none"
	}
	var b strings.Builder
	for i, name := range pinNames {
		if p&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(name)
	}
	if rest := p &^ (1<<len(pinNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x")
		b.WriteString(strconv.FormatUint(uint64(rest), 16))
	}
	return b.String()
}

// Route is what the gateway needs to know about one statement (or one
// multi-statement batch). The zero value is a KindOther statement with no
// effect on session state.
type Route struct {
	// Kind says what the statement is.
	Kind Kind
	// Pin holds the reasons this statement adds for keeping the session on its
	// backend connection.
	Pin Pin
	// Unpin holds the reasons this statement may end, if it succeeds:
	// DROP [TEMPORARY] TABLE -> PinTempTable (a plain DROP TABLE may drop a
	// temporary table too; the gateway keeps the pin unless its own counters
	// prove every temporary table gone), RELEASE_ALL_LOCKS() ->
	// PinLock, UNLOCK TABLES -> PinLockTables, DEALLOCATE/DROP PREPARE ->
	// PinPrepare, a FOUND_ROWS() read -> PinFoundRows.
	Unpin Pin
	// ReadsLastResult is set when the statement calls LAST_INSERT_ID() without
	// arguments, ROW_COUNT(), FOUND_ROWS(), LASTVAL() or PREVIOUS VALUE FOR, or
	// reads @@identity, @@last_insert_id or @@last_gtid: it must run on the
	// connection that ran the previous statement.
	ReadsLastResult bool
	// ImplicitCommit is set for statements that make MariaDB commit an open
	// transaction first: DDL other than on TEMPORARY tables, GRANT/REVOKE and
	// user administration, LOCK/UNLOCK TABLES, BEGIN/START TRANSACTION,
	// SET autocommit=1, ANALYZE/CHECK/OPTIMIZE/REPAIR TABLE, FLUSH, RESET,
	// replication control, ...
	ImplicitCommit bool
	// MultiStatement is set when the text holds more than one statement (a ';'
	// outside strings and comments followed by more SQL). The other fields then
	// describe the whole batch: Pin is the union of the parts' pins, Unpin the
	// union of their unpins minus any reason some part pins, ReadsLastResult
	// and ImplicitCommit are or-ed, Vars, CreatedTemp, Dropped and Renames are
	// each concatenated in statement order, Database is the last USE's, Kind
	// is KindRead when every part is a read, KindSet when every part is a SET,
	// KindOther otherwise. The order between CreatedTemp, Dropped and Renames
	// is lost: a batch that fills more than one of them (CREATE TEMPORARY
	// TABLE t ...; DROP TABLE t) cannot be followed by name. Semicolons inside
	// the BEGIN ... END body of a stored program definition or compound
	// statement do not split it.
	MultiStatement bool
	// NextTxn is set by SET TRANSACTION ... and SET tx_isolation/tx_read_only
	// without GLOBAL or SESSION: they change only the next transaction. The
	// gateway keeps the session on its connection until that transaction
	// ends. The characteristics are not in Vars.
	NextTxn bool
	// Statements is the number of statements of a MultiStatement batch
	// (each answers with one result, a CALL with several); 0 otherwise.
	Statements int
	// SetStatement is set for SET STATEMENT var=value, ... FOR statement:
	// the variables change for that statement only (a server's session
	// tracker reports their temporary values, and their restored values
	// with the next statement).
	SetStatement bool
	// NativeSyntax is set on a KindSequence for MariaDB's own
	// SELECT NEXT VALUE FOR s, as opposed to Vitess' SELECT NEXT ... FROM t.
	NativeSyntax bool
	// KillQuery is set for KILL QUERY <id> (KindKill): kill the running
	// statement, not the connection.
	KillQuery bool
	// SessionStatus is set for SHOW [SESSION|LOCAL] STATUS [LIKE ...|WHERE
	// ...]: some of its values (Ssl_cipher, Ssl_version, ...) describe the
	// connection it runs on, which is the gateway's to the backend, not
	// the client's.
	SessionStatus bool
	// SetsGlobal is set for a SET that assigns a GLOBAL (or PERSIST)
	// variable or the GLOBAL TRANSACTION characteristics: sessions that
	// start afterwards get the new value as their default, so connections
	// logged in before must be reset before they serve them.
	SetsGlobal bool
	// KillSelf is set for KILL [CONNECTION|QUERY] CONNECTION_ID()
	// (KindKill): the session's own connection, whatever KillID says.
	KillSelf bool
	// OtherKill is set when the text holds a KILL the gateway cannot run
	// itself: one inside a batch or an SQL-level PREPARE, or a form other
	// than KILL [HARD|SOFT] [CONNECTION|QUERY] <number> (KILL QUERY ID,
	// KILL USER, an expression). Sent as is, it would reach the server with
	// the server's thread ids, which name other clients' connections. (A
	// KILL run by EXECUTE IMMEDIATE 'KILL n' classifies as KindKill.)
	OtherKill bool
	// GatewayIDs is set when the text calls CONNECTION_ID() or names
	// information_schema.PROCESSLIST, which speak of backend threads at
	// the server: the gateway substitutes its own session ids
	// (RewriteGatewayIDs) where it can.
	GatewayIDs bool
	// DynamicVar names the user variable (without @) whose text an SQL
	// PREPARE name FROM @var or EXECUTE IMMEDIATE @var runs: the classifier
	// cannot see it, the gateway must read it. Empty otherwise.
	DynamicVar string
	// Chain is set on a KindCommit or KindRollback with AND CHAIN: a new
	// transaction starts at once.
	Chain bool
	// Release is set on a KindCommit or KindRollback with RELEASE: the server
	// closes the connection afterwards.
	Release bool
	// Database is the default database of a KindUse, unquoted; a Vitess-style
	// target such as "db@replica" is kept verbatim.
	Database string
	// Table is the target of a KindSequence or KindStream, of an INSERT or
	// REPLACE, and of a single-table UPDATE: the name as written, unquoted,
	// qualified ("ks.t") when the statement qualifies it. Empty when the
	// classifier cannot tell.
	Table string
	// Column is the result column's name of a statement the gateway
	// answers itself (SELECT CONNECTION_ID() AS id: "id").
	Column string
	// DML says which data-changing statement this is (INSERT, REPLACE,
	// UPDATE, DELETE); DMLNone for everything else and for batches.
	DML DML
	// Count is the number of values a KindSequence asks for: n of NEXT n VALUES
	// (zero or negative kept as written, so the caller can report the error),
	// 1 for NEXT VALUE, 0 when n is a '?' placeholder.
	Count int64
	// KillID is the connection id of a KindKill.
	KillID uint64
	// Vars lists, in order, the session system variables a KindSet changes in
	// a way the gateway can replay on another connection. Nil for other
	// statements, except that a MultiStatement batch carries the Vars of its
	// SET parts.
	Vars []SetVar
	// CreatedTemp names the temporary table a CREATE [OR REPLACE] TEMPORARY
	// TABLE [IF NOT EXISTS] creates (whatever follows the name: columns, LIKE,
	// [AS] SELECT), in the canonical form described under "Table names" in the
	// package documentation. It is also set when the CREATE is run through
	// EXECUTE IMMEDIATE or SET STATEMENT ... FOR, not when it is PREPAREd.
	// Whenever Pin holds PinTempTable, CreatedTemp names every temporary
	// table the statement creates, unless Pin also holds PinUnreplayable (for
	// a temporary sequence, a name the lexer cannot read, or a PREPAREd
	// CREATE TEMPORARY TABLE, whose table appears when it is executed). The
	// table exists only if the statement succeeds. Nil otherwise.
	CreatedTemp []string
	// Dropped names, in order, the tables of DROP [TEMPORARY] TABLE|TABLES
	// [IF EXISTS] a, b, ... [WAIT n|NOWAIT] [RESTRICT|CASCADE], in the
	// canonical form; Unpin then holds PinTempTable. A plain DROP TABLE drops
	// the temporary table of that name when there is one (it hides the
	// permanent table). Only a successful statement is known to have dropped
	// them all. Dropped may be nil on a DROP the classifier cannot read (as
	// may Renames on an ALTER TABLE): a name missing here only makes the
	// gateway keep its pin longer. DROP SEQUENCE and DROP VIEW leave it nil.
	Dropped []string
	// Renames lists, in order, the (old, new) name pairs of RENAME
	// TABLE|TABLES [IF EXISTS] a TO b, c TO d, ... and of ALTER [ONLINE]
	// [IGNORE] TABLE a ... RENAME [TO|AS] b (one pair, the last RENAME of the
	// ALTER; RENAME COLUMN, INDEX and KEY do not count), in the canonical form.
	// RENAME TABLE applies its pairs one after the other, so a later pair may
	// rename the new name of an earlier one. It renames temporary tables as
	// well as permanent ones: a gateway that tracks its temporary tables by
	// name applies every pair whose old name it tracks, if the statement
	// succeeds. A statement that may rename a table but whose names cannot be
	// read gets PinUnreplayable instead. Nil otherwise.
	Renames [][2]string
	// PrepareName is the statement name of an SQL-level PREPARE name FROM
	// ..., DEALLOCATE PREPARE name or DROP PREPARE name, as written (names
	// are case-insensitive), so the gateway can end PinPrepare when the
	// last prepared name is deallocated. Empty when the name is quoted or
	// the statement is something else.
	PrepareName string
}

// SetVar is one replayable session variable assignment of a SET statement.
type SetVar struct {
	// Name is the canonical lower-case variable name without scope prefix, such
	// as "sql_mode", "time_zone" or "autocommit". Three names stand for
	// statements rather than variables: "names" (SET NAMES), "character set"
	// (SET CHARACTER SET / SET CHARSET), and the SET SESSION TRANSACTION
	// characteristics, reported as "tx_isolation" and "tx_read_only" (the
	// MariaDB 10.11 names).
	Name string
	// Value is the SQL text of the value as the client wrote it (for "names",
	// the charset and any COLLATE clause; for tx_isolation a string such as
	// 'REPEATABLE-READ'; for tx_read_only ON or OFF).
	Value string
	// Literal is set when Value is a literal or keyword (number, string, ON,
	// OFF, DEFAULT, a bare identifier) whose replay gives the same result on
	// any connection. When false (the value refers to @@variables, functions or
	// subqueries) the gateway reads the value back after running the statement.
	Literal bool
}

// SQL returns the statement that replays v on another connection, such as
// "SET SESSION sql_mode = 'ANSI'" or "SET NAMES utf8mb4 COLLATE utf8mb4_bin".
// It is only meaningful when v.Literal is set, or after the gateway has
// replaced Value with the value read back.
func (v SetVar) SQL() string {
	switch v.Name {
	case "names":
		return "SET NAMES " + v.Value
	case "character set":
		return "SET CHARACTER SET " + v.Value
	}
	name := v.Name
	for i := 0; i < len(name); i++ {
		if !isIdentByte(name[i]) {
			name = "`" + strings.ReplaceAll(name, "`", "``") + "`"
			break
		}
	}
	return "SET SESSION " + name + " = " + v.Value
}
