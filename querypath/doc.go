// Package querypath tells the gateway what a SQL statement is.
//
// It is pure: SQL text goes in, a small [Route] value comes out. It performs
// no I/O, keeps no global state and is safe for concurrent use. A
// [Classifier] built by [New] holds the Vitess SQL parser; [Classifier.Classify]
// is its only operation. A few functions read statement text for the
// gateway's rewrites with the same lexer: [BindParams] writes literals into
// a prepared statement's placeholders, [RewriteGatewayIDs] and
// [ReadsOtherTables] serve the gateway's own ids and the owner's checks.
//
// # How a statement is classified
//
// Classification runs in up to three stages:
//
//  1. A fast keyword lexer reads the statement once, without allocating. It
//     skips whitespace and comments, ignores the inside of string literals and
//     quoted identifiers, and records the leading keywords plus every token
//     that matters for session state: user variables (@x, but not @@x),
//     GET_LOCK and friends, SQL_CALC_FOUND_ROWS, FOUND_ROWS(),
//     LAST_INSERT_ID(), ROW_COUNT(), locking clauses, INTO, sequence syntax
//     and ';' separators. The common statements (SELECT, INSERT, UPDATE,
//     DELETE, REPLACE, transaction control, USE, SHOW, SET, KILL, EXPLAIN) are
//     decided here.
//  2. When the fast path is unsure (DDL, LOCK TABLES, PREPARE, SELECT ... INTO,
//     WITH, unusual sequence syntax, ...) the statement is parsed with
//     vitess.io/vitess/go/vt/sqlparser and the AST is walked. The parser wins
//     over the lexer when both have an opinion.
//  3. Statements the parser cannot read (MariaDB syntax such as RETURNING,
//     CREATE SEQUENCE, SET STATEMENT ... FOR, XA, HANDLER) are classified from
//     the lexer's findings alone, conservatively: [KindOther], plus
//     [PinUnreplayable] when the leading keywords suggest session state.
//
// # Executable comments
//
// MySQL executable comments (/*!40101 SET NAMES utf8 */) and MariaDB ones
// (/*M!100100 ... */) contain real SQL. They are expanded the way MariaDB 10.11
// expands them before anything else looks at the statement: the content of a
// comment runs when its version is at most 10.11.99, except that MySQL-only
// versions 50700 to 99999 are ignored unless the comment is a /*M! one.
// (Vitess compares versions as strings, which breaks for six-digit MariaDB
// versions, so the classifier never lets the parser see such comments.)
//
// # Assumptions
//
// String literals are read with backslash escapes, as with MariaDB's default
// sql_mode. A statement whose string literal would run to the end of the text
// under that rule is read again without backslash escapes
// (NO_BACKSLASH_ESCAPES) and the findings of both readings are combined.
// Double-quoted text is treated as a string literal; under ANSI_QUOTES it is an
// identifier, which makes no difference to classification.
//
// # Temporary tables
//
// MariaDB 10.11 cannot list a session's temporary tables, so the gateway
// follows them by name to learn when the last one is gone and PinTempTable can
// end. Three Route fields carry the names, one per kind of change, so that
// none needs a tag saying where a name came from: CreatedTemp (CREATE
// [OR REPLACE] TEMPORARY TABLE), Dropped (DROP [TEMPORARY] TABLE) and Renames
// (RENAME TABLE, ALTER TABLE ... RENAME). They are filled from the AST when
// the parser reads the statement and from the lexer's tokens otherwise (for
// MariaDB forms such as CREATE OR REPLACE TEMPORARY TABLE, DROP TABLES, WAIT
// and NOWAIT); tests check that both readings agree. The classifier is
// conservative where a wrong name would be unsafe: a temporary table whose
// creation or rename it cannot name (a temporary sequence, an unreadable
// name, a PREPAREd CREATE TEMPORARY TABLE or rename) gets PinUnreplayable,
// while a DROP it cannot read merely lacks names. It cannot see temporary
// tables that stored procedures create (CALL).
//
// # Table names
//
// Table names in a Route's CreatedTemp, Dropped and Renames are canonical:
// "table" when the statement does not qualify it, "db.table" when it does,
// each part unquoted and in the case written (the gateway lower-cases them,
// and resolves unqualified names against the session's default database). A
// part that is empty or holds a '.' or a '`' stays backquoted, with '`'
// doubled, so that one string never names two tables: CREATE TEMPORARY TABLE
// `a.b` gives "`a.b`", not "a.b" (table b of database a). The Table field
// predates this rule and keeps such names unquoted.
//
// Strings in a Route (Database, Table, SetVar.Value, table names) may share
// memory with the sql argument: callers that keep them must not reuse the
// argument's bytes (for example through an unsafe []byte to string
// conversion).
package querypath
