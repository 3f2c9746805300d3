package gateway

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/ops"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/wire"
)

// Prometheus metrics. Everything is registered on a registry of the
// Server's own (see Server.Registry): nothing is global, so two servers in
// one process (tests) do not collide.
//
// Two kinds of metric:
//   - events the query path sees (statements, client connections, owner
//     forwards) are counters and histograms updated as they happen, through
//     the methods of *metrics below. Their label values are resolved once,
//     in newMetrics: a call is an atomic add, no map lookup, no allocation.
//   - state (backends, roles, pools, pins, discovery) is read by a
//     collector at scrape time from the live objects and the health
//     snapshot, so a backend removed by a reload has no series at the next
//     scrape, and nothing needs updating on the hot path.
//
// Labels are bounded: route, outcome, reason, state and role take fixed
// sets of values; cluster and backend are the configured ones.

// routeLabel is where a statement was served, the route label of the
// statement metrics.
type routeLabel uint8

const (
	// routePrimary: a pooled connection to the cluster's primary, or a
	// statement that needed one and found none.
	routePrimary routeLabel = iota
	// routeReplica: a pooled connection to a replica.
	routeReplica
	// routeOwner: forwarded to the cluster's owner process.
	routeOwner
	// routeLocal: answered by the gateway itself (KILL, SHOW GATEWAY,
	// USE @replica).
	routeLocal
	numRouteLabels
)

var routeNames = [numRouteLabels]string{"primary", "replica", "owner", "local"}

func (r routeLabel) String() string { return routeNames[r] }

// routeOf is the route label of a statement served on a connection taken
// for role r.
func routeOf(r role) routeLabel {
	if r == roleReplica {
		return routeReplica
	}
	return routePrimary
}

// outcomeLabel is how a statement ended, the outcome label of the
// statement metrics.
type outcomeLabel uint8

const (
	// outcomeOK: the backend answered without an error.
	outcomeOK outcomeLabel = iota
	// outcomeError: the backend (or owner) answered with an error packet,
	// relayed to the client unchanged.
	outcomeError
	// outcomeFailed: the gateway could not get an answer: no primary,
	// split brain, pool timeout, backend unreachable or lost mid-statement,
	// or the client went away while the answer was relayed.
	outcomeFailed
	numOutcomeLabels
)

var outcomeNames = [numOutcomeLabels]string{"ok", "error", "failed"}

func (o outcomeLabel) String() string { return outcomeNames[o] }

// outcomeOf classifies a statement from what the relay returned: err is a
// failure of the gateway or of a connection, res.Err the backend's error.
func outcomeOf(res wire.Result, err error) outcomeLabel {
	switch {
	case err != nil:
		return outcomeFailed
	case res.Err != nil:
		return outcomeError
	}
	return outcomeOK
}

// rejectReason is why a client connection was turned away before its
// session began.
type rejectReason uint8

const (
	// rejectTooMany: max_client_connections or a user's max_connections.
	rejectTooMany rejectReason = iota
	// rejectAuth: unknown user or wrong password.
	rejectAuth
	// rejectShutdown: the gateway is stopping.
	rejectShutdown
	// rejectHandshake: the handshake failed otherwise (client hung up,
	// timed out, asked for TLS, sent a malformed packet, named a database
	// the backend refused).
	rejectHandshake
	numRejectReasons
)

var rejectNames = [numRejectReasons]string{"too_many", "auth", "shutdown", "handshake"}

func (r rejectReason) String() string { return rejectNames[r] }

