package protect

import (
	"context"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Policy is one protection of one cluster. A session calls it, through
// its Guard, at four points of a statement's life; a protection
// implements the points it needs and embeds Hooks for the others. Every
// point but Rows runs on the session's goroutine.
type Policy interface {
	// Name is the protection's name in SHOW GATEWAY PROTECTIONS and the
	// status page: "hot_row", "throttle", ...
	Name() string
	// Rows returns the protection's counters under the cluster's
	// settings conf: a first row for the whole cluster (Scope "*"), then
	// rows for parts of it (tables, backends), bounded in number. The
	// Guard's Set fills in Protection and Cluster.
	Rows(conf *config.Cluster) []Row
	// Admit is called when a statement is admitted, before a backend is
	// chosen for it. A non-nil error is the client's answer instead of
	// the statement's: the statement runs nowhere.
	Admit(g *Guard, st *Statement) *wire.SQLError
	// Chosen is called once a backend b is chosen for statement c,
	// before it takes a connection of it; as Admit's, an error is the
	// client's answer and the statement did not run. Not called again
	// when the statement is retried on another backend.
	Chosen(g *Guard, c Choice, conf *config.Cluster, b Backend) *wire.SQLError
	// AnswerEnded is called with what the relay read of the answer's
	// last packet, before that packet reaches the client (who may start
	// its next statement, or another session, the moment it has it).
	// Called only when the Guard says a policy wants it (Guard.Ending:
	// rows held, a write to count).
	AnswerEnded(g *Guard, res *wire.Result)
	// TxnEnded is called when the session's transaction is over, as the
	// server reported it, and when the session ends.
	TxnEnded(g *Guard)
}

// Hooks are a Policy's points that do nothing, for a protection to
// embed.
type Hooks struct{}

// Admit implements Policy: it lets every statement go.
func (Hooks) Admit(*Guard, *Statement) *wire.SQLError { return nil }

// Chosen implements Policy: it lets every statement go.
func (Hooks) Chosen(*Guard, Choice, *config.Cluster, Backend) *wire.SQLError { return nil }

// AnswerEnded implements Policy.
func (Hooks) AnswerEnded(*Guard, *wire.Result) {}

// TxnEnded implements Policy.
func (Hooks) TxnEnded(*Guard) {}

// Collector is a Policy that has Prometheus metrics of its own, per
// cluster; the gateway's registry collects them at scrape time.
type Collector interface {
	// Describe sends the metrics' descriptions.
	Describe(ch chan<- *prometheus.Desc)
	// Collect sends the metrics of the protection of cluster under
	// settings conf.
	Collect(ch chan<- prometheus.Metric, cluster string, conf *config.Cluster)
}

// Statement is what the protections see of a statement when it is
// admitted.
type Statement struct {
	// Conf is the cluster's settings, read once for the statement.
	Conf *config.Cluster
	// Cmd is the command: wire.ComQuery or wire.ComStmtExecute.
	Cmd byte
	// Route is the classifier's answer, SQL the statement's text (an
	// execute's prepared text) and DB the database it runs in.
	Route querypath.Route
	SQL   string
	DB    string
	// Prepared, for an execute, are the facts the protections keep with
	// the prepared statement, and Params its parameters. Both nil for
	// text.
	Prepared *Prepared
	Params   Params
}

// Params are an execute's parameters.
type Params interface {
	// Param reads parameter i as the text path would key it: a
	// string's contents, a number's digits; false for NULL or what
	// cannot be read.
	Param(i int) (string, bool)
}

// Prepared are the facts about one prepared statement the protections
// work out at its first execute and keep with it. The zero value is
// ready.
type Prepared struct {
	writesChecked, writes bool
	hotChecked            bool
	hot                   *querypath.RowWrite
}

// Choice is the statement a backend is being chosen for.
type Choice struct {
	// Cmd is the command (its packet's first byte) and Kind the
	// statement's kind.
	Cmd  byte
	Kind querypath.Kind
	// Pinned says the session holds state on a backend connection
	// beyond the previous statement's result.
	Pinned bool
}

// Backend is a backend chosen for a statement, as the protections see
// its load.
type Backend interface {
	// Addr is the backend's address.
	Addr() string
	// InFlight is the statements this gateway has running on it now.
	InFlight() int64
	// QueueWait is how long an acquire of one of its pooled connections
	// waits now: the longest of all its pools, or, when s is not nil,
	// that of the pool s's statements take connections of.
	QueueWait(now time.Time, s Session) time.Duration
}

// Wait is what a session waits for at the gateway, for its process list
// state.
type Wait uint8

const (
	// WaitHotRow: a hot row's turn (hot_row).
	WaitHotRow Wait = iota + 1
	// WaitThrottle: the replicas to catch up (throttle).
	WaitThrottle
	// WaitConsolidation: another session's identical read.
	WaitConsolidation
)

// Session is what a Guard asks of its session.
type Session interface {
	// StatementContext ends when the statement is killed (KILL QUERY),
	// or the session ends.
	StatementContext() context.Context
	// Gone reports whether the client has left.
	Gone() bool
	// Block runs fn, a wait at the gateway for w, where the session may
	// wait (off its io loop) and with w as its process list state.
	Block(w Wait, fn func())
	// Priority is the session's user's priority now (0 to 100).
	Priority() int
	// Status is the server status of the session's last answer, and
	// TxnState the server's transaction state tracker (eight
	// characters, or "").
	Status() uint16
	TxnState() string
	// KeyColumns returns the columns of table "db.table" that are a
	// single-column primary or unique key, lower case.
	KeyColumns(table string) (map[string]bool, error)
	// Logger is the session's logger.
	Logger() hclog.Logger
	// Now is when the session's current command arrived.
	Now() time.Time
}
