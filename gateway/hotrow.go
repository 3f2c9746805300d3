package gateway

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Hot-row protection (config hot_row): a statement that changes or
// exclusively locks one row by a single-column primary or unique key
// (querypath.RowWrite) takes a slot of that row before it goes to the
// database, and keeps it until its session's transaction ends (after the
// statement itself when it runs outside a transaction). At most
// max_concurrency sessions hold a row's slot; the others wait in a FIFO
// queue of at most max_queue, for at most max_wait, and are refused with
// error 1205 beyond. So a burst of transactions on one row becomes a
// queue at the gateway instead of lock waits, threads and undo in
// MariaDB.
//
// Rows are hashed into hotRowSlots slots per cluster, so memory stays
// fixed whatever the number of rows: two rows sharing a slot are
// serialized together (never less protected, only more). A session holds
// each slot once, whatever the number of its statements on the row.

// hotRowSlots is the number of row slots of a cluster.
const hotRowSlots = 4096

// hotRowTables bounds the tables counted one by one; the others are
// counted together under hotRowOtherTables.
const (
	hotRowTables      = 64
	hotRowOtherTables = "(other tables)"
)

// hotRows is one cluster's hot-row protection: the row slots, their
// queues and the counters. The zero value is ready to use.
type hotRows struct {
	mu     sync.Mutex
	slots  [hotRowSlots]hotSlot
	tables map[string]*hotRowStats
}

// hotSlot is one row slot: the transactions holding it and those
// waiting, in order of arrival.
type hotSlot struct {
	holders []*hotTxn
	waiters []*hotWaiter
}

// hotWaiter is a session waiting for a slot; ready is closed when the
// slot is handed to it (granted, set under hotRows.mu).
type hotWaiter struct {
	ready   chan struct{}
	granted bool
	stats   *hotRowStats
	txn     *hotTxn
}

// hotTxn is a session's transaction as the slots know it: what it waits
// for, so that a wait that would close a cycle (a deadlock between
// transactions waiting at the gateway for each other's rows) is refused
// at once instead of after max_wait. One per session; nil in tests that
// need no deadlock detection.
type hotTxn struct {
	// waiting is the slot it waits for plus one (0: none), in hotRows
	// waitingIn; both guarded by that hotRows' mu.
	waiting   int
	waitingIn *hotRows
}

// blockedBy reports whether every holder of slot i waits, directly or
// through other waits, for txn: then txn waiting for slot i would never
// end. seen bounds the search (a slot met twice is a cycle that does
// not involve txn: not counted as blocked, which only makes detection
// more cautious). Called with mu held.
func (h *hotRows) blockedBy(i int, txn *hotTxn, seen map[int]bool) bool {
	if seen[i] {
		return false
	}
	seen[i] = true
	hs := h.slots[i].holders
	if len(hs) == 0 {
		return false
	}
	for _, o := range hs {
		if o == txn {
			continue
		}
		if o == nil || o.waiting == 0 || o.waitingIn != h || !h.blockedBy(o.waiting-1, txn, seen) {
			return false
		}
	}
	return true
}

// hotRowStats counts one table's queueing (guarded by hotRows.mu).
type hotRowStats struct {
	// queued is the number of sessions waiting now.
	queued int64
	// queuedTotal counts the statements that waited.
	queuedTotal int64
	// refusedFull counts the statements refused at once, the queue being
	// full; refusedWait those that waited max_wait in vain;
	// refusedDeadlock those refused at once because their wait would
	// have closed a cycle.
	refusedFull, refusedWait, refusedDeadlock int64
	// wouldQueue counts, in dry-run mode, the statements that would
	// have waited (wouldRefuse: would have been refused at once).
	wouldQueue, wouldRefuse int64
}

// hotKey names a row: its table "db.table", key column and value, all
// lower case (two spellings of one row then share a slot; two rows that
// differ only in case are serialized together, which is only more
// cautious).
type hotKey struct {
	table, column, value string
}