// statementBuckets are the upper bounds, in seconds, of the statement
// latency histograms: 100µs to 10s.
var statementBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// metrics holds a Server's Prometheus registry, its hot-path counters
// with their label values resolved, and the status page's latency
// samples. A nil *metrics records nothing, so servers built without New
// (benchmarks) need none.
type metrics struct {
	reg *prometheus.Registry

	clientsOpen     atomic.Int64
	clientsAccepted prometheus.Counter
	clientsRejected [numRejectReasons]prometheus.Counter

	statements [numRouteLabels][numOutcomeLabels]prometheus.Counter
	latency    [numRouteLabels]prometheus.Observer

	ownerForwards [numOutcomeLabels]prometheus.Counter

	disagreements [numDisagreeKinds]prometheus.Counter

	// diagCaptures and diagAnswers count reads of a connection's
	// ROW_COUNT(), FOUND_ROWS() and warnings before it goes back to the
	// pool, and statements answered from the session's copy of them.
	diagCaptures, diagAnswers prometheus.Counter

	// pipelined counts the reads answered on a pipe (pipeline.go),
	// pipeFallbacks the ones that went the usual way after all: their
	// pipe broke or was retired before their answer was read.
	pipelined prometheus.Counter
	// pipeFallbacks: [0] the pipe broke before the read's turn, [1] the
	// read's own answer broke off with nothing sent to the client.
	pipeFallbacks [2]prometheus.Counter
	// pipeInFlight counts the reads written to a pipe whose turn has not
	// ended; pipeDiagLosses the pipelined reads whose conditions could
	// not be read (their connection broke first); pipeLate the reads
	// that found every pipe late (pipelining.late_after).
	pipeInFlight   prometheus.Gauge
	pipeDiagLosses prometheus.Counter
	pipeLate       prometheus.Counter

	// offloads and connWaits count, for sessions on io_uring loops, the
	// waits that went to a goroutine and the waits for a pooled
	// connection on the loop, by outcome.
	offloads  [numOffloadReasons]prometheus.Counter
	connWaits [numConnWaitOutcomes]prometheus.Counter

	// spans counts transactions over several clusters by mode and
	// outcome.
	spans *prometheus.CounterVec
	// prepares counts twopc prepare phases by outcome.
	prepares [2]prometheus.Counter

	sampler *statusSampler
}

// newMetrics builds the registry of s: the hot-path families, the
// collector that reads s's state at scrape time, and the Go runtime and
// process collectors.
func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), sampler: newStatusSampler(sampleEvery, sparkSamples)}
	accepted := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "directgate_client_connections_accepted_total",
		Help: "Client TCP connections accepted (before the handshake; see directgate_client_connections_rejected_total for those turned away).",
	})
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_client_connections_rejected_total",
		Help: "Client connections turned away before their session began, by reason: too_many, auth, shutdown, handshake.",
	}, []string{"reason"})
	statements := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_statements_total",
		Help: "Client statements by route (primary, replica, owner, local) and outcome (ok; error: the backend answered with an error; failed: the gateway got no answer).",
	}, []string{"route", "outcome"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "directgate_statement_duration_seconds",
		Help:    "Time from a statement's arrival to the end of its answer to the client (retries and waits for a primary or a pooled connection included), by route.",
		Buckets: statementBuckets,
	}, []string{"route"})
	owner := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_owner_forwards_total",
		Help: "Requests to a cluster's owner (forwarded statements, streams, sequence reservations) by outcome (ok; error: the owner answered with an error; failed: the owner could not be reached or the connection broke).",
	}, []string{"outcome"})

	m.clientsAccepted = accepted
	for r := range numRejectReasons {
		m.clientsRejected[r] = rejected.WithLabelValues(r.String())
	}
	for r := range numRouteLabels {
		for o := range numOutcomeLabels {
			m.statements[r][o] = statements.WithLabelValues(r.String(), o.String())
		}
		m.latency[r] = latency.WithLabelValues(r.String())
	}
	for o := range numOutcomeLabels {
		m.ownerForwards[o] = owner.WithLabelValues(o.String())
	}
	disagree := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_classifier_disagreements_total",
		Help: "Statements for which the backend's session-state trackers reported something the statement classifier did not predict, by kind (variable: a system variable it did not see set; state_change: session state it did not see, such as a user variable set inside a procedure; next_transaction: next-transaction characteristics; schema: the default database). The server wins; a rising count points at a classifier gap.",
	}, []string{"kind"})
	for k := range numDisagreeKinds {
		m.disagreements[k] = disagree.WithLabelValues(k.String())
	}
	m.diagCaptures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "directgate_diagnostics_captures_total",
		Help: "Queries the gateway ran to read what a statement left for ROW_COUNT(), FOUND_ROWS() and SHOW WARNINGS (after an error, warnings, a CALL, a batch, ...) before its connection went back to the pool; most statements say it in their answer and need none.",
	})
	m.diagAnswers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "directgate_diagnostics_local_answers_total",
		Help: "Reads of ROW_COUNT(), FOUND_ROWS(), @@warning_count or SHOW WARNINGS answered from the session's copy, because the connection that ran the previous statement had gone back to the pool.",
	})
	offloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_io_loop_session_offloads_total",
		Help: "Waits of sessions on io_uring loops (io_loops) that ran on a goroutine, by what they waited for: pool (no idle pooled connection, after polling), pool_share, failover_buffer, throttle, hot_row, consolidation, owner, kill, own_query, login_delay. Each costs a goroutine and two wake-ups; on the fast path there are none.",
	}, []string{"reason"})
	for r := range numOffloadReasons {
		m.offloads[r] = offloads.WithLabelValues(r.String())
	}
	connWaits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_io_loop_connection_waits_total",
		Help: "Statements of sessions on io_uring loops that found every pooled connection busy and waited on their loop, by outcome: passed (a session of the loop passed its connection on), found (one came back to the pool, found within 1 ms), acquire (went on waiting in the pool's queue on a goroutine, counted in the pool offloads too: a dial could start, or sessions on goroutines waited first), timeout (pool.acquire_timeout passed), cancelled (KILL QUERY, the client gone).",
	}, []string{"outcome"})
	for o := range numConnWaitOutcomes {
		m.connWaits[o] = connWaits.WithLabelValues(o.String())
	}
	m.spans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_cross_cluster_transactions_total",
		Help: "Transactions that ran statements on two clusters or more, by transaction_mode (multi, twopc) and outcome (commit; rollback: rolled back by the client or after a failure before anything committed; partial: multi only, committed on some clusters and not on others; unknown: twopc, prepared, left to the resolver).",
	}, []string{"mode", "outcome"})
	prepares := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_twopc_prepares_total",
		Help: "Prepare phases of twopc commits (XA END and XA PREPARE on every participant) by outcome (ok; failed: a participant refused or was lost, and every participant was rolled back).",
	}, []string{"outcome"})
	m.prepares[0], m.prepares[1] = prepares.WithLabelValues("ok"), prepares.WithLabelValues("failed")
	// The state the operator surfaces read at scrape time (ops).
	m.reg.MustRegister(ops.Collectors((*opsGateway)(s))...)
	m.reg.MustRegister(m.spans, prepares, accepted, rejected, statements, latency, owner, disagree, m.diagCaptures, m.diagAnswers,
		offloads, connWaits, loopCollector{s: s},
		protectionsCollector{s: s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.pipelineCollectors()...)
	return m
}

