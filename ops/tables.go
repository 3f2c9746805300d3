package ops

import (
	"strconv"
	"time"
)

// Column is a column of a SHOW GATEWAY table: its name, and whether it
// holds numbers (the rest is text).
type Column struct {
	Name    string
	Numeric bool
}

// Table is the answer of a SHOW GATEWAY statement: columns, and rows of
// values in their text form (nil: NULL).
type Table struct {
	Columns []Column
	Rows    [][][]byte
}

// ShowGateway is the table of SHOW GATEWAY what: backends, pools,
// sessions or protections; ok false for anything else.
func ShowGateway(g Gateway, what string) (t Table, ok bool) {
	switch what {
	case "backends":
		return backendsTable(g.HealthView()), true
	case "pools":
		return poolsTable(g.PoolStats()), true
	case "sessions":
		return sessionsTable(g.Sessions()), true
	case "protections":
		return protectionsTable(g), true
	}
	return Table{}, false
}

func str(s string) []byte     { return []byte(s) }
func num(n int64) []byte      { return strconv.AppendInt(nil, n, 10) }
func text(name string) Column { return Column{Name: name} }
func number(name string) Column {
	return Column{Name: name, Numeric: true}
}
func millis(v float64) []byte { return strconv.AppendFloat(nil, v, 'f', 3, 64) }

// backendsTable is SHOW GATEWAY BACKENDS: every backend discovery knows,
// with its load.
func backendsTable(h HealthView) Table {
	t := Table{Columns: []Column{text("Cluster"), text("Backend"), text("Role"), text("State"), text("Reason"), text("Since"),
		text("Lag_seconds"), text("Probe_ms"), text("Score_ms"), number("In_flight"), number("Server_id"), text("Slow")}}
	for _, c := range h.Clusters {
		for _, b := range c.Backends {
			var lag []byte
			if b.LagSeconds != nil {
				lag = strconv.AppendFloat(nil, *b.LagSeconds, 'f', 0, 64)
			}
			t.Rows = append(t.Rows, [][]byte{str(c.Name), str(b.Addr), str(b.Role), str(b.State), str(b.Reason),
				str(b.Since.UTC().Format(time.RFC3339)), lag, millis(b.ProbeMillis), millis(b.ScoreMillis),
				num(b.InFlight), num(int64(b.ServerID)), yesNo(b.Slow)})
		}
	}
	return t
}

// yesNo is a flag as SHOW GATEWAY tables write it.
func yesNo(b bool) []byte {
	if b {
		return str("yes")
	}
	return str("no")
}

// poolsTable is SHOW GATEWAY POOLS.
func poolsTable(stats []PoolStat) Table {
	t := Table{Columns: []Column{text("Cluster"), text("Backend"), text("Kind"), number("Size"),
		number("Open"), number("In_use"), number("Idle"), number("Dialing"), number("Waits"),
		number("Wait_ms"), number("Dials"), number("Dial_errors"), number("Destroyed"), number("Acquire_timeouts"),
		text("Backend_user"), text("Order"), number("Acquires")}}
	for _, p := range stats {
		t.Rows = append(t.Rows, [][]byte{str(p.Cluster), str(p.Backend), str(p.Kind()), num(int64(p.Size)), num(int64(p.Open)),
			num(int64(p.InUse)), num(int64(p.Idle)), num(int64(p.Dialing)), num(p.Waits), num(p.WaitTime.Milliseconds()),
			num(p.Dials), num(p.DialErrors), num(p.Destroyed), num(p.AcquireTimeouts), str(p.BackendUser),
			str(p.Order.String()), num(p.Acquires)})
	}
	return t
}

// sessionsTable is SHOW GATEWAY SESSIONS.
func sessionsTable(sessions []SessionInfo) Table {
	t := Table{Columns: []Column{number("Id"), text("User"), text("Client"), text("Busy"),
		text("In_transaction"), text("Pinned"), text("Backend")}}
	for _, si := range sessions {
		t.Rows = append(t.Rows, [][]byte{num(int64(si.ID)), str(si.User), str(si.Client), yesNo(si.Busy), yesNo(si.InTxn), str(si.Pinned), str(si.Backend)})
	}
	return t
}

// protectionsTable is SHOW GATEWAY PROTECTIONS.
func protectionsTable(g Gateway) Table {
	t := Table{Columns: []Column{text("Protection"), text("Cluster"), text("Scope"), text("Mode"),
		number("Active"), number("Total"), number("Refused"), number("Refused_wait"),
		number("Dry_run"), number("Dry_run_refused"), text("Rate"), text("Refused_rate"), text("Detail")}}
	rate := func(r float64) []byte { return strconv.AppendFloat(nil, r, 'f', 2, 64) }
	for _, p := range g.Protections() {
		t.Rows = append(t.Rows, [][]byte{str(p.Protection), str(p.Cluster), str(p.Scope), str(p.Mode), num(p.Active), num(p.Total),
			num(p.Refused), num(p.RefusedWait), num(p.DryRun), num(p.DryRunRefused), rate(p.Rate), rate(p.RefusedRate), str(p.Detail)})
	}
	return t
}
