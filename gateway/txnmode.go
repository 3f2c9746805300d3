package gateway

import (
	"strings"
	"unsafe"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// The session variable transaction_mode is the gateway's: SET
// transaction_mode = 'single' | 'multi' | 'twopc' (or DEFAULT, the
// user's configured mode) and SELECT @@transaction_mode are answered
// without a backend.

// txnModeVar is the variable's name.
const txnModeVar = "transaction_mode"

// setsTxnMode reports whether the SET assigns transaction_mode.
func (ss *Session) setsTxnMode(route querypath.Route) bool {
	for _, v := range route.Vars {
		if v.Name == txnModeVar {
			return true
		}
	}
	return false
}

// readsTxnMode reports whether the read sql may name @@transaction_mode:
// one byte scan for most statements.
func readsTxnMode(sql string) bool {
	return strings.IndexByte(sql, '@') >= 0 && querypath.ContainsFold(unsafe.Slice(unsafe.StringData(sql), len(sql)), "TRANSACTION_MODE")
}

// txnModeStatement answers a SET or a SELECT of transaction_mode.
func (ss *Session) txnModeStatement(sql string, route querypath.Route) error {
	if route.Kind == querypath.KindSet {
		if len(route.Vars) != 1 || route.MultiStatement {
			return ss.writeLocalErr(wire.NewError(1235, "42000", "This version of the gateway doesn't yet support SET transaction_mode with other variables: set it in a statement of its own"))
		}
		v := strings.ToLower(strings.Trim(route.Vars[0].Value, "'\""))
		switch v {
		case "default":
			v = ss.user.TransactionMode
		case config.TxnSingle, config.TxnMulti, config.TxnTwoPC:
		default:
			return ss.writeLocalErr(wire.NewError(1231, "42000", "Variable 'transaction_mode' can't be set to the value of '%s'", strings.Trim(route.Vars[0].Value, "'\"")))
		}
		ss.txnMode = strings.Clone(v) // v may point into the read buffer
		ss.srv.metrics.statement(routeLocal, outcomeOK, 0)
		return ss.writeOK(wire.OK{Status: ss.status})
	}
	name, ok := txnModeSelect(sql)
	if !ok {
		return ss.writeLocalErr(wire.NewError(1235, "42000", "This version of the gateway doesn't yet support @@transaction_mode inside another statement: read it alone, SELECT @@transaction_mode"))
	}
	ss.srv.metrics.statement(routeLocal, outcomeOK, 0)
	ss.diag.rowCount = -1
	w := wire.ResultWriter{Conn: ss.client, Caps: ss.caps, Status: ss.status}
	if err := w.Columns([]wire.Column{{Name: name, Charset: 33, Length: 20, Type: wire.TypeVarString}}); err != nil {
		return err
	}
	if err := w.Row([][]byte{[]byte(ss.txnMode)}); err != nil {
		return err
	}
	if err := w.End(0); err != nil {
		return err
	}
	return ss.client.Flush()
}

// writeLocalErr sends an error the gateway answers itself and counts it.
func (ss *Session) writeLocalErr(e *wire.SQLError) error {
	ss.srv.metrics.statement(routeLocal, outcomeError, 0)
	return ss.writeErr(e)
}

// txnModeSelect reads SELECT @@[session.|local.]transaction_mode [[AS]
// alias] [;] and returns the result column's name (the expression as
// written, or the alias).
func txnModeSelect(sql string) (name string, ok bool) {
	f := strings.Fields(strings.TrimRight(strings.TrimSpace(sql), "; \t\n"))
	if len(f) < 2 || !strings.EqualFold(f[0], "select") {
		return "", false
	}
	expr := strings.ToLower(f[1])
	switch expr {
	case "@@transaction_mode", "@@session.transaction_mode", "@@local.transaction_mode":
	default:
		return "", false
	}
	switch {
	case len(f) == 2:
		return f[1], true
	case len(f) == 3:
		return strings.Trim(f[2], "`'\""), true
	case len(f) == 4 && strings.EqualFold(f[2], "as"):
		return strings.Trim(f[3], "`'\""), true
	}
	return "", false
}