// Registry returns the registry /metrics serves. Callers may register
// collectors of their own on it; it is never the default registry.
func (s *Server) Registry() *prometheus.Registry {
	if s.metrics == nil {
		return nil
	}
	return s.metrics.reg
}

// disagreeKind says what the server's session trackers reported that the
// classifier did not predict.
type disagreeKind uint8

const (
	disagreeVariable disagreeKind = iota
	disagreeStateChange
	disagreeNextTxn
	disagreeSchema
	numDisagreeKinds
)

func (k disagreeKind) String() string {
	return [...]string{"variable", "state_change", "next_transaction", "schema"}[k]
}

// diagCapture counts one read of a connection's diagnostics, diagAnswer
// one statement answered from the session's copy.
func (m *metrics) diagCapture() {
	if m != nil {
		m.diagCaptures.Inc()
	}
}

// pipelineCollectors makes the pipelined reads' metrics (pipeline.go)
// and returns them to register.
func (m *metrics) pipelineCollectors() []prometheus.Collector {
	m.pipelined = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "directgate_pipelined_reads_total",
		Help: "Reads sent on a shared connection behind the reads in flight there (pipelining) and answered there.",
	})
	m.pipeDiagLosses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "directgate_pipelined_read_conditions_lost_total",
		Help: "Pipelined reads whose conditions (warnings, an error) or FOUND_ROWS() could not be read from their connection: it broke first, or, for FOUND_ROWS() after an error part-way through a result set, a read was queued behind. SHOW WARNINGS then lists nothing (the counts, and an error, stay right).",
	})
	m.pipeInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "directgate_pipelined_reads_in_flight",
		Help: "Reads written to a shared connection (pipelining) whose session has not yet read their answer.",
	})
	fallbacks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "directgate_pipelined_read_fallbacks_total",
		Help: "Reads that joined a pipe and then ran the usual way, nothing of them having reached the client, by reason: pipe_broken (a read before it left its answer unread: its client went away part-way, its connection failed), connection_lost (its own answer broke off).",
	}, []string{"reason"})
	m.pipeFallbacks[0] = fallbacks.WithLabelValues("pipe_broken")
	m.pipeFallbacks[1] = fallbacks.WithLabelValues("connection_lost")
	m.pipeLate = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "directgate_pipelined_reads_late_total",
		Help: "Reads pipelining would have taken that ran the usual way because every pipe of their backend account and session state had a read out longer than pipelining.late_after (a slow read, a lock wait).",
	})
	return []prometheus.Collector{m.pipelined, fallbacks, m.pipeInFlight, m.pipeDiagLosses, m.pipeLate}
}

