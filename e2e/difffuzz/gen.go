package difffuzz

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/directgate/directgate/wire"
)

// GenOptions shape the generated rounds.
type GenOptions struct {
	// Clients is the number of clients of a round. Zero means 8.
	Clients int
	// MinSteps and MaxSteps bound a script's length (a rule may end a
	// script a few steps beyond MaxSteps). Zero means 8 and 24.
	MinSteps, MaxSteps int
	// PoolSizes are the gateway pool sizes rounds pick from. Nil means
	// {1, 2}.
	PoolSizes []int
	// IOLoops are the gateway io_loops settings rounds pick from. Nil
	// means {0, 1}: sessions on goroutines and on an io_uring loop.
	IOLoops []int
	// PoolOrders are the gateway pool.order settings rounds take in
	// turn (by round index, so a seed's draws stay as they were). Nil
	// means {round_robin, lifo}.
	PoolOrders []string
	// Kill enables the KILL QUERY rule (see StepKill). False leaves it
	// out.
	Kill bool
}

func (o GenOptions) withDefaults() GenOptions {
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.MinSteps <= 0 {
		o.MinSteps = 8
	}
	if o.MaxSteps < o.MinSteps {
		o.MaxSteps = max(o.MinSteps, 24)
	}
	if len(o.PoolSizes) == 0 {
		o.PoolSizes = []int{1, 2}
	}
	if len(o.IOLoops) == 0 {
		o.IOLoops = []int{0, 1}
	}
	if len(o.PoolOrders) == 0 {
		o.PoolOrders = []string{"round_robin", "lifo"}
	}
	return o
}

// Generate makes round index of seed: the same seed, index and options
// always give the same round.
func Generate(seed uint64, index int, o GenOptions) *Round {
	o = o.withDefaults()
	r := rand.New(rand.NewPCG(seed, uint64(index)))
	round := &Round{Seed: seed, Index: index, PoolSize: o.PoolSizes[r.IntN(len(o.PoolSizes))]}
	for c := range o.Clients {
		g := &gen{r: r, client: c, opts: o}
		round.Scripts = append(round.Scripts, g.script())
	}
	// Drawn last, so a seed's scripts are the same whatever it draws.
	round.IOLoops = o.IOLoops[r.IntN(len(o.IOLoops))]
	round.PoolOrder = o.PoolOrders[index%len(o.PoolOrders)]
	return round
}

// collations a client may log in with: utf8mb4_general_ci,
// utf8mb3_general_ci, latin1_swedish_ci, utf8mb4_bin.
var collations = []byte{45, 33, 8, 46}

// gen generates one client's script.
type gen struct {
	r      *rand.Rand
	client int
	opts   GenOptions
	steps  []Step
	// handles are the StepPrepare handles not closed yet; nextHandle
	// numbers the next one.
	handles    []int
	nextHandle int
	// uniq numbers literals that must not repeat within the script.
	uniq int
}

func (g *gen) script() Script {
	s := Script{Client: g.client, Collation: collations[g.r.IntN(len(collations))]}
	if g.r.IntN(2) == 0 {
		s.Caps |= wire.CapDeprecateEOF
	}
	if g.r.IntN(3) > 0 {
		s.Caps |= wire.CapMultiStatements
	}
	if g.r.IntN(5) == 0 {
		s.Caps |= wire.CapFoundRows
	}
	n := g.opts.MinSteps + g.r.IntN(g.opts.MaxSteps-g.opts.MinSteps+1)
	// Half of the clients start by reading variables that only
	// procedures, functions and triggers set: another client's values
	// seen there are a leak.
	if g.r.IntN(2) == 0 {
		g.add("read-foreign-vars", StepQuery, "SELECT @from_proc, @from_func, @from_trigger")
	}
	for i := 0; len(g.steps) < n && i < 10*n; i++ {
		g.rule()
	}
	// Close what is still open now and then (the rest is closed by the
	// server when the connection ends).
	for _, h := range g.handles {
		if g.r.IntN(2) == 0 {
			g.steps = append(g.steps, Step{Kind: StepClose, Handle: h, Tag: "binary-handle"})
		}
	}
	if g.r.IntN(20) == 0 {
		g.add("release", StepQuery, g.pick("COMMIT RELEASE", "COMMIT WORK RELEASE", "ROLLBACK RELEASE"))
	}
	s.Steps = g.steps
	return s
}

