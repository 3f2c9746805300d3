package difffuzz

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/wire"
)

// StepKind says what a step sends.
type StepKind int

const (
	// StepQuery sends SQL as COM_QUERY.
	StepQuery StepKind = iota
	// StepPrepared prepares SQL (COM_STMT_PREPARE), executes it once with
	// Params (COM_STMT_EXECUTE) after PrepPause, and closes it
	// (COM_STMT_CLOSE).
	StepPrepared
	// StepPrepare prepares SQL and keeps it as Handle for later
	// StepExecute and StepClose steps.
	StepPrepare
	// StepExecute executes the statement prepared as Handle with Params.
	// Without such a statement (a failed or shrunk-away prepare) it
	// records that and sends nothing.
	StepExecute
	// StepClose closes the statement prepared as Handle.
	StepClose
	// StepInitDB sends COM_INIT_DB with SQL as the database name.
	StepInitDB
	// StepSetOption sends COM_SET_OPTION: multi-statements on when SQL is
	// "on", off otherwise.
	StepSetOption
	// StepObserve runs SQL while the client's side connection (always
	// straight to MariaDB) holds an uncommitted row in table side: BEGIN,
	// INSERT INTO side, then SQL on the main connection, then ROLLBACK on
	// the side connection. What SQL sees of side depends on the main
	// connection's isolation level for that statement.
	StepObserve
	// StepKill runs SQL (a SLEEP) and, once MariaDB shows it running,
	// sends KILL QUERY <id> on a second connection of the client over the
	// same path, where <id> is the main connection's id from its
	// handshake (the gateway's session id through the gateway).
	StepKill
)

var stepKindNames = [...]string{"query", "prepared", "prepare", "execute", "close", "init-db", "set-option", "observe", "kill"}

func (k StepKind) String() string {
	if int(k) < len(stepKindNames) {
		return stepKindNames[k]
	}
	return "kind" + strconv.Itoa(int(k))
}

// Param is a parameter of a binary-protocol execute: NULL, a BIGINT or a
// string.
type Param struct {
	Null  bool
	IsInt bool
	Int   int64
	Str   string
}

func (p Param) String() string {
	switch {
	case p.Null:
		return "NULL"
	case p.IsInt:
		return strconv.FormatInt(p.Int, 10)
	}
	return strconv.Quote(p.Str)
}

// Step is one command of a client script.
type Step struct {
	Kind StepKind
	// SQL is the statement (or database name, or "on"/"off", see Kind).
	SQL string
	// Params are bound by StepPrepared and StepExecute.
	Params []Param
	// Handle names a statement kept by StepPrepare for StepExecute and
	// StepClose.
	Handle int
	// Pause is slept before the step.
	Pause time.Duration
	// PrepPause is slept between prepare and execute of StepPrepared.
	PrepPause time.Duration
	// Tag names the grammar rule that made the step; divergences are
	// grouped by it.
	Tag string
}

func (s Step) String() string {
	var b strings.Builder
	switch s.Kind {
	case StepQuery:
		b.WriteString(s.SQL)
	case StepPrepared:
		fmt.Fprintf(&b, "[binary] %s", s.SQL)
		if len(s.Params) > 0 {
			fmt.Fprintf(&b, " params %v", s.Params)
		}
		if s.PrepPause > 0 {
			fmt.Fprintf(&b, " (execute %v after prepare)", s.PrepPause)
		}
	case StepPrepare:
		fmt.Fprintf(&b, "[binary] PREPARE #%d: %s", s.Handle, s.SQL)
	case StepExecute:
		fmt.Fprintf(&b, "[binary] EXECUTE #%d", s.Handle)
		if len(s.Params) > 0 {
			fmt.Fprintf(&b, " params %v", s.Params)
		}
	case StepClose:
		fmt.Fprintf(&b, "[binary] CLOSE #%d", s.Handle)
	case StepInitDB:
		fmt.Fprintf(&b, "[COM_INIT_DB] %s", s.SQL)
	case StepSetOption:
		fmt.Fprintf(&b, "[COM_SET_OPTION] multi-statements %s", s.SQL)
	case StepObserve:
		fmt.Fprintf(&b, "[side connection holds an uncommitted row in side] %s", s.SQL)
	case StepKill:
		fmt.Fprintf(&b, "%s [KILL QUERY from a second connection]", s.SQL)
	default:
		fmt.Fprintf(&b, "%v %s", s.Kind, s.SQL)
	}
	return b.String()
}

// Script is what one client does.
type Script struct {
	// Client numbers the client: its databases are fz<Client> and
	// fz<Client>b, its lock names start with fz<Client>_.
	Client int
	// Caps are the optional capabilities of the client's connections
	// (optionalCaps).
	Caps uint32
	// Collation is the handshake collation.
	Collation byte
	// Steps run in order on the main connection.
	Steps []Step
}

// DB is the client's first database, its default database at login.
func (s *Script) DB() string { return dbName(s.Client) }

func dbName(client int) string { return "fz" + strconv.Itoa(client) }

// CapsString names the optional capabilities.
func (s *Script) CapsString() string {
	var parts []string
	if s.Caps&wire.CapDeprecateEOF != 0 {
		parts = append(parts, "DEPRECATE_EOF")
	} else {
		parts = append(parts, "classic EOF")
	}
	if s.Caps&wire.CapMultiStatements != 0 {
		parts = append(parts, "MULTI_STATEMENTS")
	}
	if s.Caps&wire.CapFoundRows != 0 {
		parts = append(parts, "FOUND_ROWS")
	}
	parts = append(parts, fmt.Sprintf("collation %d", s.Collation))
	return strings.Join(parts, ", ")
}

// Round is one run of the fuzzer: clients that run at the same time,
// first each on its own connection to MariaDB, then all through one
// gateway whose pool has PoolSize connections.
type Round struct {
	// Seed and Index identify the round: it is generated from them.
	Seed  uint64
	Index int
	// PoolSize is the gateway's pool size.
	PoolSize int
	// IOLoops is the gateway's io_loops: 0 runs each session on a
	// goroutine, more on io_uring loop tasks.
	IOLoops int
	// PoolOrder is the gateway's pool.order.
	PoolOrder string
	Scripts   []Script
}

// Statements counts the steps of all scripts.
func (r *Round) Statements() int {
	n := 0
	for _, s := range r.Scripts {
		n += len(s.Steps)
	}
	return n
}

// Format renders the round as a readable script; mark (when a client
// index and step exist) flags the diverging step.
func (r *Round) Format(markClient, markStep int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "round %d of seed %d: gateway pool size %d (%s), io_loops %d, %d clients at once\n", r.Index, r.Seed, r.PoolSize, r.PoolOrder, r.IOLoops, len(r.Scripts))
	for _, s := range r.Scripts {
		fmt.Fprintf(&b, "  client %d (db %s; %s):\n", s.Client, s.DB(), s.CapsString())
		for i, st := range s.Steps {
			mark := "  "
			if s.Client == markClient && i == markStep {
				mark = "=>"
			}
			pause := ""
			if st.Pause > 0 {
				pause = "sleep " + st.Pause.String() + "; "
			}
			fmt.Fprintf(&b, "   %s %3d  %s%s\n", mark, i, pause, st)
		}
	}
	return b.String()
}

// clone returns a deep copy of the round's scripts (steps are values).
func (r *Round) clone() *Round {
	c := *r
	c.Scripts = make([]Script, len(r.Scripts))
	for i, s := range r.Scripts {
		s.Steps = append([]Step(nil), s.Steps...)
		c.Scripts[i] = s
	}
	return &c
}
