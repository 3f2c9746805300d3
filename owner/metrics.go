package owner

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"time"
)

// Prometheus metrics of the owner, named directgate_owner_*, on a
// registry of the Owner's own (Registry): nothing is global, so two
// owners in one process (tests, a standby pair) do not collide.
//
// As in the gateway, two kinds:
//   - statements and logins are counted as they happen, on counters whose
//     label values are resolved once in newMetrics: counting one is an
//     atomic add, no map lookup, no lock, no allocation;
//   - everything per table, and the owner's state, is read by a collector
//     at scrape time: the per-table counts are atomics kept by each
//     sequence and queue (they live as long as the table stays owned,
//     across discoveries), queue sizes are read under the queue's mutex,
//     which is never held across I/O. A table that stops being owned has
//     no series at the next scrape.
//
// Labels are bounded: kind, outcome and kind of table take fixed sets of
// values; table is one of the owned tables ("db.table", as discovery
// found it), a set the schema bounds.

// kindLabel is the kind label of directgate_owner_statements_total of
// a statement of kind k: sequence (SELECT NEXT n VALUES), message (an
// insert into or an ack of a message table), stream (STREAM * FROM msgs,
// counted when the stream ends), other (SHOW OWNER TABLES, which gateways
// poll, and statements the owner does not answer).
func kindLabel(k stmtKind) string {
	switch k {
	case stmtNext:
		return "sequence"
	case stmtInsert, stmtAck:
		return "message"
	case stmtStream:
		return "stream"
	}
	return "other"
}

// maxStmtKind bounds the statement kinds the counters are resolved for.
const maxStmtKind = 16

// Every statement kind has its counters (the build fails otherwise).
var _ [maxStmtKind - stmtLogForget - 1]struct{}

// loginOutcome is the outcome label of directgate_owner_logins_total.
type loginOutcome uint8

const (
	loginOK loginOutcome = iota
	// loginDenied: wrong user or password.
	loginDenied
	// loginStandby: refused by a standby (error 1290, naming the leader).
	loginStandby
	numLoginOutcomes
)

var loginOutcomeNames = [numLoginOutcomes]string{"ok", "denied", "standby"}

// metrics holds the Owner's registry and its hot-path counters.
type metrics struct {
	reg *prometheus.Registry
	// statements is indexed by statement kind (kinds of one label share
	// its counters), then failed (0 ok, 1 error).
	statements [maxStmtKind][2]prometheus.Counter
	logins     [numLoginOutcomes]prometheus.Counter
}