// pause is the wait before a step: mostly none, sometimes a millisecond,
// sometimes longer than the gateway's hold of a connection after a write.
func (g *gen) pause() time.Duration {
	switch n := g.r.IntN(100); {
	case n < 65:
		return 0
	case n < 90:
		return time.Millisecond
	}
	return g.longPause()
}

func (g *gen) longPause() time.Duration {
	return time.Duration(60+g.r.IntN(61)) * time.Millisecond
}

// somePause is a pause that is often long: between a statement and the
// one that reads its result.
func (g *gen) somePause() time.Duration {
	switch g.r.IntN(3) {
	case 0:
		return 0
	case 1:
		return time.Millisecond
	}
	return g.longPause()
}

func (g *gen) add(tag string, kind StepKind, sql string) *Step {
	g.steps = append(g.steps, Step{Kind: kind, SQL: sql, Pause: g.pause(), Tag: tag})
	return &g.steps[len(g.steps)-1]
}

func (g *gen) pick(choices ...string) string { return choices[g.r.IntN(len(choices))] }

func (g *gen) db() string  { return dbName(g.client) }
func (g *gen) dbB() string { return dbName(g.client) + "b" }

// lock names one of the client's two locks.
func (g *gen) lock() string { return fmt.Sprintf("'%s_%s'", g.db(), g.pick("a", "b")) }

func (g *gen) small() int { return 1 + g.r.IntN(99) }

func (g *gen) next() int { g.uniq++; return g.uniq }

// rules are the grammar: a weight and a function that appends one or
// more steps.
func (g *gen) rule() {
	type rule struct {
		weight int
		f      func()
	}
	rules := []rule{
		{6, g.userVar},
		{5, g.readForeignVars},
		{5, g.sessionVar},
		{3, g.isolation},
		{5, g.showState},
		{2, g.use},
		{4, g.tempTable},
		{4, g.lockRule},
		{3, g.sqlPrepare},
		{6, g.routine},
		{6, g.autoInc},
		{2, g.rowCount},
		{2, g.foundRows},
		{5, g.txn},
		{3, g.warnings},
		{5, g.binaryRead},
		{4, g.binaryLastID},
		{3, g.binaryHandle},
		{6, g.observe},
		{3, g.multi},
		{1, g.setOption},
		{1, g.sleep},
		{1, g.dropDB},
		{2, g.xa},
		{1, g.killSelf},
		{1, g.setGlobal},
		{1, g.sslStatus},
	}
	if g.opts.Kill {
		rules = append(rules, rule{1, g.kill})
	}
	total := 0
	for _, r := range rules {
		total += r.weight
	}
	n := g.r.IntN(total)
	for _, r := range rules {
		if n < r.weight {
			r.f()
			return
		}
		n -= r.weight
	}
}

func (g *gen) expr() string {
	switch g.r.IntN(6) {
	case 0:
		return fmt.Sprint(g.small())
	case 1:
		return fmt.Sprintf("'s%d'", g.small())
	case 2:
		return "@v2 + 1"
	case 3:
		return "(SELECT COUNT(*) FROM t)"
	case 4:
		return fmt.Sprintf("CONCAT('c', %d)", g.small())
	}
	return "NULL"
}

func (g *gen) userVar() {
	switch g.r.IntN(7) {
	case 0:
		g.add("set-uservar", StepQuery, fmt.Sprintf("SET @v1 = %s", g.expr()))
	case 1:
		g.add("set-uservar", StepQuery, fmt.Sprintf("SET @v2 = %s, @v1 = %s", g.expr(), g.expr()))
	case 2:
		g.add("select-into", StepQuery, g.pick(
			"SELECT n INTO @v1 FROM t WHERE id = 2",
			"SELECT 'lit' INTO @v2",
			"SELECT COUNT(*), MAX(id) INTO @v1, @v2 FROM t"))
	case 3:
		g.add("assign-uservar", StepQuery, g.pick("SELECT @v1 := 2", "SELECT @v2 := IFNULL(@v2, 0) + 1 AS v2"))
	default:
		g.add("read-uservar", StepQuery, g.pick("SELECT @v1, @v2", "SELECT @v1 + 1 AS nxt", "SELECT @v2"))
	}
}

