package gateway

import (
	"slices"
	"strconv"
	"time"

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
	seconds                        int64
	info                           []byte // nil: NULL
}

// processList returns the lines of the sessions the user may see: its own,
// or every one for an admin. Info is cut to 100 characters unless full, as
// MariaDB does.
func (ss *Session) processList(full bool) []processRow {
	now := time.Now()
	var out []processRow
	ss.srv.forEachSession(func(o *Session) {
		owner := o.owner.Load()
		if owner == nil || !ss.user.Admin && *owner != ss.user.User {
			return
		}
		r := processRow{id: o.id, user: *owner, host: o.nc.RemoteAddr().String()}
		o.proc.mu.Lock()
		r.command, r.db = o.proc.command, o.proc.db
		if r.command == "" {
			r.command = "Sleep"
		}
		if !o.proc.since.IsZero() {
			r.seconds = int64(now.Sub(o.proc.since) / time.Second)
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
		}
		if o == ss {
			r.state = "starting"
		}
		out = append(out, r)
	})
	slices.SortFunc(out, func(a, b processRow) int { return int(a.id) - int(b.id) })
	return out
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
	var db, state []byte
	for _, r := range ss.processList(full) {
		db, state = nil, nil
		if r.db != "" {
			db = []byte(r.db)
		}
		if r.state != "" {
			state = []byte(r.state)
		}
		row := [][]byte{strconv.AppendUint(nil, uint64(r.id), 10), []byte(r.user), []byte(r.host), db,
			[]byte(r.command), strconv.AppendInt(nil, r.seconds, 10), state, r.info, []byte("0.000")}
		if err := w.Row(row); err != nil {
			return err
		}
	}
	if err := w.End(0); err != nil {
		return err
	}
	return ss.client.Flush()
}