// newMetrics builds o's registry: the hot-path families, the collector of
// o's state and the Go runtime and process collectors.
func newMetrics(o *Owner) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	statements := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_owner_statements_total",
		Help: "Statements (COM_QUERY) from gateways, by kind (sequence: NEXT VALUES; message: inserts and acks; stream: STREAM, counted when it ends; other: SHOW OWNER TABLES, which gateways poll, and statements the owner does not answer) and outcome (ok; error: the answer, or the end of a stream, was an error packet, or the connection failed).",
	}, []string{"kind", "outcome"})
	logins := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_owner_logins_total",
		Help: "Gateway logins by outcome (ok; denied: not the cluster's backend_user and backend_password; standby: refused because this owner does not lead).",
	}, []string{"outcome"})
	for k := range stmtKind(maxStmtKind) {
		m.statements[k][0] = statements.WithLabelValues(kindLabel(k), "ok")
		m.statements[k][1] = statements.WithLabelValues(kindLabel(k), "error")
	}
	for l := range numLoginOutcomes {
		m.logins[l] = logins.WithLabelValues(loginOutcomeNames[l])
	}
	m.reg.MustRegister(statements, logins, stateCollector{o},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// statement counts one statement of kind k.
func (m *metrics) statement(k stmtKind, failed bool) {
	i := 0
	if failed {
		i = 1
	}
	m.statements[k][i].Inc()
}

// login counts one login that got as far as its credentials.
func (m *metrics) login(l loginOutcome) { m.logins[l].Inc() }

// Registry returns the registry /metrics serves. Callers may register
// collectors of their own on it (the fleet agent's); it is never the
// default registry.
func (o *Owner) Registry() *prometheus.Registry { return o.metrics.reg }

// Descriptions of the state metrics.
var (
	tableLabel = []string{"table"}

	descLeading = prometheus.NewDesc("directgate_owner_leading",
		"1 when this owner serves: it leads its standby group, or it is the cluster's only owner (no election); 0 as a standby.", nil, nil)
	descTerm = prometheus.NewDesc("directgate_owner_term",
		"The leadership term this owner serves in: 0 as a standby, 1 for an only owner (no election).", nil, nil)
	descSessions = prometheus.NewDesc("directgate_owner_sessions",
		"Gateway connections open now (logged in or still in the handshake; a stream holds one).", nil, nil)
	descPrimaryUp = prometheus.NewDesc("directgate_owner_primary_up",
		"1 when discovery names a primary for the cluster, else 0 (statements wait up to failover_buffer for one).", nil, nil)
	descPrimaryChanges = prometheus.NewDesc("directgate_owner_primary_changes_total",
		"Times the owner's primary changed: found, lost, moved to another backend, or reopened with a new backend account. Each change drops the sequence blocks in memory.", nil, nil)
	descTables = prometheus.NewDesc("directgate_owner_tables",
		"Owned tables, by kind (sequence, message), as the last discovery found them.", []string{"kind"}, nil)

	descSeqValues = prometheus.NewDesc("directgate_owner_sequence_values_total",
		"Sequence values handed out (NEXT n VALUES counts n).", tableLabel, nil)
	descSeqBlocks = prometheus.NewDesc("directgate_owner_sequence_blocks_total",
		"Blocks of values reserved on the primary: transactions that advanced next_id and committed. Values per block ≈ the sequence's cache.", tableLabel, nil)
	descMsgInserted = prometheus.NewDesc("directgate_owner_messages_inserted_total",
		"Rows inserted into the message table through the owner (the primary's affected rows).", tableLabel, nil)
	descMsgDelivered = prometheus.NewDesc("directgate_owner_messages_delivered_total",
		"Messages written to a subscriber (after being postponed on the primary); a message redelivered after its ack wait counts again.", tableLabel, nil)
	descMsgAcked = prometheus.NewDesc("directgate_owner_messages_acked_total",
		"Messages acked through the owner (the primary's affected rows of the acks).", tableLabel, nil)
	descMsgPurged = prometheus.NewDesc("directgate_owner_messages_purged_total",
		"Acked messages deleted after vt_purge_after.", tableLabel, nil)
	descQueuePending = prometheus.NewDesc("directgate_owner_queue_pending",
		"Due messages in the owner's cache waiting for a free subscriber (at most vt_cache_size). The cache is filled only while someone subscribes: with no subscriber it is 0 whatever the table holds.", tableLabel, nil)
	descQueueInFlight = prometheus.NewDesc("directgate_owner_queue_in_flight",
		"Messages in deliveries now: being postponed on the primary or written to a subscriber.", tableLabel, nil)
	descSubscribers = prometheus.NewDesc("directgate_owner_stream_subscribers",
		"STREAMs of the table open now.", tableLabel, nil)
	descQueueFailing = prometheus.NewDesc("directgate_owner_queue_failing",
		"1 while the queue's polls or postpones on the primary fail (messages do not flow), else 0.", tableLabel, nil)
)

// The resolver's figures (twopc.go), on the log cluster's owner.
var (
	descInDoubt = prometheus.NewDesc("directgate_twopc_in_doubt",
		"Prepared XA branches of the gateway's transactions the resolver's last round found on every cluster (those under way included).", nil, nil)
	descInDoubtAge = prometheus.NewDesc("directgate_twopc_in_doubt_oldest_seconds",
		"Age of the oldest transaction with a branch prepared at the resolver's last round; 0 none.", nil, nil)
	descResolved = prometheus.NewDesc("directgate_twopc_resolved_total",
		"Prepared branches the resolver ended after twopc.resolve_after, by decision (commit: the coordinator log had the gateway's decision to commit; rollback: it had none).", []string{"decision"}, nil)
)

var allStateDescs = []*prometheus.Desc{
	descInDoubt, descInDoubtAge, descResolved,
	descLeading, descTerm, descSessions, descPrimaryUp, descPrimaryChanges, descTables,
	descSeqValues, descSeqBlocks,
	descMsgInserted, descMsgDelivered, descMsgAcked, descMsgPurged,
	descQueuePending, descQueueInFlight, descSubscribers, descQueueFailing,
}

// stateCollector reads the owner's state at scrape time.
type stateCollector struct{ o *Owner }

// Describe implements prometheus.Collector.
func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allStateDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	o := c.o
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	term, standby := o.leading()
	if standby != nil {
		term = 0
	}
	gauge(descLeading, b2f(standby == nil))
	gauge(descTerm, float64(term))
	gauge(descSessions, float64(o.front.Len()))
	o.primMu.Lock()
	up, gen := o.prim != nil, o.primGen
	o.primMu.Unlock()
	gauge(descPrimaryUp, b2f(up))
	counter(descPrimaryChanges, gen)

	var sequences, messages int
	for _, t := range o.tables.Load().list {
		name := t.Schema + "." + t.Name
		switch {
		case t.seq != nil:
			sequences++
			counter(descSeqValues, t.seq.values.Load(), name)
			counter(descSeqBlocks, t.seq.blocks.Load(), name)
		case t.queue != nil:
			messages++
			q := t.queue
			counter(descMsgInserted, q.stats.inserted.Load(), name)
			counter(descMsgDelivered, q.stats.delivered.Load(), name)
			counter(descMsgAcked, q.stats.acked.Load(), name)
			counter(descMsgPurged, q.stats.purged.Load(), name)
			q.mu.Lock()
			pending, inFlight, subs, failing := len(q.inQueue), len(q.inFlight), len(q.subs), q.failing
			q.mu.Unlock()
			gauge(descQueuePending, float64(pending), name)
			gauge(descQueueInFlight, float64(inFlight), name)
			gauge(descSubscribers, float64(subs), name)
			gauge(descQueueFailing, b2f(failing), name)
		}
	}
	gauge(descTables, float64(sequences), kindSequence.String())
	gauge(descTables, float64(messages), kindMessage.String())
	if o.conf.Load().twopc.LogCluster == o.cluster {
		gauge(descInDoubt, float64(o.tpc.inDoubt.Load()))
		age := 0.0
		if ns := o.tpc.oldest.Load(); ns != 0 {
			age = time.Since(time.Unix(0, ns)).Seconds()
		}
		gauge(descInDoubtAge, age)
		counter(descResolved, o.tpc.committed.Load(), "commit")
		counter(descResolved, o.tpc.rolledBack.Load(), "rollback")
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