func (g *gen) readForeignVars() {
	g.add("read-foreign-vars", StepQuery, g.pick(
		"SELECT @from_proc, @from_func, @from_trigger",
		"SELECT @from_proc",
		"SELECT @from_func AS f, @from_trigger AS t"))
}

var sqlModes = []string{
	"''", "'ANSI_QUOTES'", "'NO_BACKSLASH_ESCAPES'", "'PIPES_AS_CONCAT,ANSI_QUOTES'",
	"'STRICT_TRANS_TABLES'", "'TRADITIONAL'", "DEFAULT", "'ONLY_FULL_GROUP_BY,NO_ENGINE_SUBSTITUTION'",
}

func (g *gen) sessionVar() {
	scope := g.pick("SESSION ", "", "@@", "@@session.", "LOCAL ")
	switch g.r.IntN(7) {
	case 0, 1:
		g.add("sql-mode", StepQuery, fmt.Sprintf("SET %ssql_mode = %s", scope, sqlModes[g.r.IntN(len(sqlModes))]))
	case 2:
		g.add("time-zone", StepQuery, fmt.Sprintf("SET %stime_zone = %s", scope, g.pick("'+00:00'", "'+05:30'", "'-08:00'", "'SYSTEM'", "DEFAULT")))
	case 3:
		g.add("names", StepQuery, g.pick("SET NAMES utf8mb4", "SET NAMES latin1", "SET NAMES utf8mb3",
			"SET NAMES utf8mb4 COLLATE utf8mb4_bin", "SET NAMES binary", "SET CHARACTER SET latin1", "SET NAMES DEFAULT"))
	case 4:
		g.add("max-statement-time", StepQuery, fmt.Sprintf("SET %smax_statement_time = %s", scope, g.pick("0", "10", "0.25")))
	case 5:
		g.add("div-precision", StepQuery, fmt.Sprintf("SET %sdiv_precision_increment = %s", scope,
			g.pick("2", "6", "9", "@@div_precision_increment + 1")))
	default:
		g.add("autocommit", StepQuery, fmt.Sprintf("SET %sautocommit = %s", scope, g.pick("0", "1", "ON")))
	}
}

var isoLevels = []string{"READ UNCOMMITTED", "READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"}
var isoValues = []string{"'READ-UNCOMMITTED'", "'READ-COMMITTED'", "'REPEATABLE-READ'", "'SERIALIZABLE'"}

func (g *gen) isolation() {
	i := g.r.IntN(len(isoLevels))
	switch g.r.IntN(7) {
	case 0:
		g.add("session-isolation", StepQuery, "SET SESSION TRANSACTION ISOLATION LEVEL "+isoLevels[i])
	case 1:
		g.add("session-isolation", StepQuery, "SET SESSION tx_isolation = "+isoValues[i])
	case 2:
		// Without a scope, tx_isolation is the session's value in MariaDB.
		g.add("session-isolation", StepQuery, "SET tx_isolation = "+isoValues[i])
	case 3:
		g.add("session-read-only", StepQuery, "SET SESSION TRANSACTION "+g.pick("READ ONLY", "READ WRITE"))
	case 4:
		// @@tx_isolation without a scope is the next transaction's.
		g.add("next-txn", StepQuery, "SET @@tx_isolation = "+isoValues[i])
	default:
		g.add("next-txn", StepQuery, "SET TRANSACTION ISOLATION LEVEL "+isoLevels[i])
	}
}