// slot returns the slot of row k (FNV-1a).
func (k hotKey) slot() int {
	h := uint64(14695981039346656037)
	for _, s := range [3]string{k.table, k.column, k.value} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0xff // separator
		h *= 1099511628211
	}
	return int(h % hotRowSlots)
}

// statsFor returns table's counters, creating them; past hotRowTables
// tables the rest share one entry. Called with mu held.
func (h *hotRows) statsFor(table string) *hotRowStats {
	if h.tables == nil {
		h.tables = map[string]*hotRowStats{}
	}
	if st := h.tables[table]; st != nil {
		return st
	}
	if len(h.tables) >= hotRowTables {
		table = hotRowOtherTables
		if st := h.tables[table]; st != nil {
			return st
		}
	}
	st := &hotRowStats{}
	h.tables[table] = st
	return st
}

// acquire takes the slot of row k under settings cfg (protection on),
// waiting in its queue when it is taken. held says the caller holds the
// slot and must release it; a refusal is a 1205 error for the client.
// The wait ends early when ctx ends or gone (checked every
// waitGoneCheck; may be nil) reports the client gone. block, when not
// nil, runs the wait (a session on a loop waits through Session.blocking).
func (h *hotRows) acquire(ctx context.Context, txn *hotTxn, k hotKey, cfg config.HotRow, gone func() bool, block func(func())) (held bool, refusal *wire.SQLError) {
	i := k.slot()
	h.mu.Lock()
	s := &h.slots[i]
	st := h.statsFor(k.table)
	if cfg.DryRun {
		// Counted as held, so that the counts of what would have
		// waited are right; nobody waits.
		if len(s.holders) >= cfg.MaxConcurrency {
			st.wouldQueue++
			if len(s.holders)-cfg.MaxConcurrency >= *cfg.MaxQueue {
				st.wouldRefuse++
			}
		}
		s.holders = append(s.holders, txn)
		h.mu.Unlock()
		return true, nil
	}
	if len(s.holders) < cfg.MaxConcurrency && len(s.waiters) == 0 {
		s.holders = append(s.holders, txn)
		h.mu.Unlock()
		return true, nil
	}
	if txn != nil && h.blockedBy(i, txn, map[int]bool{}) {
		st.refusedDeadlock++
		h.mu.Unlock()
		return false, wire.NewError(1205, "HY000",
			"Lock wait timeout exceeded; try restarting transaction: hot row %s key %s is held by transactions that wait at the gateway for rows this transaction holds (a deadlock, refused at once): roll back and retry the transaction",
			k.table, rowName(k))
	}
	if n := len(s.waiters); n >= *cfg.MaxQueue {
		st.refusedFull++
		h.mu.Unlock()
		return false, wire.NewError(1205, "HY000",
			"Lock wait timeout exceeded; try restarting transaction: hot row %s key %s has %d transactions queued at the gateway (hot_row.max_queue): retry the transaction",
			k.table, rowName(k), n)
	}
	w := &hotWaiter{ready: make(chan struct{}), stats: st, txn: txn}
	s.waiters = append(s.waiters, w)
	if txn != nil {
		txn.waiting, txn.waitingIn = i+1, h
	}
	st.queued++
	st.queuedTotal++
	h.mu.Unlock()

	granted, timedOut := false, false
	if block == nil {
		granted, timedOut = w.wait(ctx, cfg.MaxWait, gone)
	} else {
		block(func() { granted, timedOut = w.wait(ctx, cfg.MaxWait, gone) })
	}
	if granted {
		return true, nil // release cleared txn.waiting
	}
	h.mu.Lock()
	if w.granted {
		h.mu.Unlock()
		if timedOut {
			return true, nil // handed over just in time: the row is ours
		}
		// Handed over to a client that left: pass it on.
		h.release(txn, i, cfg.MaxConcurrency)
	} else {
		if txn != nil {
			txn.waiting, txn.waitingIn = 0, nil
		}
		for j, o := range s.waiters {
			if o == w {
				copy(s.waiters[j:], s.waiters[j+1:])
				s.waiters[len(s.waiters)-1] = nil
				s.waiters = s.waiters[:len(s.waiters)-1]
				break
			}
		}
		st.queued--
		if timedOut {
			st.refusedWait++
		}
		h.mu.Unlock()
	}
	if timedOut {
		return false, wire.NewError(1205, "HY000",
			"Lock wait timeout exceeded; try restarting transaction: waited %s at the gateway for hot row %s key %s (hot_row.max_wait): retry the transaction",
			cfg.MaxWait, k.table, rowName(k))
	}
	return false, wire.NewError(1317, "70100", "Query execution was interrupted while waiting at the gateway for hot row %s key %s", k.table, rowName(k))
}

