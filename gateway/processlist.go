package gateway

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/querypath"

	"github.com/directgate/directgate/wire"
)

// The gateway's ids everywhere: CONNECTION_ID() and SHOW PROCESSLIST speak
// of the gateway's sessions (the ids of the handshake and of KILL), not of
// the backend connections that serve them, which change from statement to
// statement and which every user of a shared backend account could see.

// answerConnectionID answers SELECT CONNECTION_ID() with the session's
// gateway id, under the column name the client used. The result is
// MariaDB's: INT UNSIGNED NOT NULL.
func (ss *Session) answerConnectionID(name string) error {
	col := wire.Column{Name: name, Type: wire.TypeLong, Charset: wire.BinaryCollation, Length: 10,
		Flags: wire.FlagNotNull | wire.FlagUnsigned | wire.FlagBinary | wire.FlagNum}
	ss.diag.rowCount = -1
	ss.diag.onConn &^= diagRowCount
	w := wire.ResultWriter{Conn: ss.client, Caps: ss.caps, Status: ss.status}
	if err := w.Columns([]wire.Column{col}); err != nil {
		return err
	}
	var b [10]byte
	if err := w.Row([][]byte{strconv.AppendUint(b[:0], uint64(ss.id), 10)}); err != nil {
		return err
	}
	if err := w.End(0); err != nil {
		return err
	}
	return ss.client.Flush()
}

// processRow is one session's line of SHOW PROCESSLIST.
type processRow struct {
	id                             uint32
	user, host, db, command, state string
	elapsed                        time.Duration // since the command started
	info                           []byte        // nil: NULL
	progress                       string        // "" is 0.000
}

// backendThread names the backend thread running a listed session's
// statement: row out[row] is running on thread id of backend be, account
// key.
type backendThread struct {
	be  *backend
	key poolKey
	id  uint32
	row int
}

// processList returns the lines of the sessions the user may see: its own,
// or every one for a user who sees all (seesAll). Info is cut to 100
// characters unless full, as MariaDB does. self is the State of the
// session's own line ("starting" for SHOW PROCESSLIST, "Filling schema
// table" for a read of information_schema.PROCESSLIST, as MariaDB shows
// them). A session whose statement runs on a backend connection shows that
// backend thread's State, Time, Progress and Info, read now from the
// backend (readBackendThreads); one waiting at the gateway shows what it
// waits for.
func (ss *Session) processList(full bool, self string) []processRow {
	all := ss.seesAll()
	now := time.Now()
	var out []processRow
	var threads []backendThread
	ss.srv.forEachSession(func(o *Session) {
		owner := o.owner.Load()
		if owner == nil || !all && *owner != ss.user.User {
			return
		}
		r := processRow{id: o.id, user: *owner, host: o.nc.RemoteAddr().String()}
		o.proc.mu.Lock()
		r.command, r.db = o.proc.command, o.proc.db
		if r.command == "" {
			r.command = "Sleep"
		}
		if !o.proc.since.IsZero() {
			r.elapsed = now.Sub(o.proc.since)
		}
		if o.proc.sql != "" {
			sql := o.proc.sql
			if !full {
				sql = truncateChars(sql, 100)
			}
			r.info = []byte(sql) // a copy: the text lives in o's read buffer
		}
		o.proc.mu.Unlock()
		if r.command != "Sleep" {
			r.state = "executing"
			if w := gatewayWait(o.proc.wait.Load()); w != waitNone {
				r.state = w.state()
			} else if bc := o.inFlight.Load(); bc != nil && bc.be != nil && o != ss {
				k := bc.key
				k.foundRows = false
				threads = append(threads, backendThread{be: bc.be, key: k, id: bc.Greeting.ConnectionID, row: len(out)})
			}
		}
		if o == ss {
			r.state = self
		}
		out = append(out, r)
	})
	if len(threads) > 0 {
		ss.readBackendThreads(out, threads, full)
	}
	slices.SortFunc(out, func(a, b processRow) int { return int(a.id) - int(b.id) })
	return out
}

// maxThreadReads bounds the backend reads one process list makes (one per
// backend and account with statements running).
const maxThreadReads = 16