func (g *gen) showState() {
	switch g.r.IntN(5) {
	case 0, 1:
		g.add("show-state", StepQuery, "SELECT @@tx_isolation, @@sql_mode, @@time_zone, @@character_set_client, DATABASE()")
	case 2:
		g.add("show-state", StepQuery, "SELECT @@session.tx_read_only, @@max_statement_time, @@autocommit, @@div_precision_increment, @@character_set_results, @@collation_connection")
	case 3:
		g.add("state-effects", StepQuery, `SELECT FROM_UNIXTIME(1000000000) AS ts, 1/3 AS third, 'a' || 'b' AS pipes, 'x\ny' AS esc, 'é' AS e, CHARSET('é') AS cs`)
	default:
		g.add("state-effects", StepQuery, `SELECT "dq" AS dq`)
	}
}

func (g *gen) use() {
	db := g.pick(g.db(), g.dbB())
	if g.r.IntN(4) == 0 {
		g.add("use", StepInitDB, db)
	} else {
		g.add("use", StepQuery, "USE "+db)
	}
	if g.r.IntN(2) == 0 {
		g.add("read-t", StepQuery, "SELECT * FROM t ORDER BY id LIMIT 3")
	}
}

func (g *gen) dropDB() {
	g.add("drop-db", StepQuery, "DROP DATABASE "+g.dbB())
	g.add("drop-db", StepQuery, "CREATE DATABASE "+g.dbB())
	if g.r.IntN(2) == 0 {
		g.add("use", StepQuery, "USE "+g.db())
	}
	if g.r.IntN(2) == 0 {
		g.add("show-state", StepQuery, "SELECT DATABASE()")
	}
}

// xa runs a whole XA transaction (its connection must be closed, never
// reset, afterwards): always ended, so no prepared XID outlives the phase.
func (g *gen) xa() {
	xid := fmt.Sprintf("'%s_xa%d'", g.db(), g.next())
	g.add("xa", StepQuery, "XA START "+xid)
	g.add("dml", StepQuery, g.dml())
	g.add("xa", StepQuery, "XA END "+xid)
	switch g.r.IntN(3) {
	case 0:
		g.add("xa", StepQuery, "XA PREPARE "+xid)
		g.add("xa", StepQuery, g.pick("XA COMMIT ", "XA ROLLBACK ")+xid)
	case 1:
		g.add("xa", StepQuery, "XA COMMIT "+xid+" ONE PHASE")
	default:
		g.add("xa", StepQuery, "XA ROLLBACK "+xid)
	}
	// Not XA RECOVER: it lists every client's prepared XIDs.
}

// killSelf kills the client's own (idle) query: the gateway translates
// CONNECTION_ID() to its own id, text and prepared.
func (g *gen) killSelf() {
	if g.r.IntN(2) == 0 {
		g.add("kill-self", StepQuery, "KILL QUERY CONNECTION_ID()")
		return
	}
	g.steps = append(g.steps, Step{Kind: StepPrepared, SQL: "KILL QUERY CONNECTION_ID()", Pause: g.pause(), Tag: "kill-self"})
}

// setGlobal sets a global variable to the value it has: nothing changes
// for anyone, but the gateway resets its pooled connections before new
// sessions use them.
func (g *gen) setGlobal() {
	g.add("set-global", StepQuery, "SET GLOBAL div_precision_increment = @@GLOBAL.div_precision_increment")
	g.add("show-state", StepQuery, "SELECT @@div_precision_increment, 1/3")
}

// sslStatus reads session status that describes the client's own
// connection (plain here: empty values).
func (g *gen) sslStatus() {
	g.add("ssl-status", StepQuery, g.pick("SHOW STATUS LIKE 'Ssl_cipher'", "SHOW SESSION STATUS LIKE 'Ssl_version'", "SHOW STATUS LIKE 'Ssl_c%'"))
}