// wait waits until w is granted its slot (granted), or ctx ends, or d
// passes (timedOut), or gone reports the client gone.
func (w *hotWaiter) wait(ctx context.Context, d time.Duration, gone func() bool) (granted, timedOut bool) {
	timeout, check, stopClocks := waitClocks(d, gone != nil)
	defer stopClocks()
	for {
		select {
		case <-w.ready:
			return true, false
		case <-ctx.Done():
			return false, false
		case <-timeout:
			return false, true
		case <-check:
			if gone() {
				return false, false
			}
		}
	}
}

// release gives back a slot taken by acquire for txn and hands it to the
// first waiters while fewer than limit sessions hold it (every waiter
// when limit is 0: protection turned off meanwhile).
func (h *hotRows) release(txn *hotTxn, i, limit int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.slots[i]
	if j := slices.Index(s.holders, txn); j >= 0 {
		last := len(s.holders) - 1
		s.holders[j] = s.holders[last]
		s.holders[last] = nil
		s.holders = s.holders[:last]
	}
	for len(s.waiters) > 0 && (limit == 0 || len(s.holders) < limit) {
		w := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		w.granted = true
		w.stats.queued--
		if w.txn != nil {
			w.txn.waiting, w.txn.waitingIn = 0, nil
		}
		s.holders = append(s.holders, w.txn)
		close(w.ready)
	}
	if len(s.waiters) == 0 {
		s.waiters = nil // let a long queue's array go
	}
}

// rowName writes the key as col=value, the value cut to 64 bytes.
func rowName(k hotKey) string {
	v := k.value
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return k.column + "=" + v
}