// readBackendThreads fills in the State, Time, Progress and Info of the
// rows whose statements run on backend threads, as the backends' own
// information_schema.PROCESSLIST shows them. Each backend and account is
// asked once, on its side connection (an account sees its own threads
// without PROCESS). A thread the backend no longer lists (the statement
// just ended), or a backend that does not answer, leaves the gateway's
// view of the row.
func (ss *Session) readBackendThreads(out []processRow, threads []backendThread, full bool) {
	slices.SortFunc(threads, func(a, b backendThread) int {
		if c := strings.Compare(a.be.addr, b.be.addr); c != 0 {
			return c
		}
		if c := strings.Compare(a.key.user, b.key.user); c != 0 {
			return c
		}
		return int(a.id) - int(b.id)
	})
	ss.blocking(offloadOwnQuery, func() {
		reads := 0
		for i := 0; i < len(threads) && reads < maxThreadReads; reads++ {
			j := i + 1
			for j < len(threads) && threads[j].be == threads[i].be && threads[j].key == threads[i].key {
				j++
			}
			group := threads[i:j]
			i = j
			q := make([]byte, 0, 128)
			q = append(q, "SELECT ID, STATE, TIME_MS, PROGRESS, INFO FROM information_schema.PROCESSLIST WHERE ID IN ("...)
			for n, t := range group {
				if n > 0 {
					q = append(q, ',')
				}
				q = strconv.AppendUint(q, uint64(t.id), 10)
			}
			q = append(q, ')')
			err := group[0].be.sideConn(group[0].key, func(conn *backendConn) error {
				return conn.QueryRows(string(q), func(row [][]byte) {
					if len(row) != 5 || row[0] == nil {
						return
					}
					id, err := strconv.ParseUint(string(row[0]), 10, 32)
					if err != nil {
						return
					}
					for _, t := range group {
						if uint64(t.id) != id {
							continue
						}
						r := &out[t.row]
						r.state = string(row[1])
						if ms, err := strconv.ParseFloat(string(row[2]), 64); err == nil {
							r.elapsed = time.Duration(ms * float64(time.Millisecond))
						}
						r.progress = string(row[3])
						if row[4] != nil {
							info := string(row[4])
							if !full {
								info = truncateChars(info, 100)
							}
							r.info = []byte(info)
						}
					}
				})
			})
			if err != nil {
				ss.log.Debug("cannot read the backend threads' states", "backend", group[0].be.addr, "error", err)
			}
		}
	})
}