// pipeDiagLost counts a pipelined read whose conditions were cleared by
// the read behind it.
func (m *metrics) pipeDiagLost() {
	if m != nil {
		m.pipeDiagLosses.Inc()
	}
}

// pipeTurn counts a read written to a pipe (+1) and its turn ended (-1).
func (m *metrics) pipeTurn(d float64) {
	if m != nil {
		m.pipeInFlight.Add(d)
	}
}

// pipelinedRead counts a read answered on a pipe.
func (m *metrics) pipelinedRead() {
	if m != nil {
		m.pipelined.Inc()
	}
}

// pipeFallback counts a read that left its pipe for the usual path:
// lost says its own answer broke off, otherwise a turn before broke the
// pipe.
func (m *metrics) pipesLate() {
	if m != nil {
		m.pipeLate.Inc()
	}
}

func (m *metrics) pipeFallback(lost bool) {
	if m == nil {
		return
	}
	if lost {
		m.pipeFallbacks[1].Inc()
	} else {
		m.pipeFallbacks[0].Inc()
	}
}

func (m *metrics) diagAnswer() {
	if m != nil {
		m.diagAnswers.Inc()
	}
}

// offload counts one wait of a session on a loop that went to a
// goroutine.
func (m *metrics) offload(r offloadReason) {
	if m != nil {
		m.offloads[r].Inc()
	}
}

// connWait counts one wait of a session on a loop for a pooled
// connection, ended with outcome o.
func (m *metrics) connWait(o connWaitOutcome) {
	if m != nil {
		m.connWaits[o].Inc()
	}
}

// spanEnded counts one transaction over several clusters, ended with
// outcome in mode.
func (m *metrics) spanEnded(mode, outcome string) {
	if m != nil {
		m.spans.WithLabelValues(mode, outcome).Inc()
	}
}

// twopcPrepare counts one prepare phase.
func (m *metrics) twopcPrepare(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.prepares[0].Inc()
	} else {
		m.prepares[1].Inc()
	}
}

// disagreement counts one classifier disagreement of kind k.
func (m *metrics) disagreement(k disagreeKind) {
	if m == nil {
		return
	}
	m.disagreements[k].Inc()
}

// statement records one client statement: its route, how it ended and
// how long it took. It does not allocate.
func (m *metrics) statement(route routeLabel, outcome outcomeLabel, d time.Duration) {
	if m == nil {
		return
	}
	m.statements[route][outcome].Inc()
	m.latency[route].Observe(d.Seconds())
}

// stmtSpan is one client statement being measured. Start it with
// startStatement, record where it was served with served (or why it
// failed with failed), and end it with (*metrics).endStatement, typically
// deferred: nothing escapes, nothing allocates. Until told otherwise it
// counts as a failed statement for the primary.
type stmtSpan struct {
	start   time.Time
	route   routeLabel
	outcome outcomeLabel
}

// startStatement starts measuring a statement.
func startStatement(start time.Time) stmtSpan {
	return stmtSpan{start: start, route: routePrimary, outcome: outcomeFailed}
}

// served records the backend's answer (or the relay's failure) on a
// connection taken for role r. A retry calls it again and wins.
func (sp *stmtSpan) served(r role, res wire.Result, err error) {
	sp.route, sp.outcome = routeOf(r), outcomeOf(res, err)
}

// failed records a statement that got no backend answer because of err:
// an error the backend returned while the connection was being prepared
// (an unknown database) counts as error, anything else as failed.
func (sp *stmtSpan) failed(err error) {
	sp.outcome = outcomeFailed
	if _, ok := errors.AsType[*wire.SQLError](err); ok {
		sp.outcome = outcomeError
	}
}

// endStatement records the statement measured by sp.
func (m *metrics) endStatement(sp *stmtSpan) {
	if m == nil {
		return
	}
	m.statement(sp.route, sp.outcome, time.Since(sp.start))
}

// rejectReasonOf classifies a handshake that failed with err.
func rejectReasonOf(err error) rejectReason {
	if errors.Is(err, errUserLimit) {
		return rejectTooMany
	}
	if errors.Is(err, errAuthFailed) || errors.Is(err, errInsecureTransport) {
		return rejectAuth
	}
	return rejectHandshake
}

// clientAccepted counts a client connection accepted; pair it with
// clientClosed when the connection ends, whatever happened to it.
func (m *metrics) clientAccepted() {
	if m == nil {
		return
	}
	m.clientsAccepted.Inc()
	m.clientsOpen.Add(1)
}

// clientClosed counts the end of a connection counted by clientAccepted.
func (m *metrics) clientClosed() {
	if m == nil {
		return
	}
	m.clientsOpen.Add(-1)
}