func (g *gen) tempTable() {
	name := g.pick("tmp1", "tmp2")
	switch g.r.IntN(7) {
	case 0, 1:
		g.add("temp-table", StepQuery, fmt.Sprintf("CREATE TEMPORARY TABLE %s (id INT PRIMARY KEY, s VARCHAR(10))", name))
	case 2:
		g.add("temp-table", StepQuery, fmt.Sprintf("INSERT INTO %s VALUES (%d, 'r%d')", name, g.next(), g.small()))
	case 3:
		g.add("temp-table", StepQuery, fmt.Sprintf("SELECT * FROM %s ORDER BY id", name))
	case 4:
		g.add("temp-table", StepQuery, g.pick("DROP TEMPORARY TABLE IF EXISTS "+name, "DROP TABLE "+name))
	case 5:
		// Shadows the base table t of the current database.
		g.add("temp-table", StepQuery, "CREATE TEMPORARY TABLE t (x INT)")
	default:
		g.add("temp-table", StepQuery, "DROP TEMPORARY TABLE t")
	}
}

func (g *gen) lockRule() {
	switch g.r.IntN(7) {
	case 0:
		g.add("lock", StepQuery, fmt.Sprintf("SELECT GET_LOCK(%s, 0)", g.lock()))
	case 1:
		g.add("lock", StepQuery, fmt.Sprintf("SELECT `GET_LOCK`(%s, 0)", g.lock()))
	case 2:
		g.add("lock", StepQuery, fmt.Sprintf("DO GET_LOCK(%s, 0)", g.lock()))
	case 3:
		g.add("lock", StepQuery, fmt.Sprintf("SELECT RELEASE_LOCK(%s)", g.lock()))
	case 4:
		g.add("lock", StepQuery, "SELECT RELEASE_ALL_LOCKS()")
	default:
		g.add("lock-state", StepQuery, fmt.Sprintf("SELECT IS_FREE_LOCK(%s) AS free, IS_USED_LOCK(%s) = CONNECTION_ID() AS mine", g.lock(), g.lock()))
	}
}

func (g *gen) sqlPrepare() {
	switch g.r.IntN(6) {
	case 0:
		g.add("sql-prepare", StepQuery, "PREPARE s1 FROM 'SELECT ? AS p, @v1 AS v1'")
	case 1:
		g.add("sql-prepare", StepQuery, "PREPARE s2 FROM 'INSERT INTO t (v) VALUES (?)'")
	case 2:
		g.add("sql-prepare", StepQuery, g.pick("EXECUTE s1 USING 5", "EXECUTE s1 USING @v2", "EXECUTE s2 USING 'sp'"))
	case 3:
		g.add("sql-prepare", StepQuery, g.pick("DEALLOCATE PREPARE s1", "DROP PREPARE s2", "DEALLOCATE PREPARE s2"))
	default:
		// Prepare, execute, deallocate.
		g.add("sql-prepare", StepQuery, "PREPARE s1 FROM 'SELECT ? AS p, @v1 AS v1'")
		g.add("sql-prepare", StepQuery, "EXECUTE s1 USING "+g.pick("7", "'x'", "@v1"))
		g.add("sql-prepare", StepQuery, "DEALLOCATE PREPARE s1")
	}
}

func (g *gen) routine() {
	switch g.r.IntN(6) {
	case 0, 1:
		g.add("call", StepQuery, fmt.Sprintf("CALL %s(%d)", g.pick("p_set", g.db()+".p_set"), g.small()))
	case 2:
		g.add("call", StepQuery, g.pick("CALL p_sel()", "CALL p_cur()"))
	case 3:
		g.add("function", StepQuery, fmt.Sprintf(g.pick("SELECT f_set(%d) AS f", "DO f_set(%d)"), g.small()))
	case 4:
		g.add("trigger", StepQuery, fmt.Sprintf("INSERT INTO trg (v) VALUES (%d)", g.small()))
	default:
		// Set, then read after a pause: the value must still be there.
		g.add("call", StepQuery, fmt.Sprintf("CALL p_set(%d)", g.small()))
		g.add("read-foreign-vars", StepQuery, "SELECT @from_proc").Pause = g.somePause()
	}
}

