package gateway

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/internal/twopc"
	"github.com/directgate/directgate/wire"
)

// spanView is what other goroutines (SHOW GATEWAY TRANSACTIONS, the
// status page) see of a session's transaction over clusters.
type spanView struct {
	mode, gtrid string
	parts       []string
	start       time.Time
}

// publishSpan shows the session's span transaction to other goroutines,
// or that it has none.
func (ss *Session) publishSpan() {
	if !ss.txn.active || len(ss.txn.parts) == 0 {
		if ss.spanPublished.Load() != nil {
			ss.spanPublished.Store(nil)
		}
		return
	}
	if v := ss.spanPublished.Load(); v != nil && len(v.parts) == len(ss.txn.parts) && v.start == ss.txn.start {
		return // as published
	}
	v := &spanView{mode: ss.txn.mode, gtrid: ss.txn.gtrid, start: ss.txn.start}
	for _, c := range ss.txn.parts {
		v.parts = append(v.parts, c.name)
	}
	ss.spanPublished.Store(v)
}

// TransactionRow is one transaction over clusters, for SHOW GATEWAY
// TRANSACTIONS and the status page: one under way in a session of this
// gateway (State "in_flight"), or a branch prepared on a cluster (State
// "prepared": under commit, or in doubt until the resolver ends it).
type TransactionRow struct {
	State, Mode, Gtrid, Clusters string
	Session                      uint32
	Age                          time.Duration
}

// Transactions lists the transactions over clusters of this gateway's
// sessions.
func (s *Server) Transactions() []TransactionRow {
	now := time.Now()
	var out []TransactionRow
	s.forEachSession(func(ss *Session) {
		if v := ss.spanPublished.Load(); v != nil {
			out = append(out, TransactionRow{State: "in_flight", Mode: v.mode, Gtrid: v.gtrid, Clusters: strings.Join(v.parts, ","),
				Session: ss.id, Age: now.Sub(v.start)})
		}
	})
	slices.SortFunc(out, func(a, b TransactionRow) int { return int(b.Age - a.Age) })
	return out
}

// preparedBranches lists the gateway's XA branches prepared on every
// cluster's primary (XA RECOVER as the session's backend account); a
// cluster that cannot answer is named in errs.
func (ss *Session) preparedBranches() (rows []TransactionRow, errs []string) {
	now := time.Now()
	home := ss.cluster
	defer func() { ss.cluster = home }()
	for _, name := range ss.srv.clusterNames {
		c := ss.srv.clusters[name]
		ss.cluster = c
		err := c.queryPrimary(ss, "XA RECOVER", func(row [][]byte) {
			if len(row) != 4 {
				return
			}
			format, _ := strconv.Atoi(string(row[0]))
			gl, _ := strconv.Atoi(string(row[1]))
			bl, _ := strconv.Atoi(string(row[2]))
			data := row[3]
			if format != twopc.FormatID || gl+bl > len(data) {
				return
			}
			g := string(data[:gl])
			started, ok := twopc.Started(g)
			if !ok {
				return
			}
			rows = append(rows, TransactionRow{State: "prepared", Mode: "twopc", Gtrid: g, Clusters: string(data[gl : gl+bl]), Age: now.Sub(started)})
		})
		if err != nil {
			errs = append(errs, name+": "+err.Error())
		}
	}
	return rows, errs
}

// showTransactions answers SHOW GATEWAY TRANSACTIONS.
func (ss *Session) showTransactions() ([]wire.Column, [][][]byte) {
	str := func(s string) []byte { return []byte(s) }
	cols := []wire.Column{
		{Name: "State", Charset: 33, Length: 256, Type: wire.TypeVarString},
		{Name: "Mode", Charset: 33, Length: 256, Type: wire.TypeVarString},
		{Name: "Gtrid", Charset: 33, Length: 256, Type: wire.TypeVarString},
		{Name: "Clusters", Charset: 33, Length: 256, Type: wire.TypeVarString},
		{Name: "Session", Charset: wire.BinaryCollation, Length: 20, Type: wire.TypeLongLong, Flags: wire.FlagNum},
		{Name: "Age_seconds", Charset: 33, Length: 256, Type: wire.TypeVarString},
	}
	list := ss.srv.Transactions()
	prepared, errs := ss.preparedBranches()
	list = append(list, prepared...)
	var rows [][][]byte
	for _, r := range list {
		sess := []byte(nil)
		if r.Session != 0 {
			sess = strconv.AppendUint(nil, uint64(r.Session), 10)
		}
		rows = append(rows, [][]byte{str(r.State), str(r.Mode), str(r.Gtrid), str(r.Clusters), sess,
			strconv.AppendFloat(nil, r.Age.Seconds(), 'f', 3, 64)})
	}
	for _, e := range errs {
		rows = append(rows, [][]byte{str("unknown"), nil, nil, str(e), nil, nil})
	}
	return cols, rows
}
