package protect

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

// HotRows is one cluster's hot-row protection: the row slots, their
// queues and the counters. Made by NewHotRows; the zero value serves
// the engine alone (tests).
type HotRows struct {
	Hooks
	// classify finds the one row a statement writes (querypath's
	// Classifier.HotRow); conf reads the cluster's settings now.
	classify func(sql string) (querypath.RowWrite, bool)
	conf     func() *config.Cluster

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
// slot is handed to it (granted, set under HotRows.mu).
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
	// waiting is the slot it waits for plus one (0: none), in HotRows
	// waitingIn; both guarded by that HotRows' mu.
	waiting   int
	waitingIn *HotRows
}

// blockedBy reports whether every holder of slot i waits, directly or
// through other waits, for txn: then txn waiting for slot i would never
// end. seen bounds the search (a slot met twice is a cycle that does
// not involve txn: not counted as blocked, which only makes detection
// more cautious). Called with mu held.
func (h *HotRows) blockedBy(i int, txn *hotTxn, seen map[int]bool) bool {
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

// hotRowStats counts one table's queueing (guarded by HotRows.mu).
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
func (h *HotRows) statsFor(table string) *hotRowStats {
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
func (h *HotRows) acquire(ctx context.Context, txn *hotTxn, k hotKey, cfg config.HotRow, gone func() bool, block func(func())) (held bool, refusal *wire.SQLError) {
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
	timeout, check, stopClocks := WaitClocks(d, gone != nil)
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
func (h *HotRows) release(txn *hotTxn, i, limit int) {
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

// Rows implements Policy: one row for the whole cluster, then one per
// table.
func (h *HotRows) Rows(conf *config.Cluster) []Row {
	mode := "off"
	switch {
	case conf.HotRow.MaxConcurrency > 0 && bool(conf.HotRow.DryRun):
		mode = "dry_run"
	case conf.HotRow.MaxConcurrency > 0:
		mode = "on"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	all := Row{Scope: "*", Mode: mode}
	rows := []Row{}
	for table, st := range h.tables {
		r := Row{Scope: table, Mode: mode,
			Active: st.queued, Total: st.queuedTotal, Refused: st.refusedFull + st.refusedWait + st.refusedDeadlock,
			RefusedWait: st.refusedWait, RefusedDeadlock: st.refusedDeadlock, DryRun: st.wouldQueue, DryRunRefused: st.wouldRefuse}
		all.Add(r)
		rows = append(rows, r)
	}
	SortRows(rows)
	return append([]Row{all}, rows...)
}

// NewHotRows returns a cluster's hot-row protection. classify finds the
// one row a statement writes (querypath.Classifier.HotRow); conf reads
// the cluster's settings now.
func NewHotRows(classify func(sql string) (querypath.RowWrite, bool), conf func() *config.Cluster) *HotRows {
	return &HotRows{classify: classify, conf: conf}
}

// Name implements Policy.
func (h *HotRows) Name() string { return "hot_row" }

// hotHold is a slot a session holds.
type hotHold struct {
	h    *HotRows
	slot int
}

// hotSession is a session's part in hot-row protection: the slots its
// transaction holds (of any cluster), given back when the transaction
// ends, and its transaction as the slots see it, made on first use.
type hotSession struct {
	holds []hotHold
	txn   *hotTxn
}

// release gives back every slot the session holds: its transaction is
// over (or the session is).
func (hs *hotSession) release() {
	for _, held := range hs.holds {
		limit := 0
		if held.h.conf != nil {
			limit = held.h.conf().HotRow.MaxConcurrency
		}
		held.h.release(hs.txn, held.slot, limit)
	}
	clear(hs.holds)
	hs.holds = hs.holds[:0]
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
		return querypath.ContainsFold(sql, "DUPLICATE")
	case querypath.DMLNone:
		return route.Kind == querypath.KindOther && querypath.ContainsFold(sql, "UPDATE")
	}
	return false
}

// Admit implements Policy: a statement that writes one row by a key
// takes that row's slot, waiting for it if need be.
func (h *HotRows) Admit(g *Guard, st *Statement) *wire.SQLError {
	if st.Conf.HotRow.MaxConcurrency == 0 {
		return nil
	}
	var rw *querypath.RowWrite
	if pr := st.Prepared; pr != nil {
		if !pr.hotChecked {
			pr.hotChecked = true
			if hotRowCandidate(st.Route, st.SQL) {
				if r, ok := h.classify(st.SQL); ok {
					pr.hot = &r
				}
			}
		}
		rw = pr.hot
	} else if hotRowCandidate(st.Route, st.SQL) {
		if r, ok := h.classify(st.SQL); ok {
			rw = &r
		}
	}
	if rw == nil {
		return nil
	}
	return h.enter(g, st, rw)
}

// enter finds the rows rw writes (its key values from st.Param when the
// statement is prepared) and takes their slots, waiting for them if need
// be. A non-nil error is the client's answer instead of the statement's.
func (h *HotRows) enter(g *Guard, st *Statement, rw *querypath.RowWrite) *wire.SQLError {
	cfg := st.Conf.HotRow
	table := rw.Table
	if !strings.Contains(table, ".") {
		if st.DB == "" {
			return nil // no database: the statement fails on its own
		}
		table = st.DB + "." + table
	}
	s := g.s
	keys, err := s.KeyColumns(table)
	if err != nil {
		s.Logger().Debug("hot_row: cannot read the table's keys", "table", table, "error", err)
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
			if st.Params == nil {
				continue
			}
			if v, ok = st.Params.Param(eq.Param); !ok {
				continue // NULL (or unreadable): no row
			}
		}
		rows = append(rows, hotKey{table: strings.ToLower(table), column: strings.ToLower(eq.Column), value: strings.ToLower(v)})
		if !rw.Insert {
			break
		}
	}
	slices.SortFunc(rows, func(a, b hotKey) int { return a.slot() - b.slot() })
	hs := &g.hot
	block := func(fn func()) { s.Block(WaitHotRow, fn) }
next:
	for j, k := range rows {
		i := k.slot()
		if j > 0 && rows[j-1].slot() == i {
			continue
		}
		for _, held := range hs.holds {
			if held.h == h && held.slot == i {
				continue next // this transaction holds the row already
			}
		}
		if hs.txn == nil {
			hs.txn = &hotTxn{}
		}
		held, refusal := h.acquire(s.StatementContext(), hs.txn, k, cfg, s.Gone, block)
		if held {
			hs.holds = append(hs.holds, hotHold{h: h, slot: i})
		}
		if refusal != nil {
			return refusal
		}
	}
	return nil
}

// AnswerEnded implements Policy: the session's rows are given back when
// a statement's final OK or EOF (res) says no transaction is open any
// more, before that packet reaches the client, so a client that ends its
// transaction and at once starts the next one on another connection
// finds the row free. (After an error the rows are given back once the
// session has asked the server: TxnEnded.)
func (h *HotRows) AnswerEnded(g *Guard, res *wire.Result) {
	if g.kind == wire.ResponseQuery && res.Err == nil && res.Status&(wire.StatusInTrans|wire.StatusMoreResults) == 0 {
		g.hot.release()
	}
}

// TxnEnded implements Policy: the transaction's rows are free for the
// next ones.
func (h *HotRows) TxnEnded(g *Guard) { g.hot.release() }

// ChangesSchema reports whether sql, a statement that commits implicitly
// (querypath.Route.ImplicitCommit), may change a table's keys: it starts
// with ALTER, CREATE, DROP, RENAME or TRUNCATE (a leading comment hides
// it: the cache of keys is then forgotten at the next reload). Hot-row
// protection learns a table's keys once, so the session forgets them
// after such a statement.
func ChangesSchema(sql string) bool {
	w, _ := querypath.FirstWord(unsafe.Slice(unsafe.StringData(sql), len(sql)))
	for _, k := range [...]string{"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"} {
		if querypath.EqFold(w, k) {
			return true
		}
	}
	return false
}