func (g *gen) insert() string {
	switch g.r.IntN(5) {
	case 0:
		return fmt.Sprintf("INSERT INTO t (v) VALUES ('m%d'), ('m%d')", g.next(), g.next())
	case 1:
		// An explicit id of the client's own range (below its
		// auto-increment start): a leaked one says whose it was.
		return fmt.Sprintf("INSERT INTO t (id, v) VALUES (%d, 'e')", (g.client+1)*100+g.r.IntN(8))
	case 2:
		return "INSERT INTO parent (name) VALUES ('p')"
	}
	return fmt.Sprintf("INSERT INTO t (v, n) VALUES ('a', %d)", g.small())
}

func (g *gen) dml() string {
	switch g.r.IntN(5) {
	case 0:
		return "UPDATE t SET n = n + 1 WHERE id <= 2"
	case 1:
		return "DELETE FROM t WHERE v = 'a'"
	case 2:
		return "REPLACE INTO t (id, v) VALUES (2, 'rep')"
	}
	return g.insert()
}

func (g *gen) autoInc() {
	switch g.r.IntN(5) {
	case 0:
		g.add("dml", StepQuery, g.dml())
	case 1:
		g.add("last-insert-id", StepQuery, g.pick("SELECT LAST_INSERT_ID()", fmt.Sprintf("SELECT LAST_INSERT_ID(%d)", 200+g.small())))
	default:
		g.add("dml", StepQuery, g.insert())
		g.add("last-insert-id", StepQuery, "SELECT LAST_INSERT_ID()").Pause = g.somePause()
	}
}

func (g *gen) rowCount() {
	switch g.r.IntN(4) {
	case 0:
		g.add("row-count-source", StepQuery, g.pick("SELECT * FROM t ORDER BY id", "SET @rc = 1", "SELECT nosuch FROM t", "DO 0"))
	default:
		g.add("dml", StepQuery, g.dml())
	}
	// Not FOUND_ROWS() here: before a session's first SELECT, MariaDB
	// reports what its thread last served (threads are reused).
	g.readsPrevious(g.add("row-count", StepQuery, g.pick("SELECT ROW_COUNT()", "select row_count() AS rc", "SELECT ROW_COUNT(), @@warning_count")))
}

func (g *gen) foundRows() {
	// A SELECT that cannot fail first: a temporary table t may shadow t,
	// and before a session's first successful SELECT MariaDB reports what
	// its reused thread held.
	g.add("found-rows", StepQuery, "SELECT 1 UNION SELECT 2")
	switch g.r.IntN(3) {
	case 0:
		g.add("found-rows", StepQuery, g.pick("SELECT SQL_CALC_FOUND_ROWS * FROM t ORDER BY id LIMIT 1", "SELECT SQL_CALC_FOUND_ROWS id FROM parent ORDER BY id LIMIT 1"))
	case 1:
		g.add("found-rows", StepQuery, g.pick("SELECT * FROM t ORDER BY id", "SELECT id FROM t ORDER BY id LIMIT 2", "SHOW TABLES"))
	default:
		g.add("found-rows", StepQuery, "SELECT * FROM t ORDER BY id")
		// Statements that keep FOUND_ROWS() and those that set it.
		g.add("found-rows-between", StepQuery, g.pick("SET @fr = 2", "UPDATE t SET n = n + 1 WHERE id = 1", "INSERT INTO t (v, n) SELECT v, n FROM t WHERE id = 1", "SELECT 1"))
	}
	g.readsPrevious(g.add("found-rows", StepQuery, g.pick("SELECT FOUND_ROWS()", "SELECT FOUND_ROWS() fr")))
}

// readsPrevious gives st, a step that reads the previous statement's
// ROW_COUNT(), FOUND_ROWS() or warnings, a pause: often longer than the
// gateway's hold, so that the value must come from the session's own copy.
func (g *gen) readsPrevious(st *Step) {
	st.Pause = g.somePause()
}

func (g *gen) begin() string {
	return g.pick("BEGIN", "START TRANSACTION", "START TRANSACTION READ ONLY", "START TRANSACTION READ WRITE", "BEGIN WORK")
}

func (g *gen) end() string {
	return g.pick("COMMIT", "ROLLBACK", "COMMIT AND CHAIN", "ROLLBACK AND CHAIN", "COMMIT WORK")
}

