package gateway

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/directgate/directgate/querypath"
)

// Connection attributes. A client sends its attributes (program_name,
// _client_name, ...) to the gateway; the backend connection that serves
// it carries the gateway's. Reads of performance_schema's
// session_connect_attrs and session_account_connect_attrs are given a
// derived table of the attributes the gateway's sessions sent, with the
// gateway's ids, as processListTable is for PROCESSLIST.

// gatewayTable is the derived table that stands for t in a statement
// (querypath.RewriteGatewayIDs).
func (ss *Session) gatewayTable(t querypath.GatewayTable) string {
	if t == querypath.TableProcessList {
		return ss.processListTable()
	}
	return ss.connectAttrsTable(t == querypath.TableAccountConnectAttrs)
}

// sessionAttrs is one session's attributes.
type sessionAttrs struct {
	id    uint32
	attrs []attrPair
}

// attrPair is a copy of one attribute.
type attrPair struct{ name, value string }

// connectAttrs returns the attributes of the sessions whose attributes
// the user may read, by id: its own sessions', or every session's for a
// user who sees all (seesAll); with account, only the sessions of its own
// user, as session_account_connect_attrs lists those of the account.
func (ss *Session) connectAttrs(account bool) []sessionAttrs {
	all := ss.seesAll() && !account
	var out []sessionAttrs
	ss.srv.forEachSession(func(o *Session) {
		owner := o.owner.Load()
		if owner == nil || !all && *owner != ss.user.User {
			return
		}
		sa := sessionAttrs{id: o.id}
		for _, a := range o.attrs {
			sa.attrs = append(sa.attrs, attrPair{a.Name, a.Value})
		}
		out = append(out, sa)
	})
	slices.SortFunc(out, func(a, b sessionAttrs) int { return int(a.id) - int(b.id) })
	return out
}

// connectAttrsTable is a SELECT in the columns of performance_schema's
// session_connect_attrs (querypath.ConnectAttrsColumns): one row per
// attribute of each session the user may read, its ORDINAL_POSITION the
// attribute's place in what the client sent. Strings are utf8mb3, as the
// table's columns are.
func (ss *Session) connectAttrsTable(account bool) string {
	var b strings.Builder
	str := func(s string) {
		b.WriteString("CONVERT(X'")
		b.WriteString(hex.EncodeToString([]byte(s)))
		b.WriteString("' USING utf8mb3)")
	}
	n := 0
	for _, sa := range ss.connectAttrs(account) {
		for i, a := range sa.attrs {
			if n > 0 {
				b.WriteString(" UNION ALL ")
			}
			n++
			b.WriteString("SELECT ")
			b.WriteString(strconv.FormatUint(uint64(sa.id), 10))
			b.WriteString(" AS PROCESSLIST_ID, ")
			str(a.name)
			b.WriteString(" AS ATTR_NAME, ")
			str(a.value)
			b.WriteString(" AS ATTR_VALUE, ")
			b.WriteString(strconv.Itoa(i))
			b.WriteString(" AS ORDINAL_POSITION")
		}
	}
	if n == 0 {
		return "SELECT 0 AS PROCESSLIST_ID, CONVERT('' USING utf8mb3) AS ATTR_NAME, " +
			"CONVERT('' USING utf8mb3) AS ATTR_VALUE, 0 AS ORDINAL_POSITION FROM DUAL WHERE 0"
	}
	return b.String()
}