// clientRejected counts a connection turned away before its session
// began. It is still closed with clientClosed.
func (m *metrics) clientRejected(reason rejectReason) {
	if m == nil {
		return
	}
	m.clientsRejected[reason].Inc()
}

// ownerForward counts a request to the owner by its transport outcome:
// nil is ok, a *forward.OwnerError (owner unreachable, connection lost)
// failed, anything else (an error the owner answered) error. A client
// that went away while the owner's answer was relayed is not the owner's
// failure: ok.
func (m *metrics) ownerForward(err error) {
	if m == nil {
		return
	}
	o := outcomeOK
	if err != nil {
		if _, ok := errors.AsType[*forward.OwnerError](err); ok {
			o = outcomeFailed
		} else if _, ok := errors.AsType[*wire.ClientError](err); !ok {
			o = outcomeError
		}
	}
	m.ownerForwards[o].Inc()
}

// pinReasons are the pin bits reported by reason, as in PinStats.
var pinReasons = func() []pinSet {
	var list []pinSet
	for i := range 8 {
		list = append(list, 1<<i)
	}
	return append(list, pinTxn, pinCursor, pinWarnings)
}()

// sessionCounts is what the sessions hold now, read at scrape time.
type sessionCounts struct {
	// pinned counts sessions by the reasons that pin them beyond one
	// statement (every reason but last_result and warnings).
	pinned map[string]int64
	inTxn  int64
}

// countSessions reads every session's published pins. list is
// Server.Sessions().
func countSessions(list []ops.SessionInfo) sessionCounts {
	c := sessionCounts{pinned: map[string]int64{}}
	for _, b := range pinReasons {
		if b&transientPins == 0 {
			c.pinned[pinName(b)] = 0
		}
	}
	for _, si := range list {
		if si.InTxn {
			c.inTxn++
		}
		for r := range strings.SplitSeq(si.Pinned, "|") {
			if _, ok := c.pinned[r]; ok {
				c.pinned[r]++
			}
		}
	}
	return c
}

// loopCollector reads the io_uring loops' counts (ioloop.Stats) at
// scrape time, one series per loop.
type loopCollector struct{ s *Server }

var (
	loopEntersDesc = prometheus.NewDesc("directgate_io_loop_enters_total",
		"io_uring_enter system calls of each io_uring loop (io_loops): each submits what the loop's sessions queued and, unless one polls, sleeps until something completes.", []string{"loop"}, nil)
	loopCompletionsDesc = prometheus.NewDesc("directgate_io_loop_completions_total",
		"Operations completed on each io_uring loop (reads, writes, timeouts, cancellations, wake-ups). Divided by directgate_io_loop_enters_total: the work one system call did; near 1, the loop wakes for every event.", []string{"loop"}, nil)
	loopTasksDesc = prometheus.NewDesc("directgate_io_loop_sessions",
		"Sessions running on each io_uring loop now.", []string{"loop"}, nil)
)

func (loopCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- loopEntersDesc
	ch <- loopCompletionsDesc
	ch <- loopTasksDesc
}

func (c loopCollector) Collect(ch chan<- prometheus.Metric) {
	loops := c.s.loops.Load()
	if loops == nil {
		return
	}
	for i, l := range *loops {
		st, name := l.Stats(), strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(loopEntersDesc, prometheus.CounterValue, float64(st.Enters), name)
		ch <- prometheus.MustNewConstMetric(loopCompletionsDesc, prometheus.CounterValue, float64(st.Completions), name)
		ch <- prometheus.MustNewConstMetric(loopTasksDesc, prometheus.GaugeValue, float64(st.Tasks), name)
	}
}

// protectionsCollector reads the protections' metrics (protect.Collector)
// at scrape time, cluster by cluster.
type protectionsCollector struct{ s *Server }

// Describe implements prometheus.Collector: the metrics of the first
// cluster's protections (every cluster has the same).
func (pc protectionsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, name := range pc.s.clusterNames[:min(1, len(pc.s.clusterNames))] {
		for _, p := range pc.s.clusters[name].guards.Policies() {
			if c, ok := p.(protect.Collector); ok {
				c.Describe(ch)
			}
		}
	}
}

// Collect implements prometheus.Collector.
func (pc protectionsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range pc.s.clusterNames {
		cl := pc.s.clusters[name]
		conf := cl.conf.Load()
		for _, p := range cl.guards.Policies() {
			if c, ok := p.(protect.Collector); ok {
				c.Collect(ch, name, conf)
			}
		}
	}
}