func (g *gen) txn() {
	switch g.r.IntN(5) {
	case 0:
		g.add("txn", StepQuery, g.begin())
	case 1:
		g.add("txn", StepQuery, g.end())
	case 2:
		g.add("txn", StepQuery, g.pick("SAVEPOINT sp1", "ROLLBACK TO SAVEPOINT sp1", "RELEASE SAVEPOINT sp1"))
	default:
		g.add("txn", StepQuery, g.begin())
		for range 1 + g.r.IntN(3) {
			switch g.r.IntN(7) {
			case 0, 1, 2:
				g.add("dml", StepQuery, g.dml())
			case 3:
				// Commits implicitly, then fails: the transaction is
				// over although the error says nothing of it.
				g.add("txn-implicit-commit", StepQuery, g.pick("DROP TABLE fz_missing", "CREATE TABLE t (id INT)"))
			default:
				g.add("txn-read", StepQuery, g.pick("SELECT * FROM t ORDER BY id", "SELECT @@tx_isolation, @@session.tx_read_only", "SELECT COUNT(*) FROM parent"))
			}
		}
		g.add("txn", StepQuery, g.end())
		if g.r.IntN(3) == 0 {
			g.add("txn", StepQuery, "COMMIT") // ends what AND CHAIN opened
		}
	}
}

func (g *gen) warnings() {
	g.add("warning", StepQuery, g.pick("SELECT 1/0", "SELECT CAST('abc' AS SIGNED)", "INSERT INTO t (v, n) VALUES ('w', '12abc')", "SELECT 'a' + 1",
		"SELECT nosuch FROM t", "SELEC 1", "SELECT 1/0, CAST('x' AS SIGNED), 'b' + 1"))
	if g.r.IntN(3) == 0 {
		// A statement without tables keeps the list; one with tables
		// empties it.
		g.add("warning-between", StepQuery, g.pick("SET @w = 1", "SELECT 2", "DO 1", "SELECT COUNT(*) FROM t"))
	}
	st := g.add("show-warnings", StepQuery, g.pick("SHOW WARNINGS", "SELECT @@warning_count", "SHOW COUNT(*) WARNINGS",
		"SHOW ERRORS", "SHOW COUNT(*) ERRORS", "SELECT @@warning_count, @@error_count", "SHOW WARNINGS LIMIT 1", "SHOW WARNINGS LIMIT 1, 1"))
	g.readsPrevious(st)
	if g.r.IntN(3) == 0 {
		// Read again: SHOW WARNINGS does not empty the list.
		g.readsPrevious(g.add("show-warnings", StepQuery, "SHOW WARNINGS"))
	}
}

func (g *gen) binaryRead() {
	st := Step{Kind: StepPrepared, Pause: g.pause(), Tag: "binary-read"}
	switch g.r.IntN(6) {
	case 0:
		st.SQL = "SELECT id, v, n FROM t WHERE id > ? ORDER BY id LIMIT 3"
		st.Params = []Param{{IsInt: true, Int: int64(g.r.IntN(4))}}
	case 1:
		st.SQL = "SELECT @v1 AS v1, @@sql_mode AS m, DATABASE() AS db, @@time_zone AS tz"
	case 2:
		st.SQL = "SELECT ? AS p, CONCAT(?, 'x') AS q"
		st.Params = []Param{{Str: "é"}, {Null: g.r.IntN(2) == 0, Str: "s"}}
	case 3:
		st.SQL = "SELECT LAST_INSERT_ID() AS lid"
		st.Tag = "binary-last-insert-id"
	case 4:
		st.SQL = "SELECT @from_proc, @from_func, @from_trigger"
		st.Tag = "binary-read-foreign-vars"
	default:
		st.SQL = "SELECT @@tx_isolation, @@session.tx_read_only, @@autocommit"
	}
	g.steps = append(g.steps, st)
}