// hotRowRows lists the counters for SHOW GATEWAY PROTECTIONS and the
// status page: one row for the whole cluster, then one per table.
func (h *hotRows) protectionRows(cluster string, conf *config.Cluster) []ProtectionRow {
	mode := "off"
	switch {
	case conf.HotRow.MaxConcurrency > 0 && bool(conf.HotRow.DryRun):
		mode = "dry_run"
	case conf.HotRow.MaxConcurrency > 0:
		mode = "on"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	all := ProtectionRow{Protection: "hot_row", Cluster: cluster, Scope: "*", Mode: mode}
	rows := []ProtectionRow{}
	for table, st := range h.tables {
		r := ProtectionRow{Protection: "hot_row", Cluster: cluster, Scope: table, Mode: mode,
			Active: st.queued, Total: st.queuedTotal, Refused: st.refusedFull + st.refusedWait + st.refusedDeadlock,
			RefusedWait: st.refusedWait, RefusedDeadlock: st.refusedDeadlock, DryRun: st.wouldQueue, DryRunRefused: st.wouldRefuse}
		all.add(r)
		rows = append(rows, r)
	}
	sortProtectionRows(rows)
	return append([]ProtectionRow{all}, rows...)
}

// hotHold is a slot a session holds.
type hotHold struct {
	h    *hotRows
	slot int
}

// hotRowCandidate says, from the route alone, whether a statement may be
// a one-row write worth parsing for hot-row protection.
func hotRowCandidate(route querypath.Route, text string) bool {
	sql := unsafe.Slice(unsafe.StringData(text), len(text))
	if route.MultiStatement || route.Kind == querypath.KindRead {
		return false
	}
	switch route.DML {
	case querypath.DMLUpdate, querypath.DMLDelete:
		return true
	case querypath.DMLInsert:
		return containsFold(sql, "DUPLICATE")
	case querypath.DMLNone:
		return route.Kind == querypath.KindOther && containsFold(sql, "UPDATE")
	}
	return false
}

// hotRowEnter applies hot-row protection to the statement sql about to
// run in database db: it finds the row it writes (its key value from
// param when the statement is prepared) and takes that row's slot,
// waiting for it if need be. A non-nil error is the client's answer
// instead of the statement's. rw is the statement's RowWrite, or nil to
// parse sql.
func (ss *Session) hotRowEnter(db string, rw *querypath.RowWrite, param func(int) (string, bool)) *wire.SQLError {
	c := ss.cluster
	conf := c.conf.Load()
	cfg := conf.HotRow
	if cfg.MaxConcurrency == 0 {
		return nil
	}
	table := rw.Table
	if !strings.Contains(table, ".") {
		if db == "" {
			return nil // no database: the statement fails on its own
		}
		table = db + "." + table
	}
	keys, err := c.keyColumns(ss, table)
	if err != nil {
		ss.log.Debug("hot_row: cannot read the table's keys", "table", table, "error", err)
		return nil
	}
	// The row of an UPDATE, DELETE or SELECT is named by its first key
	// equality; an INSERT may meet an existing row on any of its keys,
	// so it takes every key's slot (in slot order, so that two inserts
	// never wait for each other's second slot).
	var rows []hotKey
	for _, eq := range rw.Eqs {
		if !keys[strings.ToLower(eq.Column)] {
			continue
		}
		v := eq.Value
		if eq.Param >= 0 {
			var ok bool
			if v, ok = param(eq.Param); !ok {
				continue // NULL (or unreadable): no row
			}
		}
		rows = append(rows, hotKey{table: strings.ToLower(table), column: strings.ToLower(eq.Column), value: strings.ToLower(v)})
		if !rw.Insert {
			break
		}
	}
	slices.SortFunc(rows, func(a, b hotKey) int { return a.slot() - b.slot() })
next:
	for j, k := range rows {
		i := k.slot()
		if j > 0 && rows[j-1].slot() == i {
			continue
		}
		for _, held := range ss.hotHeld {
			if held.h == &c.hot && held.slot == i {
				continue next // this transaction holds the row already
			}
		}
		ss.proc.waiting(waitHotRow)
		if ss.hotTxn == nil {
			ss.hotTxn = &hotTxn{}
		}
		var block func(func()) // on a goroutine the wait just runs
		if ss.task != nil {
			block = func(fn func()) { ss.blocking(offloadHotRow, fn) }
		}
		held, refusal := c.hot.acquire(ss.statementContext(), ss.hotTxn, k, cfg, ss.client.PeerGone, block)
		ss.proc.waiting(waitNone)
		if held {
			ss.hotHeld = append(ss.hotHeld, hotHold{h: &c.hot, slot: i})
		}
		if refusal != nil {
			return refusal
		}
	}
	return nil
}

// hotRowText applies hot-row protection to text statement sql.
func (ss *Session) hotRowText(route querypath.Route, sql string) *wire.SQLError {
	if ss.cluster == nil || ss.cluster.conf.Load().HotRow.MaxConcurrency == 0 || !hotRowCandidate(route, sql) {
		return nil
	}
	rw, ok := ss.srv.classifier.HotRow(sql)
	if !ok {
		return nil
	}
	return ss.hotRowEnter(ss.db, &rw, nil)
}

// hotRowExecute applies hot-row protection to an execute (packet p) of
// prepared statement st.
func (ss *Session) hotRowExecute(st *stmt, p []byte) *wire.SQLError {
	if ss.cluster == nil || ss.cluster.conf.Load().HotRow.MaxConcurrency == 0 {
		return nil
	}
	if !st.hotChecked {
		st.hotChecked = true
		if hotRowCandidate(st.route, st.sql) {
			if rw, ok := ss.srv.classifier.HotRow(st.sql); ok {
				st.hot = &rw
			}
		}
	}
	if st.hot == nil {
		return nil
	}
	var params []wire.Param
	param := func(i int) (string, bool) {
		if params == nil {
			var err error
			params, err = wire.ParseExecuteParams(p, int(st.params), st.types, st.longDataOf)
			if err != nil {
				return "", false
			}
		}
		if i >= len(params) || params[i].Null {
			return "", false
		}
		lf := literalFormat{noBackslash: ss.status&wire.StatusNoBackslashEscapes != 0, charset: ss.backslashCharset()}
		lit, sqlErr := lf.literal(params[i])
		if sqlErr != nil {
			return "", false
		}
		if len(lit) >= 2 && lit[0] == '\'' && lit[len(lit)-1] == '\'' {
			lit = lit[1 : len(lit)-1] // a string: its contents, as the text path keys it
		}
		return lit, true
	}
	return ss.hotRowEnter(st.db, st.hot, param)
}

// hotRowsEnd gives the session's rows back when the statement's final OK
// or EOF (res) says no transaction is open any more. It runs in the
// relay's BeforeEnd (endHook): before that packet reaches the client, so
// a client that ends its transaction and at once starts the next one on
// another connection finds the row free. (After an error the rows are
// given back once the session has asked the server, in dispatch.)
func (ss *Session) hotRowsEnd(res *wire.Result) {
	if res.Err == nil && res.Status&(wire.StatusInTrans|wire.StatusMoreResults) == 0 {
		ss.releaseHotRows()
	}
}

// releaseHotRows gives back every row slot the session holds: its
// transaction is over (or the session is).
func (ss *Session) releaseHotRows() {
	limit := 0
	if ss.cluster != nil {
		limit = ss.cluster.conf.Load().HotRow.MaxConcurrency
	}
	for _, held := range ss.hotHeld {
		held.h.release(ss.hotTxn, held.slot, limit)
	}
	clear(ss.hotHeld)
	ss.hotHeld = ss.hotHeld[:0]
}

// keyColumns returns the columns of table "db.table" that are a
// single-column primary or unique key, lower case, asking the primary
// the first time. The cache is bounded (emptied when full) and emptied by
// a reload.
// changesSchema reports whether sql, a statement that commits implicitly
// (querypath.Route.ImplicitCommit), may change a table's keys: it starts
// with ALTER, CREATE, DROP, RENAME or TRUNCATE (a leading comment hides
// it: the cache is then forgotten at the next reload).
func changesSchema(sql string) bool {
	w, _ := firstWord(unsafe.Slice(unsafe.StringData(sql), len(sql)))
	for _, k := range [...]string{"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"} {
		if eqFold(w, k) {
			return true
		}
	}
	return false
}

func (c *cluster) keyColumns(ss *Session, table string) (map[string]bool, error) {
	c.keyMu.Lock()
	keys, ok := c.keys[table]
	c.keyMu.Unlock()
	if ok {
		return keys, nil
	}
	keys = map[string]bool{}
	err := c.queryPrimary(ss, "SELECT MIN(COLUMN_NAME) FROM information_schema.STATISTICS WHERE "+tableIs(table)+
		" AND NON_UNIQUE = 0 GROUP BY INDEX_NAME HAVING COUNT(*) = 1", func(row [][]byte) {
		if len(row) == 1 && row[0] != nil {
			keys[strings.ToLower(string(row[0]))] = true
		}
	})
	if err != nil {
		return nil, err
	}
	c.keyMu.Lock()
	if c.keys == nil || len(c.keys) >= maxKeyTables {
		c.keys = map[string]map[string]bool{}
	}
	c.keys[table] = keys
	c.keyMu.Unlock()
	return keys, nil
}

// maxKeyTables bounds the tables whose keys a cluster remembers.
const maxKeyTables = 10000

// forgetKeys empties the key column cache: on a reload, and after a
// statement through the gateway that may have changed a table's keys
// (ALTER, CREATE, DROP, RENAME, TRUNCATE).
func (c *cluster) forgetKeys() {
	c.keyMu.Lock()
	c.keys = nil
	c.keyMu.Unlock()
}