// truncateChars cuts s to at most n characters (not bytes).
func truncateChars(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// showProcessList answers SHOW [FULL] PROCESSLIST with the gateway's
// sessions the user may see, in MariaDB's columns: Id, User, Host, db,
// Command, Time, State, Info, Progress. The column definitions are
// MariaDB's for the session's character set (utf8mb4 lengths).
func (ss *Session) showProcessList(full bool) error {
	str := func(name string, length uint32, notNull bool) wire.Column {
		c := wire.Column{Name: name, Type: wire.TypeVarString, Charset: uint16(wire.DefaultCollation), Length: length, Decimals: 39}
		if notNull {
			c.Flags = wire.FlagNotNull
		}
		return c
	}
	num := func(name string, typ byte, length uint32) wire.Column {
		return wire.Column{Name: name, Type: typ, Charset: wire.BinaryCollation, Length: length,
			Flags: wire.FlagNotNull | wire.FlagBinary | wire.FlagNum}
	}
	info := wire.Column{Name: "Info", Type: wire.TypeLongBlob, Charset: uint16(wire.DefaultCollation), Length: 201326592, Decimals: 39}
	progress := num("Progress", wire.TypeDouble, 7)
	progress.Decimals = 3
	cols := []wire.Column{num("Id", wire.TypeLongLong, 11), str("User", 512, true), str("Host", 256, true), str("db", 256, false),
		str("Command", 64, true), num("Time", wire.TypeLong, 7), str("State", 120, false), info, progress}
	ss.diag.rowCount = -1
	ss.diag.onConn &^= diagRowCount
	w := wire.ResultWriter{Conn: ss.client, Caps: ss.caps, Status: ss.status}
	if err := w.Columns(cols); err != nil {
		return err
	}
	var db []byte
	for _, r := range ss.processList(full, "starting") {
		db = nil
		if r.db != "" {
			db = []byte(r.db)
		}
		progress := r.progress
		if progress == "" {
			progress = "0.000"
		}
		// State is never NULL: a sleeping thread's is empty, as MariaDB's.
		row := [][]byte{strconv.AppendUint(nil, uint64(r.id), 10), []byte(r.user), []byte(r.host), db,
			[]byte(r.command), strconv.AppendInt(nil, int64(r.elapsed/time.Second), 10), []byte(r.state), r.info, []byte(progress)}
		if err := w.Row(row); err != nil {
			return err
		}
	}
	if err := w.End(0); err != nil {
		return err
	}
	return ss.client.Flush()
}

// withGatewayIDs returns COM_QUERY p with CONNECTION_ID() and
// information_schema.PROCESSLIST speaking of the gateway's sessions
// (querypath.RewriteGatewayIDs), or p itself where the text must go as
// written.
func (ss *Session) withGatewayIDs(p []byte, sql string) []byte {
	out, ok := querypath.RewriteGatewayIDs(sql, ss.status&wire.StatusNoBackslashEscapes != 0, ss.id, ss.gatewayTable)
	if !ok {
		return p
	}
	return append([]byte{wire.ComQuery}, out...)
}

// ownMemory and ownMaxMemory read MEMORY_USED and MAX_MEMORY_USED of the
// backend thread that runs the statement.
const (
	ownMemory    = "(SELECT MEMORY_USED FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID())"
	ownMaxMemory = "(SELECT MAX_MEMORY_USED FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID())"
)

// processListTable is a SELECT of the sessions the user may see in the
// columns of information_schema.PROCESSLIST, to stand for that table. The
// strings are utf8mb3_general_ci with implicit coercibility (CONVERT ...
// USING), as the table's columns are, so comparisons with the session's
// literals behave the same; INFO_BINARY is binary.
func (ss *Session) processListTable() string {
	var b strings.Builder
	str := func(s string, null bool) {
		if null {
			b.WriteString("NULL")
			return
		}
		b.WriteString("CONVERT(X'")
		b.WriteString(hex.EncodeToString([]byte(s)))
		b.WriteString("' USING utf8mb3)")
	}
	rows := ss.processList(true, "Filling schema table")
	// MariaDB lists its threads newest first.
	slices.Reverse(rows)
	for i, r := range rows {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("SELECT ")
		b.WriteString(strconv.FormatUint(uint64(r.id), 10))
		b.WriteString(" AS ID, ")
		str(r.user, false)
		b.WriteString(" AS USER, ")
		str(r.host, false)
		b.WriteString(" AS HOST, ")
		str(r.db, r.db == "")
		b.WriteString(" AS DB, ")
		str(r.command, false)
		b.WriteString(" AS COMMAND, ")
		b.WriteString(strconv.FormatInt(int64(r.elapsed/time.Second), 10))
		b.WriteString(" AS TIME, ")
		str(r.state, false)
		b.WriteString(" AS STATE, ")
		str(string(r.info), r.info == nil)
		b.WriteString(" AS INFO, ")
		b.WriteString(strconv.FormatFloat(float64(r.elapsed.Microseconds())/1000, 'f', 3, 64))
		b.WriteString(" AS TIME_MS, 0 AS STAGE, 0 AS MAX_STAGE, ")
		if p, err := strconv.ParseFloat(r.progress, 64); err == nil {
			b.WriteString(strconv.FormatFloat(p, 'f', 3, 64))
		} else {
			b.WriteString("0.000")
		}
		if r.id == ss.id {
			// The session's own memory is that of the backend thread
			// serving this statement (a user variable it holds, ...).
			b.WriteString(" AS PROGRESS, " + ownMemory + " AS MEMORY_USED, " + ownMaxMemory +
				" AS MAX_MEMORY_USED, 0 AS EXAMINED_ROWS, 0 AS QUERY_ID, ")
		} else {
			b.WriteString(" AS PROGRESS, 0 AS MEMORY_USED, 0 AS MAX_MEMORY_USED, 0 AS EXAMINED_ROWS, 0 AS QUERY_ID, ")
		}
		if r.info == nil {
			b.WriteString("NULL")
		} else {
			b.WriteString("X'")
			b.WriteString(hex.EncodeToString(r.info))
			b.WriteString("'")
		}
		b.WriteString(" AS INFO_BINARY, 0 AS TID")
	}
	return b.String()
}