func (g *gen) binaryLastID() {
	// The parent's id must reach the child: LAST_INSERT_ID() of the
	// prepared insert is the text insert's id.
	g.add("dml", StepQuery, g.pick("INSERT INTO parent (name) VALUES ('p')", "INSERT INTO t (v) VALUES ('for-child')"))
	st := Step{Kind: StepPrepared, Pause: g.somePause(), Tag: "binary-last-insert-id",
		SQL: "INSERT INTO child (parent_id) VALUES (LAST_INSERT_ID())"}
	if g.r.IntN(3) == 0 {
		st.PrepPause = g.somePause()
	}
	if g.r.IntN(4) == 0 {
		st.SQL = "SELECT LAST_INSERT_ID() AS lid"
	}
	g.steps = append(g.steps, st)
	if g.r.IntN(2) == 0 {
		g.add("read-child", StepQuery, "SELECT id, parent_id FROM child ORDER BY id DESC LIMIT 1")
	}
}

func (g *gen) binaryHandle() {
	if len(g.handles) > 0 && g.r.IntN(3) > 0 {
		i := g.r.IntN(len(g.handles))
		h := g.handles[i]
		if g.r.IntN(4) == 0 {
			g.steps = append(g.steps, Step{Kind: StepClose, Handle: h, Pause: g.pause(), Tag: "binary-handle"})
			g.handles = append(g.handles[:i], g.handles[i+1:]...)
			return
		}
		st := Step{Kind: StepExecute, Handle: h, Pause: g.pause(), Tag: "binary-handle"}
		// Parameters are sent for every handle: the server checks the
		// count against the statement's.
		st.Params = []Param{{IsInt: true, Int: int64(g.r.IntN(4))}}
		g.steps = append(g.steps, st)
		return
	}
	g.nextHandle++
	h := g.nextHandle
	sql := g.pick(
		"SELECT id, v FROM t WHERE id > ? ORDER BY id LIMIT 2",
		"INSERT INTO t (n) VALUES (?)",
		"SELECT ? + 0 AS x, @v1 AS v1, DATABASE() AS db")
	g.steps = append(g.steps, Step{Kind: StepPrepare, SQL: sql, Handle: h, Pause: g.pause(), Tag: "binary-handle"})
	g.handles = append(g.handles, h)
}

func (g *gen) observe() {
	read := fmt.Sprintf("SELECT COUNT(*) AS uncommitted_seen FROM %s.side", g.db())
	if g.r.IntN(4) == 0 {
		g.add("observe", StepObserve, read)
		return
	}
	level := "READ UNCOMMITTED"
	if g.r.IntN(3) == 0 {
		level = isoLevels[g.r.IntN(3)] // not SERIALIZABLE: its read would wait for the side's lock
	}
	g.add("next-txn", StepQuery, "SET TRANSACTION ISOLATION LEVEL "+level)
	// Mostly a long pause after the SET: long enough for other clients
	// to take the connection it ran on.
	wait := g.longPause()
	if g.r.IntN(3) == 0 {
		wait = g.somePause()
	}
	started := g.r.IntN(2) == 0
	if started {
		g.add("txn", StepQuery, g.pick("START TRANSACTION", "BEGIN")).Pause = wait
		wait = g.pause()
	}
	g.add("observe", StepObserve, read).Pause = wait
	if started {
		g.add("txn", StepQuery, g.pick("COMMIT", "ROLLBACK"))
	}
}

func (g *gen) multi() {
	g.add("multi", StepQuery, g.pick(
		"SET @v1 = 7; SELECT @v1",
		"SELECT 1 AS a; SELECT 2 AS b",
		"INSERT INTO t (v) VALUES ('ms'); SELECT LAST_INSERT_ID()",
		"USE "+g.dbB()+"; SELECT DATABASE()",
		`SET SESSION sql_mode = 'ANSI_QUOTES'; SELECT "x"`,
		"CALL p_set(9); SELECT @from_proc"))
}

func (g *gen) setOption() {
	g.add("set-option", StepSetOption, g.pick("on", "off"))
}

func (g *gen) sleep() {
	g.add("sleep", StepQuery, "SELECT SLEEP(0.5) AS slept")
}

func (g *gen) kill() {
	g.add("kill", StepKill, fmt.Sprintf("SELECT SLEEP(3) AS slept /* kill %d.%d */", g.client, g.next()))
}
